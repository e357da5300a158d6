"""`eosctl snapshot`: what it says it captured (the snapshot itself is eosctl.inspection.snapshot's DuckDB
file)."""

from __future__ import annotations

from typing import Any

from rich.text import Text

from eosctl.base import safetext
from eosctl.output.terminal import age_text


def render_snapshot(out: Any, captured: Any, out_path: str) -> None:
    when = captured.captured_at.isoformat(timespec="seconds")
    out.print(safetext.text(f"snapshot written to {out_path} (captured {when})"))
    for name, status in captured.sections.items():
        # Text, not markup: a reason names a config section ("check [pipelines.X.sink].table") or a
        # broker's error text.
        style = "green" if status == "ok" else "yellow"
        text = Text.assemble(f"  {name:<13} ", safetext.text(status, style=style))
        if name == "hanging" and captured.hanging is not None:
            text.append(f" ({_hanging_summary(captured)})")
        elif name == "audit" and captured.audit is not None:
            text.append(f" ({captured.audit.verdict}, {len(captured.audit.findings)} findings)")
        out.print(text)


def _hanging_summary(captured: Any) -> str:
    rep = captured.hanging
    younger = len(captured.hanging_candidates) - len(rep.hanging)
    # Older only by producer-set record timestamps: listed, not counted
    # (eosctl.txn.transactions.Hanging.counts).
    unsure = len(rep.hanging) - len(rep.counted)
    return (f"{len(rep.counted)} hanging (open longer than {age_text(rep.max_age_s)}), "
            + (f"{unsure} older only by producer timestamps, " if unsure else "")
            + f"{younger} younger open transaction{'s' if younger != 1 else ''} recorded")
