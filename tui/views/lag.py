"""Lag: per group and partition, LSO-aware lag (eosctl.inspection.lag.PartitionLag) with Burrow-style
statuses."""

from __future__ import annotations

from rich.text import Text

from eosctl.base.safetext import term
from tui import fmt
from tui.screens import DetailScreen
from tui.sources import Dashboard, LagKey
from tui.styles import STYLES
from tui.tabledata import Col, Row
from tui.views.base import TableView

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
    statuses, history = dash.statuses, dash.lag_history
    rows = []
    for p in dash.lag.partitions:
        key: LagKey = (p.group, p.topic, p.partition)
        status = statuses.get(key)
        word = status.status if status else "-"
        level = "bad" if p.error else STATUS_LEVEL.get(status.status if status else "OK")
        if p.open_txn is not None and word in ("OK", "-"):
            if p.blocked and p.committed is not None and p.committed >= p.lso:
                # At the LSO with records held back beyond it: blocked, whatever one poll's window says (a
                # snapshot has one poll, so its window always says OK).
                word, level = "BLOCKED (txn)", "warn"
            else:
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
                    # An offset commit an open transaction holds: the committed offset is the one before it.
                    p.committed if p.pending is None else f"{fmt.count(p.committed)} pending",
                    p.lso,
                    p.hw,
                    behind,
                    p.blocked or "",
                    fmt.duration(p.time_lag_s(now_ms)),
                    word,
                    fmt.sparkline(history.get(key, ())),
                ),
                level,
                p,
            )
        )
    return rows


def headline(dash: Dashboard) -> Text:
    if "lag" in dash.errors:
        return Text(f"lag unavailable: {term(dash.errors['lag'])}", style=STYLES["warn"])
    if dash.lag is None or not dash.lag.partitions:
        return Text("no consumer group to measure (pass --group or a pipeline with a group)")
    behind: dict[str, int] = {}
    blocked: dict[str, int] = {}
    pending = {}
    for p in dash.lag.partitions:  # one pass: 10k partitions x several groups adds up
        behind[p.group] = behind.get(p.group, 0) + (p.records_behind or 0)
        blocked[p.group] = blocked.get(p.group, 0) + p.blocked
        if p.pending is not None:
            pending[p.group] = p.pending
    t = Text()
    failover = failover_lines(dash)
    for i, g in enumerate(behind):
        status = dash.group_statuses.get(g)
        if i:
            t.append("\n")
        state = dash.lag.group_states.get(g, "?").lower()
        kind = dash.lag.group_types.get(g)
        if kind and kind != "classic":  # KIP-848's consumer protocol, a streams or share group
            state = f"{state}, {kind} group"
            described = dash.lag.descriptions.get(g)
            if described is not None:  # its members as the describe API of its type lists them
                n = len(described.members)
                state += f", {n} member{'' if n == 1 else 's'}"
        t.append(f"group {term(g)} ({term(state)}): {behind[g]:,} records behind")
        if blocked[g]:
            t.append(f" · {blocked[g]:,} blocked by open transactions", style=STYLES["warn"])
        if g in pending:  # what a transactional stage does between commits: said, not judged
            t.append(f" · offset commit {term(pending[g].describe(dash.lag.taken_ms))}")
        if status is not None:
            t.append(" · ")
            t.append(term(str(status)), style=STYLES[STATUS_LEVEL.get(status.status) or "ok"])
        if g in dash.lag.share_warnings:  # a share group processing aborted records
            t.append(f"\n  {term(dash.lag.share_warnings[g])}", style=STYLES["warn"])
        if g in failover:  # records it would never see are a loss: warn
            said, lost = failover[g]
            t.append(f"\n  failover to the replica: {term(said)}", style=STYLES["warn"] if lost else "")
    return t


def failover_text(f) -> str:
    """``TOPIC[P] @D +R again -M never`` (eosctl.inspection.failover.Failover; as `eosctl lag`'s column)."""
    where = f"{f.replica}[{f.partition}]"
    if f.resume is None:
        return f"{where} no checkpoint"
    if f.rereads is None or f.misses is None:
        return f"{where} @{f.resume}"
    return f"{where} @{f.resume} +{f.rereads} again -{f.misses} never"


def failover_lines(dash: Dashboard) -> dict[str, tuple[str, bool]]:
    """Each group's failover readiness on the replica (read with the last audit): its text, and whether it
    would never see some committed records."""
    out: dict[str, list[str]] = {}
    lost: set[str] = set()
    for f in dash.failover:
        out.setdefault(f.group, []).append(failover_text(f))
        if f.misses:
            lost.add(f.group)
    return {g: (", ".join(parts), g in lost) for g, parts in out.items()}


def detail(dash: Dashboard, p) -> DetailScreen:
    now_ms = dash.lag.taken_ms if dash.lag else 0
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
        ("offset commit", p.pending.describe(now_ms) + " (committed: the offset before it)"
         if p.pending else None),
        ("time lag", fmt.duration(p.time_lag_s(now_ms))),
        ("status", str(status) if status else None),
        ("recent behind", " ".join(map(str, dash.lag_history.get((p.group, p.topic, p.partition), [])))),
    ]
    for f in dash.failover:
        if (f.group, f.topic, f.partition) == (p.group, p.topic, p.partition):
            pairs.append(("failover", f"{failover_text(f)} (read with the last audit; committed "
                                      f"{f.source_committed} at the source)"))
    if p.error:
        pairs.append(("error", p.error))
    return DetailScreen(f"lag of {p.group} on {p.topic}[{p.partition}]", pairs)


class LagView(TableView):
    NAME = "lag"
    COLUMNS = COLUMNS
    EMPTY = "no lag rows"

    def rows(self, dash: Dashboard) -> list[Row]:
        return lag_rows(dash)

    def headline(self, dash: Dashboard) -> Text:
        return headline(dash)

    def detail(self, p) -> DetailScreen | None:
        return detail(self.source, p)
