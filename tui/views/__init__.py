"""One module per tab. Each view turns core dataclasses into table rows (formatting only)."""
