"""`eosctl producers`: its table (the JSON form is eosctl.txn.producers' to_dict)."""

from __future__ import annotations

from typing import Any

from eosctl.base import safetext
from eosctl.output.terminal import table, time_text


def render_producers(out: Any, report: Any) -> None:
    from eosctl.txn.producers import epochs_text  # lazy: see docs/imports.md

    cols = ["partition", "producer id", "transactional id", "epoch", "last sequence", "last timestamp (UTC)",
            "open txn from", "epochs", "fencing", "zombie writes"]
    rows = []
    for r in report.producers:
        pid = str(r.producer_id) + (" (expired)" if r.in_broker_state is False else "") + (
            f" (continues {r.continues_producer_id})" if r.continues_producer_id is not None else "")
        rows.append([r.partition, pid, safetext.text(r.transactional_id or "-"), r.producer_epoch,
                     r.last_sequence, time_text(r.last_timestamp_ms), r.current_txn_start_offset,
                     epochs_text(r.epochs, r.earlier_epochs), r.fencing_events, r.zombie_writes])
    if rows:
        out.print(table(f"Producers of {report.topic} ({len(rows)})", cols, rows,
                        drop=("last sequence", "zombie writes", "epochs", "last timestamp (UTC)")))
    else:
        out.print(safetext.text(f"no producers with a producer id on {report.topic}"))
    out.print(safetext.text(f"source: {report.source} - {report.note}"))
