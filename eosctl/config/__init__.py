"""What a config holds (model), the TOML file read and validated (file), one value's check (values), the
${NAME} secrets hidden from output (redaction), what a command points at (target), a running sandbox
(sandboxstate), the audit's waivers and levels (policy) and a sink's route, the source records it should
hold (route)."""
