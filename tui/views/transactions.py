"""Transactions: every transactional id (eosctl.txns.TxnInfo), hanging ones (eosctl.txns.Hanging) in red."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.widgets import Static

from tui import fmt
from tui.data import Dashboard
from tui.screens import DetailScreen
from tui.table import STYLES, Col, FilterTable, Row
from tui.views.base import View

COLUMNS = [
    Col("transactional id"),
    Col("state"),
    Col("pid", numeric=True),
    Col("epoch", numeric=True),
    Col("age", numeric=True),
    Col("timeout", numeric=True),
    Col("partitions"),
]


def hanging_of(txn: Any, hanging: list[Any]) -> list[Any]:
    return [
        h
        for h in hanging
        if h.transactional_id == txn.transactional_id
        or (h.transactional_id is None and h.producer_id == txn.producer_id)
    ]


def txn_rows(dash: Dashboard) -> list[Row]:
    now_ms = int(dash.taken_at * 1000)
    rows = []
    matched: set[int] = set()
    for x in dash.transactions:
        hs = hanging_of(x, dash.hanging)
        matched.update(id(h) for h in hs)
        parts = ", ".join(f"{t}[{p}]" for t, p in x.partitions)
        state = f"HANGING {x.state}" if hs else x.state
        timeout = None if x.timeout_ms is None else fmt.duration(x.timeout_ms / 1000)
        level = "bad" if hs else ("warn" if x.active else None)
        rows.append(
            Row(
                f"t:{x.transactional_id}",
                (
                    x.transactional_id,
                    state,
                    x.producer_id,
                    x.producer_epoch,
                    fmt.duration(x.age_s(now_ms)),
                    timeout,
                    parts,
                ),
                level,
            )
        )
    for h in dash.hanging:  # hanging on a partition, but its coordinator lists no such transaction
        if id(h) not in matched:
            rows.append(
                Row(
                    f"h:{h.topic}:{h.partition}:{h.producer_id}",
                    (
                        h.transactional_id or "(unknown to the coordinator)",
                        "HANGING",
                        h.producer_id,
                        h.producer_epoch,
                        fmt.duration(h.age_s),
                        None,
                        f"{h.topic}[{h.partition}]",
                    ),
                    "bad",
                )
            )
    return rows


def headline(dash: Dashboard) -> Text:
    if "transactions" in dash.errors:
        return Text(f"transactions unavailable: {dash.errors['transactions']}", style=STYLES["warn"])
    active = sum(1 for x in dash.transactions if x.active)
    t = Text(f"{len(dash.transactions)} transactional ids · {active} open · ")
    if not dash.hanging_checked:
        t.append("hanging not checked (this snapshot has no hanging check)", style=STYLES["muted"])
    elif dash.hanging:
        t.append(f"{len(dash.hanging)} HANGING", style=STYLES["bad"])
        t.append(" (Enter for the detail)")
    else:
        t.append("none hanging", style=STYLES["ok"])
    return t


def detail(dash: Dashboard, key: str) -> DetailScreen | None:
    now_ms = int(dash.taken_at * 1000)
    if key.startswith("t:"):
        x = next((x for x in dash.transactions if x.transactional_id == key[2:]), None)
        if x is None:
            return None
        hs = hanging_of(x, dash.hanging)
        pairs: list[tuple[str, object]] = [
            ("transactional id", x.transactional_id),
            ("state", x.state),
            ("producer id", x.producer_id),
            ("epoch", x.producer_epoch),
            ("coordinator", x.coordinator_id),
            ("timeout", None if x.timeout_ms is None else f"{x.timeout_ms} ms"),
            ("started", fmt.ms_stamp(x.start_time_ms)),
            ("age", fmt.duration(x.age_s(now_ms))),
            ("partitions", ", ".join(f"{t}[{p}]" for t, p in x.partitions)),
        ]
        title = x.transactional_id
    else:
        hs = [h for h in dash.hanging if f"h:{h.topic}:{h.partition}:{h.producer_id}" == key]
        pairs, title = [], "hanging transaction"
    for h in hs:
        pairs += [
            ("HANGING on", f"{h.topic}[{h.partition}] from offset {h.first_offset}"),
            ("  rules", ", ".join(h.rules)),
            ("  LSO / HW", f"{h.lso} / {h.hw} ({h.blocked} blocked)"),
            ("  age", fmt.duration(h.age_s)),
            ("  coordinator says", h.coordinator_state),
        ]
    note = None
    if hs:
        h = hs[0]
        note = Text(
            f"To clear it: eosctl txns abort --topic {h.topic} --partition {h.partition} "
            f"--start-offset {h.first_offset}",
            style=STYLES["warn"],
        )
    return DetailScreen(title, pairs, note)


class TransactionsView(View):
    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self.dash: Dashboard | None = None

    def compose(self) -> ComposeResult:
        yield Static("", id="txn-head")
        yield FilterTable(COLUMNS, id="txn-table", empty="no transactional ids")

    def show(self, dash: Dashboard) -> None:
        self.dash = dash
        self.query_one("#txn-head", Static).update(headline(dash))
        self.query_one(FilterTable).set_rows(txn_rows(dash))

    @on(FilterTable.Selected, "#txn-table")
    def _selected(self, event: FilterTable.Selected) -> None:
        if self.dash is not None and (screen := detail(self.dash, event.key)) is not None:
            self.app.push_screen(screen)
