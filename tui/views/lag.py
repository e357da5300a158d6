"""Lag: per group and partition, LSO-aware lag (eosctl.lag.PartitionLag) with Burrow-style statuses."""

from __future__ import annotations

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.widgets import Static

from tui import fmt
from tui.data import Dashboard, LagKey
from tui.screens import DetailScreen
from tui.table import STYLES, Col, FilterTable, Row
from tui.views.base import View

COLUMNS = [
    Col("partition"),
    Col("committed", numeric=True),
    Col("LSO", numeric=True),
    Col("HW", numeric=True),
    Col("behind", numeric=True),
    Col("blocked", numeric=True),
    Col("time", numeric=True),
    Col("status"),
    Col("trend"),
]

STATUS_LEVEL = {"OK": None, "WARN": "warn", "STALL": "warn", "STOP": "bad", "REWIND": "bad", "ERR": "bad"}


def lag_key(p) -> str:
    return f"{p.group}:{p.topic}:{p.partition}"


def lag_rows(dash: Dashboard) -> list[Row]:
    if dash.lag is None:
        return []
    now_ms = dash.lag.taken_ms
    several = len(dash.lag.groups()) > 1
    rows = []
    for p in dash.lag.partitions:
        key: LagKey = (p.group, p.topic, p.partition)
        status = dash.statuses.get(key)
        word = status.status if status else "-"
        if p.open_txn is not None and word == "OK":
            word = "OK (txn)"
        behind = (
            None
            if p.records_behind is None
            else f"{p.records_behind:,}{'' if p.records_behind_exact else '+'}"
        )
        name = f"{p.topic}[{p.partition}]"
        rows.append(
            Row(
                lag_key(p),
                (
                    f"{p.group} {name}" if several else name,
                    p.committed,
                    p.lso,
                    p.hw,
                    behind,
                    p.blocked or "",
                    fmt.duration(p.time_lag_s(now_ms)),
                    word,
                    fmt.sparkline(dash.lag_history.get(key, [])),
                ),
                "bad" if p.error else STATUS_LEVEL.get(status.status if status else "OK"),
            )
        )
    return rows


def headline(dash: Dashboard) -> Text:
    if "lag" in dash.errors:
        return Text(f"lag unavailable: {dash.errors['lag']}", style=STYLES["warn"])
    if dash.lag is None or not dash.lag.partitions:
        return Text("no consumer group to measure (pass --group or a pipeline with a group)")
    t = Text()
    for i, g in enumerate(dash.lag.groups()):
        status = dash.group_statuses.get(g)
        rows = [p for p in dash.lag.partitions if p.group == g]
        behind = sum(p.records_behind or 0 for p in rows)
        blocked = sum(p.blocked for p in rows)
        if i:
            t.append("\n")
        t.append(f"group {g} ({dash.lag.group_states.get(g, '?').lower()}): {behind:,} records behind")
        if blocked:
            t.append(f" · {blocked:,} blocked by open transactions", style=STYLES["warn"])
        if status is not None:
            t.append(" · ")
            t.append(str(status), style=STYLES[STATUS_LEVEL.get(status.status) or "ok"])
    return t


def detail(dash: Dashboard, key: str) -> DetailScreen | None:
    p = next((p for p in (dash.lag.partitions if dash.lag else []) if lag_key(p) == key), None)
    if p is None:
        return None
    now_ms = dash.lag.taken_ms
    status = dash.statuses.get((p.group, p.topic, p.partition))
    behind = (
        None
        if p.records_behind is None
        else (
            f"{p.records_behind}"
            + ("" if p.records_behind_exact else " (at most: part of the window was not scanned)")
        )
    )
    pairs = [
        ("group", p.group),
        ("partition", f"{p.topic}[{p.partition}]"),
        ("committed", p.committed),
        ("log start", p.log_start),
        ("LSO", p.lso),
        ("HW", p.hw),
        ("lag to LSO", p.lag_to_lso),
        ("records behind", behind),
        ("HW - committed", f"{p.hw_lag} (what kafka-consumer-groups.sh calls LAG)"),
        ("blocked (HW - LSO)", p.blocked),
        ("open transaction", p.open_txn.describe(now_ms) if p.open_txn else None),
        ("time lag", fmt.duration(p.time_lag_s(now_ms))),
        ("status", str(status) if status else None),
        ("recent behind", " ".join(map(str, dash.lag_history.get((p.group, p.topic, p.partition), [])))),
    ]
    if p.error:
        pairs.append(("error", p.error))
    return DetailScreen(f"lag of {p.group} on {p.topic}[{p.partition}]", pairs)


class LagView(View):
    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self.dash: Dashboard | None = None

    def compose(self) -> ComposeResult:
        yield Static("", id="lag-head")
        yield FilterTable(COLUMNS, id="lag-table", empty="no lag rows")

    def show(self, dash: Dashboard) -> None:
        self.dash = dash
        self.query_one("#lag-head", Static).update(headline(dash))
        self.query_one(FilterTable).set_rows(lag_rows(dash))

    @on(FilterTable.Selected, "#lag-table")
    def _selected(self, event: FilterTable.Selected) -> None:
        if self.dash is not None and (screen := detail(self.dash, event.key)) is not None:
            self.app.push_screen(screen)
