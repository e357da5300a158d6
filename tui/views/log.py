"""Log: the batch / marker / aborted-range browser for one partition (eosctl.cluster.model.PartitionLog)."""

from __future__ import annotations

import json
from dataclasses import dataclass

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.message import Message
from textual.widgets import Input, Select, Static

from eosctl.base.safetext import term
from eosctl.cluster.model import TP, Kind, PartitionLog
from eosctl.output.records import field_text, schema_text
from eosctl.txn.fencing import abort_cause
from tui import fmt
from tui.filtertable import FilterTable
from tui.rowtable import RowTable
from tui.sources import Dashboard
from tui.styles import STYLES
from tui.tabledata import Col, Row
from tui.views.base import View

LEVEL = {
    Kind.DATA: "committed",
    Kind.MARKER: "control",
    Kind.ABORTED: "aborted",
    Kind.OPEN: "open",
    Kind.HOLE: "hole",
}
WORD = {
    Kind.DATA: "committed",
    Kind.MARKER: "marker",
    Kind.ABORTED: "aborted",
    Kind.OPEN: "open",
    Kind.HOLE: "hole",
}

COLUMNS = [
    Col(" ", width=1),
    Col("offsets"),
    Col("count", numeric=True),
    Col("kind"),
    Col("pid", numeric=True),
    Col("epoch", numeric=True),
    Col("detail"),
]


# The records table (`v`): each data record of the window, its key and value decoded through the cluster's
# Schema Registry where framed (format, subject, version and schema id before the fields), else as text.
RECORD_COLUMNS = [
    Col(" ", width=1),
    Col("offset", numeric=True),
    Col("kind"),
    Col("key"),
    Col("value"),
]


@dataclass(frozen=True)
class Focus:
    """Offsets to point at (inclusive), e.g. an audit finding's range."""

    first: int
    last: int


def range_rows(log: PartitionLog, focus: Focus | None = None) -> list[Row]:
    """One row per range of one kind (committed runs merge across producers, as a consumer sees them)."""
    by_marker = {t.marker_offset: t for t in log.transactions if t.marker_offset is not None}
    by_first = {(t.producer_id, t.first_offset): t for t in log.transactions}
    rows = []
    for r in log.ranges:
        detail = ""
        if r.kind is Kind.MARKER:
            t = by_marker.get(r.first)
            detail = f"{t.outcome} of {fmt.offsets(t.first_offset, t.last_offset)}" if t else "control batch"
            if t:
                detail += _abort_cause(log, t)
        elif r.kind in (Kind.ABORTED, Kind.OPEN):
            t = by_first.get((r.producer_id, r.first))
            if t and t.outcome == "OPEN":
                detail = "open transaction (holds the LSO)" if r.first <= log.last_stable_offset else "open"
            elif t and t.marker_offset is not None:
                detail = f"{t.outcome} marker at {t.marker_offset}" + _abort_cause(log, t)
        elif r.kind is Kind.HOLE:
            detail = "missing offsets (compaction)"
        mark = "▶" if focus and r.first <= focus.last and r.last >= focus.first else " "
        pid = None if r.producer_id < 0 else r.producer_id
        epoch = None if r.producer_epoch < 0 else r.producer_epoch
        rows.append(
            Row(
                f"r{r.first}",
                (mark, fmt.offsets(r.first, r.last), fmt.count(r.count), WORD[r.kind], pid, epoch, detail),
                LEVEL[r.kind],
            )
        )
    return rows


_CAUSES = {"takeover": " (a new instance took the id over: the coordinator's abort)",
           "timeout": " (the coordinator's abort: transaction timed out)",
           "takeover?": " (a take-over, or the id's own v2 abort)"}


def _abort_cause(log: PartitionLog, t) -> str:
    """Who ended an aborted transaction, where its ABORT's epoch bump tells
    (eosctl.txn.fencing.abort_cause)."""
    p = log.producers.get(t.producer_id)
    if p is None or t.outcome != "ABORT":
        return ""
    return _CAUSES.get(abort_cause(p, t.marker_offset) or "", "")


def batch_rows(log: PartitionLog, focus: Focus | None = None) -> list[Row]:
    """One row per record batch, as kafka-dump-log prints them (needs a scan that kept batches)."""
    rows = []
    for b in log.batches or []:
        kind = Kind.MARKER if b.is_control else (log.kind_at(b.base_offset) or Kind.DATA)
        seq = "" if b.base_sequence < 0 else f"seq {b.base_sequence}..{b.last_sequence}"
        flags = " ".join(
            x
            for x in (
                b.marker or "",
                "txn" if b.is_transactional and not b.is_control else "",
                seq,
                b.compression if b.compression not in ("none", "") else "",
                "" if b.contiguous else "sparse",
            )
            if x
        )
        mark = "▶" if focus and b.base_offset <= focus.last and b.last_offset >= focus.first else " "
        pid = None if b.producer_id < 0 else b.producer_id
        epoch = None if b.producer_epoch < 0 else b.producer_epoch
        rows.append(
            Row(
                f"b{b.base_offset}",
                (
                    mark,
                    fmt.offsets(b.base_offset, b.last_offset),
                    fmt.count(b.record_count),
                    WORD[kind],
                    pid,
                    epoch,
                    flags,
                ),
                LEVEL[kind],
            )
        )
    return rows


def framed(records: list[dict], which: str) -> bool:
    """Whether any of the records' keys (``which="key"``) or values is in the Schema Registry wire format:
    where none is, an unframed one is plain text, not worth a word (a topic of string keys)."""
    return any((r[f"{which}_decoded"] or {}).get("encoding") not in (None, "unframed") for r in records)


def _cell(r: dict, which: str, framed_here: bool) -> str:
    decoded, text = r[f"{which}_decoded"], r[which]
    if decoded is not None and decoded["encoding"] == "unframed":
        # The reason is in the pane under the table: the cell keeps the room for the bytes.
        return field_text(None, text) if not framed_here else f"(unframed) {field_text(None, text)}"
    return field_text(decoded, text)


def record_rows(records: list[dict], focus: Focus | None = None) -> list[Row]:
    """One row per record document (eosctl.inspection.records): its key and value on one line each, cut
    (the detail pane under the table has the row whole)."""
    keys, values = framed(records, "key"), framed(records, "value")
    rows = []
    for r in records:
        kind = Kind(r["kind"]) if r.get("kind") else Kind.DATA
        mark = "▶" if focus and focus.first <= r["offset"] <= focus.last else " "
        rows.append(Row(f"o{r['offset']}", (mark, r["offset"], WORD[kind], _cell(r, "key", keys),
                                            _cell(r, "value", values)),
                        LEVEL[kind], item=(r, keys, values)))
    return rows


def describe_record(r: dict, keys: bool = True, values: bool = True) -> Text:
    """A record whole: offset, its key's and value's schema (subject, version, id) and fields, or its
    bytes as text (and why they are not decoded, where others of the table are); its headers."""
    t = Text()
    t.append(f"offset {r['offset']}", style="bold")
    for which, framed_here in (("key", keys), ("value", values)):
        decoded, text = r[f"{which}_decoded"], r[which]
        t.append(f"\n{which}: ")
        if decoded is not None and decoded["data"] is not None:
            t.append(term(schema_text(decoded)), style="bold")
            t.append(" " + term(json.dumps(decoded["data"], ensure_ascii=False)))
        elif decoded is not None and (framed_here or decoded["encoding"] != "unframed"):
            t.append(term(f"{decoded['encoding'].upper()} ({decoded['problem']}): {text}"))
        else:
            t.append("null" if text is None else term(text))
    if r.get("headers"):
        shown = ", ".join(f"{h['key']}={h['value']}" for h in r["headers"])
        t.append(f"\nheaders: {term(shown)}")
    return t


def summary(log: PartitionLog) -> Text:
    t = Text()
    t.append(f"{term(log.topic)}[{log.partition}] ", style="bold")
    t.append(f"start {log.log_start_offset} · LSO {log.last_stable_offset} · HW {log.high_watermark}")
    if log.last_stable_offset < log.high_watermark:
        t.append(f" · {log.high_watermark - log.last_stable_offset} beyond the LSO", style=STYLES["open"])
    t.append(f"\nscanned {log.scanned_from}..{log.scanned_to - 1}: ")
    for kind in (Kind.DATA, Kind.MARKER, Kind.ABORTED, Kind.OPEN, Kind.HOLE):
        n = log.count(kind)
        if n or kind is Kind.DATA:
            t.append(f"{WORD[kind]} {n:,}", style=STYLES[LEVEL[kind]])
            t.append("  ")
    for w in log.warnings[:1]:
        t.append(f"\n! {term(w)}", style=STYLES["warn"])
    return t


class LogView(View):
    """Pick a partition, read its ranges (or batches, `b`), jump to an offset."""

    # Digits are the app's view keys (1-7): `g` puts them in the offset box instead (it took three Tabs).
    BINDINGS = [("b", "toggle_batches", "Batches/ranges"), ("v", "toggle_records", "Records"),
                ("g,colon", "go_to_offset", "Go to offset"),
                Binding("escape", "leave_offset", "Leave the offset box", show=False)]

    class Wanted(Message):
        """The view needs this partition's log scanned around an offset (the app does it in a worker)."""

        def __init__(self, topic: str, partition: int, around: int | None) -> None:
            super().__init__()
            self.topic, self.partition, self.around = topic, partition, around

    class RecordsWanted(Message):
        """The records table needs this partition's records at offsets [first, end) (read in a worker)."""

        def __init__(self, topic: str, partition: int, first: int, end: int) -> None:
            super().__init__()
            self.topic, self.partition, self.first, self.end = topic, partition, first, end

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self.plog: PartitionLog | None = None
        self.focus_range: Focus | None = None
        self.batches = False
        self._partitions: list[TP] = []
        self._pending_jump: int | None = None
        self.current: TP | None = None  # the partition shown or being read
        self._drawn: TP | None = None  # the partition the table last showed
        self.why: Text | None = None  # an audit finding's cause, shown under the summary (Enter in Audit)
        self.showing_records = False  # `v`: the records table instead of ranges / batches
        self.records: list[dict] | None = None  # the records read for the table (None: being read)
        self._records_of: tuple[TP, int] | None = None  # the partition and first offset they were read for

    def compose(self) -> ComposeResult:
        with Horizontal(id="log-bar"):
            yield Select[TP](
                [], prompt="partition", id="log-partition", allow_blank=True, compact=True
            )
            yield Input(placeholder="g: jump to offset", id="log-jump", type="integer", compact=True)
        yield Static("choose a partition", id="log-summary")
        yield Static("", id="log-why")  # wraps: a cause is shown whole, however narrow the terminal
        yield FilterTable(COLUMNS, id="log-table", empty="no offsets scanned")
        yield FilterTable(RECORD_COLUMNS, id="log-records", empty="no data records here")
        yield Static("", id="log-record", classes="detail-pane")

    def prepare(self, dash: Dashboard) -> tuple[Dashboard, list[TP]]:
        parts = sorted({(log.topic, log.partition) for log in dash.logs} | _lag_partitions(dash))
        return dash, parts

    def present(self, prepared: tuple[Dashboard, list[TP]]) -> None:
        dash, parts = prepared
        if parts != self._partitions:
            self._partitions = parts
            select = self.query_one("#log-partition", Select)
            with self.prevent(Select.Changed):
                # Text, not str: a Select parses a str prompt as markup, and topics come from the cluster.
                select.set_options([(Text(f"{term(t)}[{p}]"), (t, p)) for t, p in parts])
                if self.current in parts:
                    select.value = self.current
        if self.current is None and parts:
            # Show something at once: a partition an open transaction holds, else the first one.
            held = [(lg.topic, lg.partition) for lg in dash.logs if lg.last_stable_offset < lg.high_watermark]
            self.open(*(held or parts)[0])

    # ---- navigation ---------------------------------------------------------------------------------

    def open(self, topic: str, partition: int, focus: Focus | None = None, why: Text | None = None) -> None:
        """Show this partition, pointing at `focus` (scans around it when it isn't loaded yet); `why`: the
        cause of the finding that asked for it."""
        self.focus_range, self.why = focus, why
        self.current = (topic, partition)
        select = self.query_one("#log-partition", Select)
        if self.current in self._partitions and select.value != self.current:
            with self.prevent(Select.Changed):
                select.value = (topic, partition)
        around = focus.first if focus else None
        if (
            self.plog
            and (self.plog.topic, self.plog.partition) == (topic, partition)
            and (around is None or self.plog.scanned_from <= around < max(self.plog.scanned_to, around + 1))
        ):
            self._redraw()
            return
        self.post_message(self.Wanted(topic, partition, around))

    def show_log(self, log: PartitionLog) -> None:
        self.plog = log
        self._redraw()

    def _redraw(self) -> None:
        log = self.plog
        if log is None:
            return
        self.query_one("#log-summary", Static).update(summary(log))
        why = self.query_one("#log-why", Static)
        why.set_class(self.why is not None, "shown")
        why.update(self.why or "")
        self.set_class(self.showing_records, "records")
        if self.showing_records:
            self._redraw_records(log)
            return
        batches = self.batches and log.batches is not None
        rows = batch_rows(log, self.focus_range) if batches else range_rows(log, self.focus_range)
        table = self.query_one("#log-table", FilterTable)
        table.set_rows(rows)
        target = (
            self._pending_jump
            if self._pending_jump is not None
            else (self.focus_range.first if self.focus_range else None)
        )
        self._pending_jump = None
        if target is None and (log.topic, log.partition) != self._drawn:
            # A partition opened without a target: start where it matters, the LSO (an open transaction
            # holds it) or else the newest offsets.
            target = (
                log.last_stable_offset if log.last_stable_offset < log.high_watermark else log.scanned_to - 1
            )
        self._drawn = (log.topic, log.partition)
        if target is not None:
            self._cursor_to(target, rows)

    def _redraw_records(self, log: PartitionLog) -> None:
        """The records from the focus (an offset jumped to, a finding's first), else from the range or
        batch under the cursor, read once per place (the source decodes them)."""
        start = self.focus_range.first if self.focus_range else self._cursor_offset(log)
        at = ((log.topic, log.partition), start)
        table = self.query_one("#log-records", FilterTable)
        if at != self._records_of:
            self._records_of, self.records = at, None
            table.set_rows([])
            self.post_message(self.RecordsWanted(log.topic, log.partition, start, log.scanned_to))
            return
        if self.records is not None:
            table.set_rows(record_rows(self.records, self.focus_range))

    def show_records(self, topic: str, partition: int, first: int, records: list[dict]) -> None:
        """The records read for (topic, partition) from ``first``; ignored if the view moved on."""
        if self._records_of != ((topic, partition), first):
            return
        self.records = records
        if self.plog is not None and self.showing_records:
            self._redraw_records(self.plog)

    def _cursor_offset(self, log: PartitionLog) -> int:
        key = self.query_one("#log-table", FilterTable).cursor_key()
        if key and key[0] in "rb" and key[1:].isdigit():
            return int(key[1:])
        return log.scanned_from

    def filter_table(self) -> FilterTable:
        """The table shown: `/` filters it."""
        return self.query_one("#log-records" if self.showing_records else "#log-table", FilterTable)

    def action_toggle_records(self) -> None:
        if self.plog is None:
            self.notify("choose a partition first", severity="warning")
            return
        self.showing_records = not self.showing_records
        self._redraw()
        self.filter_table().table.focus()

    @on(RowTable.Highlighted, "#log-records RowTable")
    def _record_highlighted(self, event: RowTable.Highlighted) -> None:
        event.stop()
        table = self.query_one("#log-records", FilterTable)
        data = table.table.data
        index = data.index.get(event.key) if event.key is not None else None
        pane = self.query_one("#log-record", Static)
        pane.set_class(index is not None, "shown")
        pane.update(describe_record(*data.rows[index].item) if index is not None else "")

    def _cursor_to(self, offset: int, rows: list[Row]) -> bool:
        table = self.query_one("#log-table", FilterTable)
        log = self.plog
        assert log is not None
        items = log.batches if (self.batches and log.batches is not None) else log.ranges
        for item, row in zip(items, rows, strict=False):
            first = getattr(item, "base_offset", getattr(item, "first", 0))
            last = getattr(item, "last_offset", getattr(item, "last", 0))
            if first <= offset <= last or first > offset:
                table.move_to(row.key)
                return True
        if rows:
            table.move_to(rows[-1].key)
        return False

    def action_go_to_offset(self) -> None:
        """g: the offset box takes the keys (digits included) until Enter jumps or Esc leaves it."""
        box = self.query_one("#log-jump", Input)
        box.value = ""
        box.focus()

    def action_leave_offset(self) -> None:
        box = self.query_one("#log-jump", Input)
        if box.has_focus:
            box.value = ""
            self.query_one("#log-table", FilterTable).table.focus()

    def action_toggle_batches(self) -> None:
        if self.plog is not None and self.plog.batches is None and not self.batches:
            self.notify("this scan kept no batches (snapshot summaries hold ranges only)", severity="warning")
            return
        self.batches = not self.batches
        self._redraw()

    @on(Select.Changed, "#log-partition")
    def _partition_chosen(self, event: Select.Changed) -> None:
        if isinstance(event.value, tuple):
            self.open(*event.value)

    @on(Input.Submitted, "#log-jump")
    def _jump(self, event: Input.Submitted) -> None:
        try:
            offset = int(event.value)
        except ValueError:
            return
        log = self.plog
        if log is None:
            self.notify("choose a partition first", severity="warning")
            return
        self.focus_range = Focus(offset, offset)
        self.filter_table().table.focus()  # the keys are the views' again (1-7)
        if log.scanned_from <= offset < log.scanned_to:
            self._redraw()
        else:
            self._pending_jump = offset
            self.post_message(self.Wanted(log.topic, log.partition, offset))


def _lag_partitions(dash: Dashboard) -> set[TP]:
    out = set()
    for row in dash.lag.partitions if dash.lag is not None else []:
        topic, partition = getattr(row, "topic", None), getattr(row, "partition", None)
        if topic is not None and partition is not None:
            out.add((topic, partition))
    return out
