"""One finding as text, shared by the audit's renderers (table, JUnit)."""

from __future__ import annotations

from eosctl.findings import Finding


def where(f: Finding) -> str:
    if f.first_offset is None:  # invalid_row: the rows have no usable offset
        return "-"
    if f.first_offset == f.last_offset:
        return str(f.first_offset)
    return f"{f.first_offset}..{f.last_offset}"


def extra(f: Finding) -> str:
    parts = []
    if f.key is not None:
        parts.append(f"key {f.key}")
    if f.offsets is not None:
        parts.append("offsets " + ", ".join(map(str, f.offsets)))
    if f.detail:
        parts.append(f.detail)
    return "; ".join(parts)
