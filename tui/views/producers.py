"""Producers: per partition, producer ids with epoch and sequence (eosctl.txn.producers.ProducerRow)."""

from __future__ import annotations

from rich.text import Text
from textual.message import Message

from eosctl.base.safetext import term
from eosctl.txn.fencing import fencing_bumps
from tui import fmt
from tui.sources import Dashboard
from tui.styles import STYLES
from tui.tabledata import Col, Row
from tui.views.base import TableView

COLUMNS = [
    Col("partition"),
    Col("pid", numeric=True),
    Col("epoch", numeric=True),
    Col("epochs"),
    Col("last seq", numeric=True),
    Col("last write"),
    Col("txn from", numeric=True),
    Col("fencing"),
    Col("transactional id"),
]


def fenced(r) -> bool:
    """The core's judgement (ProducerRow.fencing_events): a new instance took this producer id over.

    A higher epoch alone is not fencing: Kafka 4's transactions v2 bumps the epoch on every commit.
    """
    return r.fencing_events > 0


def producer_key(r) -> str:
    return f"{r.topic}:{r.partition}:{r.producer_id}"


def producer_rows(dash: Dashboard) -> list[Row]:
    rows = []
    for r in sorted(dash.producers, key=lambda r: (r.topic, r.partition, r.producer_id)):
        marks = []
        if fenced(r):
            marks.append(f"FENCED x{r.fencing_events}")
        if r.zombie_writes:
            marks.append(f"{r.zombie_writes} zombie write{'s' if r.zombie_writes != 1 else ''}")
        if r.in_broker_state is False:
            marks.append("expired from the broker")  # DescribeProducers forgot it; the log still shows it
        epochs = "→".join(map(str, r.epochs)) if len(r.epochs) > 1 else ""
        if epochs and r.earlier_epochs:
            epochs = "…→" + epochs  # the log keeps only the latest epochs (transactions v2: one per txn)
        level = "bad" if r.zombie_writes else ("warn" if fenced(r) else None)
        rows.append(
            Row(
                producer_key(r),
                (
                    f"{r.topic}[{r.partition}]",
                    r.producer_id,
                    r.producer_epoch,
                    epochs,
                    r.last_sequence,
                    fmt.clock(r.last_timestamp_ms / 1000) if r.last_timestamp_ms else None,
                    r.current_txn_start_offset,
                    " ".join(marks),
                    term(getattr(r, "transactional_id", None) or ""),
                ),
                level,
                r,
            )
        )
    return rows


def headline(dash: Dashboard) -> Text:
    if "producers" in dash.errors:
        return Text(f"producers unavailable: {term(dash.errors['producers'])}", style=STYLES["warn"])
    count = sum(1 for r in dash.producers if r.fencing_events > 0)  # fenced(r), inlined: 10k rows
    zombies = sum(r.zombie_writes for r in dash.producers)
    t = Text(
        f"{len(dash.producers)} producers on {len({(r.topic, r.partition) for r in dash.producers})} "
        "partitions · "
    )
    t.append(f"{count} fenced", style=STYLES["warn" if count else "ok"])
    if zombies:
        t.append(f" · {zombies} zombie writes", style=STYLES["bad"])
    t.append(" · times UTC")
    return t


class ProducersView(TableView):
    NAME = "producers"
    COLUMNS = COLUMNS
    EMPTY = "no producers"

    class OpenLog(Message):
        def __init__(self, topic: str, partition: int, offset: int | None) -> None:
            super().__init__()
            self.topic, self.partition, self.offset = topic, partition, offset

    def rows(self, dash: Dashboard) -> list[Row]:
        return producer_rows(dash)

    def headline(self, dash: Dashboard) -> Text:
        return headline(dash)

    def selected(self, r) -> None:
        self.post_message(self.OpenLog(r.topic, r.partition, where(self.source, r)))


def where(dash: Dashboard | None, r) -> int | None:
    """Where Enter on producer row `r` opens the Log (see jump_offset)."""
    log = dash.log_of(r.topic, r.partition) if dash is not None else None
    return jump_offset(log.producers.get(r.producer_id) if log else None, r.current_txn_start_offset)


def jump_offset(state, open_txn_from: int | None) -> int | None:
    """The offset worth seeing: the first fencing or zombie write, else the open transaction.

    Only bumps the core calls fencing (eosctl.txn.fencing.bump_verdict): under transactions v2 every marker
    bumps the epoch, and those are ordinary commits and aborts.
    """
    if state is not None:
        marks = [b.offset for b in fencing_bumps(state)] + [z.offset for z in state.zombie_writes]
        if marks:
            return min(marks)
    return open_txn_from
