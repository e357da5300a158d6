"""`eosctl snapshot`: what it says it captured (the snapshot itself is eosctl.snapshot's DuckDB file)."""

from __future__ import annotations

from typing import Any

from rich.markup import escape

from eosctl.output.terminal import age_text


def render_snapshot(out: Any, captured: Any, out_path: str) -> None:
    when = captured.captured_at.isoformat(timespec="seconds")
    out.print(f"snapshot written to {out_path} (captured {when})")
    for name, status in captured.sections.items():
        # escape: a reason naming a config section ("check [pipelines.X.sink].table") is not markup.
        text = '[green]ok[/]' if status == 'ok' else '[yellow]' + escape(status) + '[/]'
        if name == "hanging" and captured.hanging is not None:
            text += f" ({_hanging_summary(captured)})"
        elif name == "audit" and captured.audit is not None:
            text += f" ({captured.audit.verdict}, {len(captured.audit.findings)} findings)"
        out.print(f"  {name:<13} {text}")


def _hanging_summary(captured: Any) -> str:
    rep = captured.hanging
    younger = len(captured.hanging_candidates) - len(rep.hanging)
    return (f"{len(rep.hanging)} hanging (open longer than {age_text(rep.max_age_s)}), "
            f"{younger} younger open transaction{'s' if younger != 1 else ''} recorded")
