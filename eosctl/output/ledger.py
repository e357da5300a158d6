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
                      p.duplicate_rows, p.stored_offset,
                      f"{p.committed_offset} pending" if p.commit_pending else p.committed_offset,
                      p.log_start_offset,
                      p.last_stable_offset, p.high_watermark, p.missing_offsets, len(p.flags) or "")
                     for p in result.partitions]))
    if result.pending_commit:
        out.print(safetext.text(pending_line(result.group, result.pending_commit), style="yellow"))
    flagged = result.flags
    if not flagged:
        out.print("[green]no flags[/]: the sink agrees with Kafka")
        return
    out.print(table(f"Flags ({len(flagged)})", ["topic", "partition", "kind", "offsets", "count", "what"],
                    [(p.topic, p.partition, f.kind, span(f.first_offset, f.last_offset), f.count, f.message)
                     for p, f in flagged]))




def pending_line(group: str | None, pc: dict[str, Any]) -> str:
    """What holds the group's offset commit: the table's ``pending`` committed offsets are those before it."""
    txns = " or ".join(f"{t['transactional_id'] or '?'} (pid {t['producer_id']}, epoch {t['producer_epoch']})"
                       for t in pc["transactions"]) or "an open transaction"
    where = f"{pc['offsets_topic']}-{pc['offsets_partition']}" if pc["offsets_partition"] is not None \
        else pc["offsets_topic"]
    return (f"group {group}'s next offset commit is pending in {txns} on {where}: a read_committed "
            f"consumer of the group waits for it (committed: the offsets before it)")
