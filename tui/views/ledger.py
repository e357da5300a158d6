"""Ledger: per source partition, what the sink holds next to what Kafka says
(eosctl.inspection.ledger.Ledger)."""

from __future__ import annotations

from rich.text import Text
from textual.message import Message

from eosctl.base.safetext import term
from tui import fmt
from tui.sources import Dashboard
from tui.styles import STYLES
from tui.tabledata import Col, Row
from tui.views.base import TableView

COLUMNS = [
    Col("partition"),
    Col("rows", numeric=True),
    Col("offsets"),
    Col("dup", numeric=True),
    Col("stored", numeric=True),
    Col("committed", numeric=True),
    Col("LSO", numeric=True),
    Col("flags"),
]


def ledger_key(p) -> str:
    return f"{p.topic}:{p.partition}"


def ledger_rows(ledger) -> list[Row]:
    rows = []
    for p in ledger.partitions if ledger is not None else []:
        span = "-" if p.min_offset is None else fmt.offsets(p.min_offset, p.max_offset)
        flags = "; ".join(f.message for f in p.flags[:2])
        if len(p.flags) > 2:
            flags += f" (+{len(p.flags) - 2} more)"
        level = "bad" if p.flags else None
        rows.append(
            Row(
                ledger_key(p),
                (
                    f"{p.topic or '-'}[{'-' if p.partition is None else p.partition}]",  # invalid_row
                    fmt.count(p.rows),
                    span,
                    fmt.count(p.duplicate_rows) if p.duplicate_rows else "",
                    p.stored_offset,
                    p.committed_offset,
                    p.last_stable_offset,
                    flags or "ok",
                ),
                level,
                p,
            )
        )
    return rows


def describe_partition(p) -> Text:
    """A sink partition's whole story for the detail pane: every flag, whole (the flags cell shows two,
    cut to fit the screen)."""
    t = Text()
    t.append(f"{term(p.topic or '-')}[{'-' if p.partition is None else p.partition}]", style="bold")
    span = "-" if p.min_offset is None else fmt.offsets(p.min_offset, p.max_offset)
    t.append(f" · {fmt.count(p.rows)} rows at offsets {span} · stored {_or_dash(p.stored_offset)} · "
             f"committed {_or_dash(p.committed_offset)} · LSO {_or_dash(p.last_stable_offset)}")
    if not p.flags:
        t.append("\nno flags", style=STYLES["ok"])
    for f in p.flags:
        t.append(f"\n{term(f.message)}", style=STYLES["bad"])
    if p.topic is not None and p.partition is not None:
        t.append("\nEnter opens " + ("the first flag's offsets" if p.flags else "these offsets")
                 + " in the Log view", style=STYLES["muted"])
    return t


def _or_dash(value) -> str:
    return "-" if value is None else str(value)


def headline(ledger, error: str | None) -> Text:
    if error:
        return Text(f"ledger unavailable: {term(error)}", style=STYLES["bad"])
    if ledger is None:
        return Text("no sink configured for this pipeline (add [pipelines.NAME.sink] to the config)")
    flagged = sum(1 for p in ledger.partitions if p.flags)
    rows = sum(p.rows for p in ledger.partitions)
    t = Text(f"sink {term(ledger.sink)} · {rows:,} rows · {len(ledger.partitions)} partitions · ")
    t.append(f"{flagged} flagged" if flagged else "no flags", style=STYLES["bad" if flagged else "ok"])
    if ledger.group:
        t.append(f" · group {term(ledger.group)}")
    return t


class LedgerView(TableView):
    NAME = "ledger"
    COLUMNS = COLUMNS
    EMPTY = "no sink partitions"

    class OpenLog(Message):
        def __init__(self, topic: str, partition: int, first: int, last: int) -> None:
            super().__init__()
            self.topic, self.partition, self.first, self.last = topic, partition, first, last

    def rows(self, dash: Dashboard) -> list[Row]:
        return ledger_rows(dash.ledger)

    def headline(self, dash: Dashboard) -> Text:
        return headline(dash.ledger, dash.errors.get("ledger"))

    def describe(self, p) -> Text:
        return describe_partition(p)

    def selected(self, p) -> None:
        if p.topic is None or p.partition is None:  # rows no partition owns: no log to show
            return
        flag = next((f for f in p.flags if f.first_offset is not None), None)
        first = flag.first_offset if flag else (p.min_offset or 0)
        last = flag.last_offset if flag and flag.last_offset is not None else first
        self.post_message(self.OpenLog(p.topic, p.partition, first, last))
