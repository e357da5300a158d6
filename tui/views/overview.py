"""Overview: one row per pipeline with red / amber / green and the reason in words.

The colour is only a summary of what the other views show (audit verdict, hanging transactions, lag
statuses, ledger flags); nothing is measured here.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text

from eosctl.base.safetext import term
from tui.sources import Dashboard
from tui.styles import STYLES
from tui.tabledata import Col, Row, TableData
from tui.views.base import Prepared, TableView
from tui.views.producers import fenced
from tui.views.transactions import blocking, blocking_text, counted

COLUMNS = [
    Col("pipeline"),
    Col("health"),
    Col("audit"),
    Col("behind", numeric=True),
    Col("open/hung"),
    Col("fenced", numeric=True),
    Col("sink rows", numeric=True),
]
LEVEL = {"RED": "bad", "AMBER": "warn", "GREEN": "ok"}


@dataclass(frozen=True)
class Health:
    colour: str  # RED | AMBER | GREEN
    reasons: tuple[str, ...]


def health(dash: Dashboard) -> Health:
    red: list[str] = []
    amber: list[str] = []
    hung = counted(dash)
    for h in hung:
        red.append(
            f"hanging transaction pid {h.producer_id}"
            + (f" ({term(h.transactional_id)})" if h.transactional_id else "")
            + f" on {h.topic}[{h.partition}] from offset "
            f"{h.first_offset} ({h.blocked} records blocked)"
        )
    unsure = len(dash.hanging) - len(hung)
    if unsure:
        amber.append(f"{unsure} open transaction{'s' if unsure != 1 else ''} old only by producer timestamps "
                     "(not counted as hanging; see Transactions)")
    if dash.audit is not None and dash.audit.verdict != "pass":
        kinds = sorted({f.kind for f in dash.audit.failing})
        red.append(f"audit failed: {len(dash.audit.failing)} findings ({', '.join(kinds)})")
    flagged = [p for p in (dash.ledger.partitions if dash.ledger else []) if p.flags]
    if flagged:
        red.append(
            f"ledger flags {len(flagged)} sink partition{'s' if len(flagged) != 1 else ''} "
            f"({', '.join(sorted({f.kind for p in flagged for f in p.flags}))})"
        )
    for g, s in sorted(dash.group_statuses.items()):
        if s.status in ("STOP", "REWIND", "ERR"):
            red.append(f"group {g} {s}")
        elif s.status in ("WARN", "STALL"):
            amber.append(f"group {g} {s}")
    young = blocking(dash)
    amber += [blocking_text(h) for h in young]
    open_txns = [x for x in dash.transactions if x.active]
    if open_txns and not hung and not young:
        amber.append(f"{len(open_txns)} transaction{'s' if len(open_txns) != 1 else ''} open")
    # A producer writes to several partitions: one producer, however many partitions saw its fencing.
    cut_off = {r.producer_id for r in dash.producers if fenced(r)}
    if cut_off:
        amber.append(
            f"{len(cut_off)} producer{'s' if len(cut_off) != 1 else ''} fenced (a new instance took over; "
            "the old one was cut off)"
        )
    zombies = sum(r.zombie_writes for r in dash.producers)
    if zombies:
        red.append(f"{zombies} zombie write{'s' if zombies != 1 else ''} after fencing")
    behind = _behind(dash)
    if behind:
        amber.append(f"{behind:,} records behind (read_committed, LSO-aware)")
    for name, why in sorted(dash.errors.items()):
        amber.append(f"{name}: {why}")
    if dash.audit is None:
        amber.append("no audit yet (press 7 then a)")
    if red:
        return Health("RED", tuple(red + amber))
    if amber:
        return Health("AMBER", tuple(amber))
    return Health("GREEN", ("audit passed, nothing behind, no open transactions",))


def _behind(dash: Dashboard) -> int:
    return sum(p.records_behind or 0 for p in (dash.lag.partitions if dash.lag else []))


def overview_rows(dash: Dashboard) -> list[Row]:
    h = health(dash)
    audit = "-" if dash.audit is None else dash.audit.verdict.upper()
    open_txns = sum(1 for x in dash.transactions if x.active)
    hung = str(len(counted(dash))) if dash.hanging_checked else "?"
    fenced_count = len({r.producer_id for r in dash.producers if fenced(r)})
    rows = sum(p.rows for p in dash.ledger.partitions) if dash.ledger else None
    return [
        Row(
            f"p:{dash.pipeline}",
            (
                dash.pipeline,
                h.colour,
                audit,
                f"{_behind(dash):,}",
                f"{open_txns}/{hung}",
                fenced_count,
                None if rows is None else f"{rows:,}",
            ),
            LEVEL[h.colour],
        )
    ]


def unread_rows(pipeline: str) -> list[Row]:
    """The Overview's row for a pipeline nothing could be read of yet: its name, RED, nothing measured."""
    return [Row(f"p:{pipeline}", (pipeline, "RED", "-", "?", "?/?", "?", None), LEVEL["RED"])]


def reasons(dash: Dashboard | Health) -> Text:
    h = dash if isinstance(dash, Health) else health(dash)
    t = Text()
    style = STYLES[LEVEL[h.colour]]
    t.append(f"{h.colour}", style=f"{style} reverse")
    t.append(" because:\n" if h.colour != "GREEN" else " ")
    for r in h.reasons:
        r = term(r)  # topics, groups and errors come from the cluster
        t.append(f"  • {r}\n" if h.colour != "GREEN" else r, style=style if h.colour != "GREEN" else "")
    return t


class OverviewView(TableView):
    NAME = "overview"
    COLUMNS = COLUMNS
    EMPTY = "no pipeline"
    HEAD = "reasons"
    HEAD_BELOW = True

    def rows(self, dash: Dashboard) -> list[Row]:
        return overview_rows(dash)

    def headline(self, dash: Dashboard) -> Text:
        return reasons(dash)

    def unread(self, pipeline: str, error: str) -> None:
        """Show ``pipeline`` as configured, RED because nothing of it could be read (``error``)."""
        data = TableData.of(self.COLUMNS, unread_rows(pipeline), self._data)
        self.present(Prepared(reasons(Health("RED", (f"cannot be read: {error}",))), data, None))
