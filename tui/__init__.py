"""The Textual TUI of eosctl. Depends on the eosctl core only (never on auditors)."""
