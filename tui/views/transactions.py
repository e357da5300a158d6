"""Transactions: every transactional id (eosctl.txn.transactions.TxnInfo), hanging ones
(eosctl.txn.transactions.Hanging) in red."""

from __future__ import annotations

from typing import Any

from rich.text import Text

from eosctl.base.safetext import term
from eosctl.output.txns import abort_command
from eosctl.txn.abortsafety import from_capture
from eosctl.txn.transactions import TxnInfo
from tui import fmt
from tui.screens import DetailScreen
from tui.sources import Dashboard
from tui.styles import STYLES
from tui.tabledata import Col, Row
from tui.views.base import TableView

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


def counted(dash: Dashboard) -> list[Any]:
    """The hanging transactions `txns hanging` counts (HangingReport.counted): not those older than the
    max age only by a producer-set record timestamp."""
    report = dash.capture.hanging
    return report.counted if report is not None else []


def blocking(dash: Dashboard) -> list[Any]:
    """Open transactions holding an LSO now without being hanging
    (eosctl.txn.transactions.HangingReport.blocking)."""
    report = dash.capture.hanging
    return report.blocking if report is not None else []


def blocking_text(h: Any) -> str:
    who = f"pid {h.producer_id}" + (f" ({h.transactional_id})" if h.transactional_id else "")
    return (f"open transaction {who} blocks {h.topic}[{h.partition}] at LSO {h.lso}: {h.blocked} offsets "
            f"held back, open {fmt.duration(h.age_s)}")


def _hanging_index(hanging: list[Any]) -> tuple[dict[str, list[Any]], dict[int, list[Any]]]:
    """Hanging transactions by transactional id and (when the id is unknown) by producer id."""
    by_id: dict[str, list[Any]] = {}
    by_pid: dict[int, list[Any]] = {}
    for h in hanging:
        if h.transactional_id is not None:
            by_id.setdefault(h.transactional_id, []).append(h)
        else:
            by_pid.setdefault(h.producer_id, []).append(h)
    return by_id, by_pid


def _timeout(x: TxnInfo) -> str | None:
    """Integer.MAX_VALUE (a two-phase commit id, KIP-939) is no deadline: shown as none."""
    if x.two_phase:
        return "none (2PC)"
    return None if x.timeout_ms is None else fmt.duration(x.timeout_ms / 1000)


def txn_rows(dash: Dashboard) -> list[Row]:
    now_ms = int(dash.taken_at * 1000)
    rows = []
    matched: set[int] = set()
    by_id, by_pid = _hanging_index(dash.hanging)  # 10k transactional ids x hanging ones: no nested loop
    counts = {id(h) for h in counted(dash)}
    for x in dash.transactions:
        hs = by_id.get(x.transactional_id, []) + by_pid.get(x.producer_id, [])
        matched.update(id(h) for h in hs)
        parts = ", ".join(f"{t}[{p}]" for t, p in x.partitions)
        hung = any(id(h) in counts for h in hs)
        state = f"HANGING {x.state}" if hung else (f"{x.state} (old*)" if hs else x.state)
        if x.two_phase and x.active:  # KIP-939: prepared, or about to be; its external coordinator ends it
            state = f"{x.state} (2PC)"
        timeout = _timeout(x)
        level = "bad" if hung else ("warn" if x.active else None)
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
                x,
            )
        )
    for h in dash.hanging:  # hanging on a partition, but its coordinator lists no such transaction
        if id(h) not in matched:
            rows.append(
                Row(
                    f"h:{h.topic}:{h.partition}:{h.producer_id}",
                    (
                        h.transactional_id or "(unknown to the coordinator)",
                        "HANGING" if id(h) in counts else "open (old*)",
                        h.producer_id,
                        h.producer_epoch,
                        fmt.duration(h.age_s) + ("" if h.age_trusted else "*"),
                        None,
                        f"{h.topic}[{h.partition}]",
                    ),
                    "bad" if id(h) in counts else "warn",
                    h,
                )
            )
    return rows


def headline(dash: Dashboard) -> Text:
    if "transactions" in dash.errors:
        return Text(f"transactions unavailable: {term(dash.errors['transactions'])}", style=STYLES["warn"])
    active = sum(1 for x in dash.transactions if x.active)
    t = Text(f"{len(dash.transactions)} transactional ids · {active} open · ")
    if not dash.hanging_checked:
        t.append("hanging not checked (this snapshot has no hanging check)", style=STYLES["muted"])
    else:
        hung = counted(dash)
        if hung:
            t.append(f"{len(hung)} HANGING", style=STYLES["bad"])
            t.append(" (Enter for the detail)")
        else:
            t.append("none hanging", style=STYLES["ok"])
        unsure = len(dash.hanging) - len(hung)
        if unsure:
            t.append(f" · {unsure} old only by producer timestamps (*, not counted)", style=STYLES["warn"])
        young = blocking(dash)
        if young:
            named = "; ".join(term(blocking_text(h)) for h in young)
            t.append(f" · {len(young)} blocking an LSO now: {named}", style=STYLES["warn"])
    return t


def detail(dash: Dashboard, item: Any) -> DetailScreen | None:
    """The detail of a row's item: a TxnInfo, or a Hanging no coordinator lists."""
    now_ms = int(dash.taken_at * 1000)
    if isinstance(item, TxnInfo):
        x = item
        hs = hanging_of(x, dash.hanging)
        pairs: list[tuple[str, object]] = [
            ("transactional id", x.transactional_id),
            ("state", x.state),
            ("producer id", x.producer_id),
            ("epoch", x.producer_epoch),
            ("coordinator", x.coordinator_id),
            ("timeout", _timeout(x)),
            *([("two-phase commit", "yes (KIP-939): an external coordinator decides whether it commits; "
                                    "Kafka never times it out")] if x.two_phase else []),
            ("started", fmt.ms_stamp(x.start_time_ms)),
            ("age", fmt.duration(x.age_s(now_ms))),
            ("partitions", ", ".join(f"{t}[{p}]" for t, p in x.partitions)),
        ]
        for tp in x.partitions if x.active else ():
            safety = from_capture(dash.capture, tp, x.producer_id, x, now_ms)
            if safety is not None:
                pairs += [(f"{label} ({tp[0]}[{tp[1]}])" if i == 0 else f"  {label}", value)
                          for i, (label, value) in enumerate(safety.rows())]
        title = x.transactional_id
    else:
        hs = [item]
        pairs, title = [], "hanging transaction"
    for h in hs:
        safety = from_capture(dash.capture, (h.topic, h.partition), h.producer_id,
                              item if isinstance(item, TxnInfo) else None, now_ms)
        pairs += [
            ("HANGING on", f"{h.topic}[{h.partition}] from offset {h.first_offset}"),
            ("  rules", ", ".join(h.rules)),
            ("  LSO / HW", f"{h.lso} / {h.hw} ({h.blocked} blocked)"),
            ("  age", fmt.duration(h.age_s) + ("" if h.age_trusted else f" (by {h.age_source}: *)")),
            ("  coordinator says", h.coordinator_state),
        ]
        if safety is not None and not isinstance(item, TxnInfo):
            pairs += [(f"  {label}", value) for label, value in safety.rows()]
    note = None
    if hs:
        h = hs[0]
        hint = abort_command(h.topic, h.partition, h.first_offset, dash.command_args)
        note = Text(f"To clear it: {term(hint)}", style=STYLES["warn"])
    return DetailScreen(title, pairs, note)


class TransactionsView(TableView):
    NAME = "txn"
    COLUMNS = COLUMNS
    EMPTY = "no transactional ids"

    def rows(self, dash: Dashboard) -> list[Row]:
        return txn_rows(dash)

    def headline(self, dash: Dashboard) -> Text:
        return headline(dash)

    def detail(self, item: Any) -> DetailScreen | None:
        return detail(self.source, item)
