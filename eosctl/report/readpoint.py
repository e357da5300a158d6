"""The one state of the sink an audit read (its read point): what a sink reader names, what a report holds
(``AuditReport.sink_read_point``, parsed once from a report file) and what every renderer describes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ReadPoint:
    """The one state of the sink a reader read: its kind, the sink as the user named it (never a
    password), and what the kind pins (``at``: e.g. copied_at for a DuckDB file; snapshot and
    server_version for PostgreSQL). JSON-able as to_dict()."""

    kind: str
    source: str
    at: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "source": self.source, **self.at}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ReadPoint:
        rest = {k: v for k, v in d.items() if k not in ("kind", "source")}
        # As read: a report file's kind or source that is not a string is named by its check
        # (eosctl.report.file), not turned into one.
        return cls(d.get("kind", ""), d.get("source", ""), rest)

    def describe(self) -> str:
        """For people: e.g. "PostgreSQL 15.18, snapshot 00000003-0000001B-1", "a copy taken at ..."."""
        at = self.at
        if self.kind == "postgres":
            return f"PostgreSQL {at.get('server_version', '?')}, snapshot {at.get('snapshot', '?')}"
        if self.kind == "duckdb":
            return f"a copy taken at {at['copied_at']}" if "copied_at" in at else "the file in place"
        if self.kind == "delta":
            return f"version {at.get('version', '?')}" + (
                f" (offsets table version {at['offsets_version']})" if "offsets_version" in at else "")
        if self.kind == "iceberg":
            offsets = at.get("offsets_snapshot_id")
            return f"snapshot {at.get('snapshot_id', '?')}" + (
                f" (offsets table snapshot {offsets})" if offsets else "")
        if self.kind == "parquet":
            return f"the files listed at {at['files_listed_at']}" if "files_listed_at" in at \
                else "the files in place"
        if self.kind == "kafka_topic":
            ends = at.get("end_offsets") or []
            shown = ", ".join(f"[{e['partition']}] {e['offset']}" for e in ends[:8])
            more = f" and {len(ends) - 8} more" if len(ends) > 8 else ""
            return f"read_committed up to end offsets {shown}{more} at {at.get('read_at', '?')}"
        return ", ".join(f"{k} {v}" for k, v in at.items()) or "in place"
