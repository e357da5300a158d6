"""What a config holds (model), the TOML file read and validated (file), one value's check (values), the
${NAME} secrets hidden from output (redaction), what a command points at (target) and a running sandbox
(sandboxstate)."""
