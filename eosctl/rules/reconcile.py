"""Reconcile one Kafka partition with its sink rows by range arithmetic.

The source side is a PartitionLog: ranges of DATA / MARKER / ABORTED / OPEN / HOLE between the log start
and the high watermark. The sink side is its offset *islands*: sorted runs (first, last, multiplicity) of
consecutive offsets stored the same number of times. One merge-sweep over both sequences yields every
finding, so the cost is O(ranges + islands), never O(offsets): a 10M-offset partition with a handful of
defects is a few thousand steps.

Run rules (what makes two offsets belong to the same finding):
- gap: missing expected offsets; offsets that are not expected (markers, aborted, open, holes) don't
  split a run, only an expected offset that is present does.
- duplicate: committed offsets stored more than once; same rule, count = extra rows.
- phantom_aborted / _uncommitted: a run is consecutive offsets of that kind present in the sink; markers
  between them don't split it (two aborted transactions back to back are one run), any other offset does;
  count = sink rows.
- phantom_marker: a run of consecutive marker offsets present in the sink.
- phantom_beyond_hw: every row at or beyond the high watermark of the partition, one finding.
With a window (eosctl.report.window): offsets outside it are not judged (their rows are counted, never
findings, and no run of a finding crosses them); expected records below the sink's retention floor that the
sink no longer holds are counted as expired, never gaps.
Rows below the log start offset (retention) or at offsets compaction removed can't be verified: they are
counted in PartitionSummary.unverifiable_below and never reported as gaps or phantoms; but two rows for one
such offset are a duplicate all the same (the sink alone proves it).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from eosctl.cluster.model import Kind, OffsetRange, PartitionLog
from eosctl.report.findings import Finding, PartitionSummary
from eosctl.report.rootcauses import NOT_IN_KAFKA
from eosctl.report.window import PartitionWindow

if TYPE_CHECKING:
    from eosctl.cluster.wireanswers import Offsets
    from eosctl.sink import OffsetIsland  # a type only: this pure module never loads the sink reader

# Pseudo-kinds for the sweep besides model.Kind.
_EXPECTED = "EXPECTED"  # DATA below the LSO: what the sink must hold exactly once
_PENDING = "PENDING"  # DATA at or above the LSO: committed, but not yet readable by read_committed
_UNVERIFIABLE = "UNVERIFIABLE"  # below the log start, compacted away, or not covered by the scan
_BEYOND = "BEYOND"  # at or beyond the high watermark
_OUTSIDE = "OUTSIDE"  # outside the audited window: not judged
_EXPIRED = "EXPIRED"  # expected, but below the sink's retention floor: may be gone from the sink
_FILTERED = "FILTERED"  # committed, but the sink's route leaves it out: never expected, misrouted if held
_PHANTOM: dict[str, str] = {Kind.ABORTED: "phantom_aborted", Kind.MARKER: "phantom_marker",
                            Kind.OPEN: "phantom_uncommitted"}
_PHANTOM_KINDS = tuple(_PHANTOM.values())
_INF = 1 << 63  # beyond every int64 offset: a sink row at 2^63-1 is still "beyond the HW"

Island = tuple[int, int, int]  # first, last (inclusive), multiplicity >= 1


class LogSide(Protocol):
    """The source side, what reconciling reads of a partition's log: an eosctl.cluster.model.PartitionLog, or
    the ledger's view of one clipped at the offset the sink consumed up to. ``ranges`` are sorted and do not
    overlap."""

    @property
    def topic(self) -> str: ...
    @property
    def partition(self) -> int: ...
    @property
    def log_start_offset(self) -> int: ...
    @property
    def last_stable_offset(self) -> int: ...
    @property
    def high_watermark(self) -> int: ...
    @property
    def ranges(self) -> Sequence[OffsetRange]: ...


@dataclass
class SinkFacts:
    """What the sink holds around the findings, noted during the same sweep (eosctl.rules.causes reads it)."""

    # gap first offset -> (the nearest offsets the sink holds below and above it, None if none)
    gaps: dict[int, tuple[int | None, int | None]] = field(default_factory=dict)
    # duplicate first offset -> (fewest, most) rows per offset of the run
    duplicates: dict[int, tuple[int, int]] = field(default_factory=dict)


def reconcile_partition(log: LogSide, islands: Iterable[Island | OffsetIsland],
                        facts: SinkFacts | None = None, keep: int | None = None,
                        counts: dict[str, int] | None = None,
                        window: PartitionWindow | None = None,
                        routed_out: Sequence[tuple[int, int]] | None = None,
                        ) -> tuple[PartitionSummary, list[Finding]]:
    """Findings and summary for one partition; ``facts``, when given, is filled in for the causes;
    ``window``: judge only its offsets (eosctl.report.window); ``routed_out``: with a route, the ranges
    (first, last) of committed records it leaves out (eosctl.cluster.routes).

    ``islands`` is sorted by first offset: (first, last, multiplicity) tuples or
    eosctl.sink.base.OffsetIsland objects.
    ``keep``: only the first (lowest) ``keep`` findings of each kind are made, and ``counts`` (given with
    it) sums the counts of all of them per kind: the ledger lists a few of 100k gaps and counts them all.
    """
    acc = _Runs(log.topic, log.partition, facts, keep, counts)
    segments = _segments(log) if window is None else _windowed(_segments(log), window)
    if routed_out is not None:
        segments = _filtered(segments, routed_out)
    for first, last, kind, mult in _pieces(segments, _islands(islands)):
        acc.feed(first, last, kind, mult)
    acc.close_all()
    summary = PartitionSummary(
        topic=log.topic,
        partition=log.partition,
        log_start_offset=log.log_start_offset,
        last_stable_offset=log.last_stable_offset,
        high_watermark=log.high_watermark,
        expected_records=acc.expected,
        sink_rows=acc.sink_rows,
        unverifiable_below=acc.unverifiable,
        window=window,
        outside_window=acc.outside,
        expired=acc.expired,
        filtered=None if routed_out is None else acc.filtered,
    )
    return summary, acc.findings


def reconcile_unknown(topic: str, partition: int,
                      islands: Iterable[Island | OffsetIsland]) -> tuple[PartitionSummary, list[Finding]]:
    """Sink rows naming a topic/partition Kafka doesn't have: all of them are phantom_beyond_hw."""
    rows, lo, hi = 0, None, None
    for first, last, mult in _islands(islands):
        rows += (last - first + 1) * mult
        lo = first if lo is None else lo
        hi = last
    findings = [] if lo is None else [Finding("phantom_beyond_hw", topic, partition, lo, hi, rows,
                                              detail=NOT_IN_KAFKA)]
    return PartitionSummary(topic, partition, 0, 0, 0, 0, rows, 0, exists=False), findings


def offset_mismatch(topic: str, partition: int, stored: int | None, committed: int | None,
                    log: PartitionLog | None, group: str | None = None) -> Finding | None:
    """The sink's stored next offset vs the group's committed one: a finding only if committed data lies
    between them.

    A sink that stores "last row + 1" and a consumer that committed past the trailing control marker agree:
    nothing a read_committed consumer would read lies between. ``log`` is the partition's PartitionLog
    (None: not scanned, so every offset between counts). A missing side means nothing consumed, from 0.
    """
    if stored == committed:
        return None
    lo = 0 if stored is None or committed is None else min(stored, committed)
    hi = max(x for x in (stored, committed) if x is not None)
    between = log.data_between(lo, hi) if log is not None else hi - lo
    if not between:
        return None
    detail = (f"sink stored next offset {'none' if stored is None else stored}, "
              f"group {group or '-'} committed {'none' if committed is None else committed}")
    return Finding("offset_mismatch", topic, partition, lo, hi - 1, between, detail=detail)


def islands_from_counts(pairs: Iterable[tuple[int, int]]) -> Iterator[Island]:
    """Turn a sorted stream of (offset, count) into islands (first, last, multiplicity)."""
    cur: list[int] | None = None
    for offset, count in pairs:
        if count <= 0:
            continue
        if cur is not None and offset == cur[1] + 1 and count == cur[2]:
            cur[1] = offset
            continue
        if cur is not None:
            if offset <= cur[1]:
                raise ValueError(f"offsets must be sorted and distinct: {offset} after {cur[1]}")
            yield cur[0], cur[1], cur[2]
        cur = [offset, offset, count]
    if cur is not None:
        yield cur[0], cur[1], cur[2]


def _islands(islands: Iterable[Island | OffsetIsland]) -> Iterator[Island]:
    prev = None
    for isl in islands:
        if isinstance(isl, tuple):
            first, last, mult = isl
        else:
            first, last, mult = isl.first, isl.last, isl.multiplicity
        if last < first or mult < 1:
            raise ValueError(f"bad island {first}..{last} x{mult}")
        if prev is not None and first <= prev:
            raise ValueError(f"islands must be sorted and disjoint: {first} after {prev}")
        prev = last
        yield first, last, mult


def _segments(log: LogSide) -> Iterator[tuple[int, int, str]]:
    """The whole offset line, in order, as (first, last, kind): below start, the log, beyond the HW."""
    start, lso, hw = log.log_start_offset, log.last_stable_offset, log.high_watermark
    lso = min(max(lso, start), hw)
    yield -_INF, start - 1, _UNVERIFIABLE
    ranges = log.ranges
    if any(ranges[i].first < ranges[i - 1].first for i in range(1, len(ranges))):
        ranges = sorted(ranges, key=lambda r: r.first)
    pos = start
    for r in ranges:
        first, last = max(r.first, pos), min(r.last, hw - 1)
        if first > last:
            continue
        if first > pos:  # not covered by the scan: we can't tell what was there
            yield pos, first - 1, _UNVERIFIABLE
        if r.kind == Kind.DATA:
            if first < lso:
                yield first, min(last, lso - 1), _EXPECTED
            if last >= lso:
                yield max(first, lso), last, _PENDING
        elif r.kind == Kind.HOLE:
            yield first, last, _UNVERIFIABLE
        else:
            yield first, last, Kind(r.kind)
        pos = last + 1
    if pos < hw:
        yield pos, hw - 1, _UNVERIFIABLE
    yield hw, _INF, _BEYOND


def _windowed(segments: Iterator[tuple[int, int, str]],
              window: PartitionWindow) -> Iterator[tuple[int, int, str]]:
    """The segments cut at the window's borders and its retention floor: pieces outside [first, end) are
    _OUTSIDE, expected pieces below the floor _EXPIRED."""
    lo = -_INF if window.first is None else window.first
    hi = _INF if window.end is None else window.end
    floor = window.floor
    for first, last, kind in segments:
        cuts = sorted({c for c in (window.first, window.end, floor) if c is not None and first < c <= last})
        for a, b in zip([first, *cuts], [*(c - 1 for c in cuts), last], strict=True):
            if b < lo or a >= hi:
                yield a, b, _OUTSIDE
            elif kind == _EXPECTED and floor is not None and b < floor:
                yield a, b, _EXPIRED
            else:
                yield a, b, kind


def _filtered(segments: Iterator[tuple[int, int, str]],
              out: Sequence[tuple[int, int]]) -> Iterator[tuple[int, int, str]]:
    """Committed pieces (expected or pending) inside a range the route leaves out become _FILTERED."""
    ranges = sorted(out)
    i = 0
    for first, last, kind in segments:
        if kind not in (_EXPECTED, _PENDING):
            yield first, last, kind
            continue
        while i < len(ranges) and ranges[i][1] < first:
            i += 1
        pos, j = first, i
        while pos <= last:
            if j >= len(ranges) or ranges[j][0] > last:
                yield pos, last, kind
                break
            lo, hi = max(ranges[j][0], pos), min(ranges[j][1], last)
            if lo > pos:
                yield pos, lo - 1, kind
            yield lo, hi, _FILTERED
            pos = hi + 1
            if ranges[j][1] <= last:
                j += 1


def _pieces(segments: Iterator[tuple[int, int, str]],
            islands: Iterator[Island]) -> Iterator[tuple[int, int, str, int]]:
    """Cut segments at island borders: (first, last, kind, multiplicity), multiplicity 0 = absent.

    Absent pieces of the unbounded segments (below the log start, beyond the HW) are not produced.
    """
    isl = next(islands, None)
    for s_first, s_last, kind in segments:
        bounded = s_first > -_INF and s_last < _INF
        pos = s_first
        while pos <= s_last:
            # Skip island parts already consumed by earlier segments.
            while isl is not None and isl[1] < pos:
                isl = next(islands, None)
            if isl is None or isl[0] > s_last:
                if bounded:
                    yield pos, s_last, kind, 0
                break
            if isl[0] > pos:
                if bounded:
                    yield pos, isl[0] - 1, kind, 0
                pos = isl[0]
            end = min(isl[1], s_last)
            yield pos, end, kind, isl[2]
            pos = end + 1


class _Run:
    __slots__ = ("first", "last", "count")

    def __init__(self) -> None:
        self.first: int | None = None
        self.last = 0
        self.count = 0

    def extend(self, first: int, last: int, count: int) -> None:
        if self.first is None:
            self.first = first
        self.last, self.count = last, self.count + count


class _Runs:
    """Open runs per finding kind while the sweep moves along the offsets."""

    def __init__(self, topic: str, partition: int, facts: SinkFacts | None = None, keep: int | None = None,
                 counts: dict[str, int] | None = None) -> None:
        self.topic, self.partition = topic, partition
        self.findings: list[Finding] = []
        self.keep, self.counts = keep, counts
        self.made = dict.fromkeys(("gap", "duplicate", *_PHANTOM.values(), "phantom_beyond_hw",
                                   "misrouted"), 0)
        self.expected = self.sink_rows = self.unverifiable = self.outside = self.expired = self.filtered = 0
        self.runs = {k: _Run() for k in ("gap", "duplicate", *_PHANTOM.values(), "phantom_beyond_hw",
                                         "misrouted")}
        self.facts = facts
        self.last_row: int | None = None  # the highest offset the sink holds so far
        self.gap_before: int | None = None  # last_row when the open gap began
        self.gap_after: int | None = None  # the first offset held after the open gap's last missing one
        self.awaiting: list[int] = []  # closed gaps (first offsets) waiting for the next offset held
        self.rows: tuple[int, int] | None = None  # (min, max) multiplicity of the open duplicate run

    def close(self, kind: str) -> None:
        run = self.runs[kind]
        if run.first is not None:
            if self.counts is not None:
                self.counts[kind] = self.counts.get(kind, 0) + run.count
            # A kind's runs close in offset order: the first ``keep`` are its lowest.
            if self.keep is None or self.made[kind] < self.keep:
                self.findings.append(Finding(kind, self.topic, self.partition, run.first, run.last,
                                             run.count))
                self.made[kind] += 1
            self.runs[kind] = _Run()
            if self.facts is not None and kind == "gap":
                self.facts.gaps[run.first] = (self.gap_before, self.gap_after)
                if self.gap_after is None:
                    self.awaiting.append(run.first)
                self.gap_after = None
            elif self.facts is not None and kind == "duplicate" and self.rows is not None:
                self.facts.duplicates[run.first] = self.rows
                self.rows = None

    def close_phantoms(self, keep: str | None = None) -> None:
        runs = self.runs
        for kind in _PHANTOM_KINDS:  # the open runs only: this runs for every piece of the sweep
            if kind != keep and runs[kind].first is not None:
                self.close(kind)

    def feed(self, first: int, last: int, kind: str, mult: int) -> None:
        if self.facts is not None:
            self._note(first, last, kind, mult)
        else:
            self._feed(first, last, kind, mult)

    def _note(self, first: int, last: int, kind: str, mult: int) -> None:
        """_feed, noting the sink's neighbours of each gap and the rows per offset of each duplicate."""
        if mult == 1 and not self.awaiting and self.runs["gap"].first is None:
            # Most pieces: rows held once, no gap open or waiting for its neighbour: nothing to note
            # but the highest offset held (a third of explaining's cost at 10M offsets).
            self._feed(first, last, kind, mult)
            self.last_row = last
            return
        if mult == 0 and kind == _EXPECTED:
            if self.runs["gap"].first is None:
                self.gap_before = self.last_row
            self.gap_after = None  # the gap goes on: what the sink held before is inside it
        if mult > 1 and kind in (_EXPECTED, _PENDING, _UNVERIFIABLE, _EXPIRED):
            self.rows = (mult, mult) if self.rows is None else (min(self.rows[0], mult),
                                                                 max(self.rows[1], mult))
        self._feed(first, last, kind, mult)
        if mult and self.facts is not None:
            if self.runs["gap"].first is not None and self.gap_after is None:
                self.gap_after = first
            for gap in self.awaiting:
                self.facts.gaps[gap] = (self.facts.gaps[gap][0], first)
            self.awaiting.clear()
            self.last_row = last

    def _feed(self, first: int, last: int, kind: str, mult: int) -> None:
        n = last - first + 1
        self.sink_rows += n * mult
        if kind == _FILTERED:
            # Left out by the route: never expected. Missing, it splits nothing (as a marker); held, it is
            # misrouted, and ends the runs of gaps and duplicates around it.
            self.filtered += n
            if not mult:
                return
            self.close_phantoms()
            self.close("gap")
            self.close("duplicate")
            self.runs["misrouted"].extend(first, last, n * mult)
            return
        if self.runs["misrouted"].first is not None and (mult or kind not in (Kind.MARKER, _UNVERIFIABLE)):
            self.close("misrouted")
        if kind in (_EXPECTED, _PENDING, _EXPIRED):
            self.close_phantoms()
            if kind == _EXPECTED:
                self.expected += n
            elif kind == _EXPIRED and not mult:
                self.expired += n
            runs = self.runs
            if mult == 0 and kind == _EXPECTED:
                runs["gap"].extend(first, last, n)
            elif runs["gap"].first is not None:
                self.close("gap")
            if mult > 1:
                runs["duplicate"].extend(first, last, n * (mult - 1))
            elif runs["duplicate"].first is not None:
                self.close("duplicate")
        elif kind == Kind.MARKER:
            # A marker sits between an aborted transaction's records and whatever follows: it splits
            # only runs of leaked markers, never runs of leaked data.
            if mult:
                self.runs["phantom_marker"].extend(first, last, n * mult)
            else:
                self.close("phantom_marker")
        elif kind in _PHANTOM:
            phantom = _PHANTOM[kind]
            if mult:
                self.close_phantoms(keep=phantom)
                self.runs[phantom].extend(first, last, n * mult)
            else:
                self.close_phantoms()
        elif kind == _UNVERIFIABLE:
            if mult:
                self.unverifiable += n * mult
            self.close_phantoms()
            # Whether these offsets were committed can't be told any more, but two rows for one offset are
            # a duplicate whatever retention or compaction did: the sink alone proves it.
            if mult > 1:
                self.runs["duplicate"].extend(first, last, n * (mult - 1))
            elif mult == 1 and self.runs["duplicate"].first is not None:
                self.close("duplicate")
        elif kind == _OUTSIDE:
            # Nothing outside the window is judged, and no finding's run reaches across it.
            self.outside += n * mult
            for k in self.runs:
                self.close(k)
        elif kind == _BEYOND and mult:
            self.close_phantoms()
            self.runs["phantom_beyond_hw"].extend(first, last, n * mult)

    def close_all(self) -> None:
        for kind in self.runs:
            self.close(kind)
        self.findings.sort(key=lambda f: f.sort_key)


class Clipped:
    """The log as far as the sink claims to have read: DATA past `upto` is pending, not missing.

    A scan older than the sink's freeze (the snapshot and the TUI scan first, `fresh` is the ListOffsets
    read after the freeze) is bounded by what it saw: offsets it never read, up to the fresh high
    watermark, and transactions it saw open (since committed or aborted, it can't tell) are not judged,
    so a row written meanwhile is never a phantom. Rows at or beyond the fresh HW still are.
    """

    def __init__(self, log: PartitionLog, upto: int, fresh: Offsets | None = None):
        self.topic, self.partition, self.ranges = log.topic, log.partition, log.ranges
        self.log_start_offset, self.high_watermark = log.log_start_offset, log.high_watermark
        self.last_stable_offset = min(log.last_stable_offset, upto)
        if fresh is not None and (fresh.high_watermark > log.high_watermark
                                  or fresh.last_stable > log.last_stable_offset):
            self.ranges = [r for r in log.ranges if r.kind is not Kind.OPEN]
            self.high_watermark = max(log.high_watermark, fresh.high_watermark)


def clipped(log: PartitionLog, upto: int) -> Clipped:
    """The log as far as a reader promised to have processed it (``upto``, its committed offset): data
    records from there on are pending, not missing (a stage's lag, never a gap)."""
    return Clipped(log, upto)
