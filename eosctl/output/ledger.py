"""`eosctl ledger`: its tables (the JSON form is eosctl.inspection.ledger's to_dict)."""

from __future__ import annotations

from typing import Any

from eosctl.base import safetext
from eosctl.inspection.ledger import span
from eosctl.output.terminal import table


def render_ledger(out: Any, result: Any) -> None:
    out.print(safetext.text(
        f"sink {result.sink}   group {result.group or '-'}   "
        f"{'checked against the log' if result.scanned else 'not checked against the log (--no-scan)'}"))
    out.print(table("Ledger", ["topic", "partition", "rows", "distinct", "min", "max", "dup rows", "stored",
                               "committed", "log start", "lso", "hw", "missing", "flags"],
                    [(p.topic, p.partition, p.rows, p.distinct_offsets, p.min_offset, p.max_offset,
                      p.duplicate_rows, p.stored_offset, p.committed_offset, p.log_start_offset,
                      p.last_stable_offset, p.high_watermark, p.missing_offsets, len(p.flags) or "")
                     for p in result.partitions]))
    flagged = result.flags
    if not flagged:
        out.print("[green]no flags[/]: the sink agrees with Kafka")
        return
    out.print(table(f"Flags ({len(flagged)})", ["topic", "partition", "kind", "offsets", "count", "what"],
                    [(p.topic, p.partition, f.kind, span(f.first_offset, f.last_offset), f.count, f.message)
                     for p, f in flagged]))


