"""The content check: does each sink row hold the record at its offset? (finding kind ``content_mismatch``)

An offsets-only audit can't tell a row that belongs to its offset from one that doesn't: after an unclean
leader election, records the sink consumed are gone from the log and other records sit at their offsets;
a sink that stores the wrong coordinates (offset+1) "holds" every offset, none by its own record. Here each
sink row's key is compared with the key of the Kafka record at its offset (both as 64-bit hashes,
eosctl.cluster.recordkeys), all rows of a partition at once with numpy.

Only rows at a committed (or non-transactional) data record's offset are compared (committed_data): a row
at a marker, at aborted or open data, where compaction or retention left nothing or beyond the high
watermark gets its offsets finding only (one finding per sink row, docs/audit.md), unless it is one of a
shift's rows. A row whose key differs is explained, in this order:
- ``shifted_coordinates``: its key is the record's at a neighbouring offset (offset - d, |d| <= MAX_SHIFT):
  consecutive rows with the same shift are one finding naming it, and the audit reconciles those rows at
  the offsets they really hold (shifted_islands), so the gaps and phantoms the shift made up vanish while
  real ones stay.
- ``rewritten_after_leader_change``: the record at its offset was written under a partition leader epoch
  newer than every epoch of the records the sink's rows before it matched: the log was truncated and
  rewritten there (an unclean election, a replica that lost its disk).
- ``different_record``: neither.

Where the sink names a value column (the value itself, or the md5 hex of its bytes:
eosctl.config.model.value_mode), a row whose key is its record's but whose value is not is
``different_value``: consecutive rows are one finding. A partition where no row with its record's key holds
its value too is not judged for values (the column holds something else: a transformed value, another
serialization).

A partition where no row holds the key of any record at or near its offset is not judged: its key column
is not the records' key (a business key read from the value, or a key serialized differently).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from eosctl.cluster.model import Kind, PartitionLog
from eosctl.report.findings import Cause, Finding

KIND = "content_mismatch"
MAX_SHIFT = 3
SHIFTS = tuple(d for k in range(1, MAX_SHIFT + 1) for d in (k, -k))  # nearest first, +k before -k
SHIFTED, REWRITTEN, DIFFERENT = "shifted_coordinates", "rewritten_after_leader_change", "different_record"
DIFFERENT_VALUE = "different_value"
RULES = (SHIFTED, REWRITTEN, DIFFERENT, DIFFERENT_VALUE)


@dataclass(frozen=True)
class Shift:
    """Sink rows at stored offsets first..last (inclusive) each hold the record at offset - shift."""

    first: int
    last: int
    shift: int


@dataclass(frozen=True)
class ContentResult:
    findings: list[Finding]
    shifts: list[Shift]
    rows_checked: int
    # False: no row's key is the key of a record at or near its offset, so the sink's key column does not
    # hold the records' keys and the partition was not judged.
    comparable: bool = True
    # False: the sink names a value column, but no row holding its record's key holds its value too.
    values_comparable: bool = True
    # Per partition leader epoch, the lowest offset of a row holding its record's key under it: what an
    # incremental audit (auditors.incremental) keeps to pass ``seen`` for the rows after a cut.
    matched: dict[int, int] = field(default_factory=dict)
    values_matched: bool = False  # some row holds its record's key and value


def check_partition(log: PartitionLog, offsets: np.ndarray, hashes: np.ndarray,
                    sink_keys: Any = None,
                    islands: Sequence[tuple[int, int, int]] | None = None,
                    values: np.ndarray | None = None, value_name: str = "value column", *,
                    seen: int = -1, judged: bool = False, values_judged: bool = False) -> ContentResult:
    """The content findings of one partition: ``offsets`` and ``hashes`` are its sink rows' offsets and
    key hashes (eosctl.cluster.recordkeys.hash_arrow), any order; ``sink_keys`` (a list or an Arrow array,
    same order) names a row's key in the finding's summary. ``islands``: the partition's rows as offset
    islands, to count a shift's rows with the ones that repeat a (key, offset) the key query reads once.
    ``values``: the rows' value hashes (same order; compared with the log's record_keys.values),
    ``value_name`` names the sink's column in a finding.

    An incremental audit checks only the rows from a cut on (rows_after_cut): ``seen`` is the newest leader
    epoch the rows before the cut matched, ``judged`` / ``values_judged`` that those rows already showed the
    key / value column comparable (the partition is judged whatever the rows from the cut on hold)."""
    rk = log.record_keys
    if rk is None or not len(offsets):
        return ContentResult([], [], 0)
    order = np.argsort(offsets, kind="stable")
    so, sh = offsets[order], hashes[order]
    n = len(so)
    rec = _Records(rk)
    i0, found0 = rec.at(so)
    m0 = found0 & ~rk.control[i0] & (rk.keys[i0] == sh)
    mismatch = found0 & ~m0  # a record or a marker there, not this row's
    # Only a row at a committed data record's offset is compared with a record: a row at a marker, at
    # aborted or open data, is that phantom and nothing else (one finding per row, docs/audit.md), unless it
    # is part of a shift run over such rows (then it holds a neighbour, and is reconciled where it belongs).
    data = committed_data(log, so)
    value_findings: list[Finding] = []
    values_comparable = True
    matched = _first_matched(rk.epochs[i0], so, m0)
    values_matched = False
    if values is not None and rk.values is not None and m0.any():
        same = m0 & (rk.values[i0] == values[order])
        values_matched = bool(same.any())
        if values_matched or values_judged:
            keys0 = None if sink_keys is None else _Keys(sink_keys, order)
            value_findings = _value_findings(log, so, m0 & ~same & data, i0, keys0, value_name)
        else:
            values_comparable = False
    if not mismatch.any():
        return ContentResult(value_findings, [], n, values_comparable=values_comparable, matched=matched,
                         values_matched=values_matched)
    md = {}
    for d in SHIFTS:
        i, found = rec.at(so - d)
        md[d] = found & ~rk.control[i] & (rk.keys[i] == sh)
    if not judged and not m0.any() and not any(m.any() for m in md.values()):
        # No row holds the key of any record near its offset: the column is not the records' key (a
        # business key read from the value, or a key serialized otherwise), so nothing can be judged.
        return ContentResult([], [], n, comparable=False, values_comparable=values_comparable)
    chosen = np.zeros(n, np.int64)
    for d in reversed(SHIFTS):  # the nearest shift wins
        chosen[mismatch & md[d]] = d
    covered = np.zeros(n, bool)
    runs: list[tuple[int, int, int]] = []  # (first row, last row, shift), row indexes in ``so``
    for d in SHIFTS:
        for a, b in _true_runs(md[d] & ~covered):
            if (mismatch[a:b + 1] & data[a:b + 1] & (chosen[a:b + 1] == d)).any():
                runs.append((a, b, d))
                covered[a:b + 1] = True
    runs.sort()
    keys = None if sink_keys is None else _Keys(sink_keys, order)
    findings = [_shift_finding(log, so, a, b, d, keys, islands) for a, b, d in runs]
    rest = mismatch & ~covered & data
    if rest.any():
        findings += _other_findings(log, rec, so, m0, rest, i0, keys, seen)
    findings += value_findings
    findings.sort(key=lambda f: f.sort_key)
    return ContentResult(findings, [Shift(int(so[a]), int(so[b]), d) for a, b, d in runs], n,
                         values_comparable=values_comparable, matched=matched,
                         values_matched=values_matched)


def committed_data(log: PartitionLog, offsets: np.ndarray) -> np.ndarray:
    """Whether each of ``offsets`` (sorted) is a committed (or non-transactional) data record's offset:
    in a DATA range of the log, not a marker, aborted or open data, a compacted hole, below the log start
    or at/after the high watermark."""
    data = [r for r in log.ranges if r.kind == Kind.DATA]
    if not data or not len(offsets):
        return np.zeros(len(offsets), bool)
    firsts = np.fromiter((r.first for r in data), np.int64, len(data))
    lasts = np.fromiter((r.last for r in data), np.int64, len(data))
    order = np.argsort(firsts, kind="stable")
    firsts, lasts = firsts[order], lasts[order]
    i = np.searchsorted(firsts, offsets, "right") - 1
    inside = i >= 0
    inside[inside] = offsets[inside] <= lasts[i[inside]]
    return inside & (offsets >= log.log_start_offset) & (offsets < log.high_watermark)


def _first_matched(epochs: np.ndarray, so: np.ndarray, m0: np.ndarray) -> dict[int, int]:
    """Per leader epoch, the lowest offset of a matching row (``so`` sorted)."""
    if not m0.any():
        return {}
    u, first = np.unique(epochs[m0], return_index=True)
    return dict(zip(u.tolist(), so[m0][first].tolist(), strict=True))


def cut_at(log: PartitionLog, offsets: np.ndarray, hashes: np.ndarray,
           values: np.ndarray | None) -> int | None:
    """The highest offset c such that the rows at offsets >= c can be checked apart from the rows below
    (check_partition with ``seen``): the row just below c holds its record's key (and value), and no
    neighbour's, so no run of rows (a shift, other records, other values) crosses c. ``offsets`` etc.: some
    rows (all rows of their offsets) just below where the check must start, with the records around them in
    ``log.record_keys``; None when none of them is such a row."""
    rk = log.record_keys
    if rk is None or not len(offsets):
        return None
    order = np.argsort(offsets, kind="stable")
    so, sh = offsets[order], hashes[order]
    rec = _Records(rk)
    i0, found = rec.at(so)
    clean = found & ~rk.control[i0] & (rk.keys[i0] == sh)
    if values is not None and rk.values is not None:
        clean &= rk.values[i0] == values[order]
    for d in SHIFTS:
        i, f = rec.at(so - d)
        clean &= ~(f & ~rk.control[i] & (rk.keys[i] == sh))
    # every row at the offset clean: a cut falls between offsets, never between the rows of one
    last_of = np.concatenate([so[1:] != so[:-1], [True]])
    ok = np.zeros(len(so), bool)
    bad_offsets = np.unique(so[~clean])
    ok[last_of] = True
    ok &= ~np.isin(so, bad_offsets)
    idx = np.flatnonzero(ok)
    return None if not len(idx) else int(so[idx[-1]]) + 1


def _value_findings(log: PartitionLog, so: np.ndarray, differ: np.ndarray, i0: np.ndarray,
                    keys: _Keys | None, value_name: str) -> list[Finding]:
    """One finding per run of consecutive rows whose key is their record's and whose value is not."""
    epochs = log.record_keys.epochs[i0]
    out = []
    for a, b in _true_runs(differ):
        first, last, rows = int(so[a]), int(so[b]), b - a + 1
        tp = f"{log.topic}[{log.partition}]"
        where = f"offset {first}" if first == last else f"offsets {first}..{last}"
        key = f" (the row at {first} has key {keys[a]!r})" if keys is not None and keys[a] is not None else ""
        if rows == 1:
            said = (f"holds the key of the record at its offset but not its value: the sink's {value_name} "
                    "differs from the record's value")
        else:
            said = (f"hold the keys of the records at their offsets but not their values: the sink's "
                    f"{value_name} differs from the records' values")
        summary = (f"{_the_rows(rows, tp, where)}{key} {said} (a writer that altered or mixed up values, "
                   "or a record re-written with the same key).")
        cause = Cause(KIND, summary, rule=DIFFERENT_VALUE, leader_epoch=int(epochs[a]))
        detail = "the record at this offset has this key but another value" if rows == 1 else \
            "the records at these offsets have these keys but other values"
        out.append(Finding(KIND, log.topic, log.partition, first, last, rows, detail=detail, cause=cause))
    return out


class _Keys:
    """The sink's key of a sorted row, looked up only for the rows a finding names."""

    def __init__(self, keys: Any, order: np.ndarray) -> None:
        self.keys, self.order = keys, order

    def __getitem__(self, row: int) -> str | None:
        k = self.keys[int(self.order[row])]
        return k.as_py() if hasattr(k, "as_py") else k


class _Records:
    def __init__(self, rk: object) -> None:
        self.offsets = rk.offsets  # type: ignore[attr-defined]
        self.n = len(self.offsets)

    def at(self, wanted: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Index of the record at each offset (clipped) and whether there is one."""
        if not self.n:
            return np.zeros(len(wanted), np.int64), np.zeros(len(wanted), bool)
        i = np.searchsorted(self.offsets, wanted).clip(0, self.n - 1)
        return i, self.offsets[i] == wanted


def _true_runs(mask: np.ndarray) -> Iterable[tuple[int, int]]:
    """(first, last) index of each run of True."""
    if not mask.any():
        return []
    edges = np.diff(np.concatenate([[0], mask.astype(np.int8), [0]]))
    return zip(np.flatnonzero(edges == 1).tolist(), (np.flatnonzero(edges == -1) - 1).tolist(), strict=True)


def rows_in(islands: Iterable[tuple[int, int, int]], first: int, last: int) -> int:
    """The sink rows at offsets first..last."""
    return sum((min(hi, last) - max(lo, first) + 1) * m for lo, hi, m in islands
               if hi >= first and lo <= last)


def _shift_finding(log: PartitionLog, so: np.ndarray, a: int, b: int, d: int,
                   keys: _Keys | None, islands: Sequence[tuple[int, int, int]] | None) -> Finding:
    first, last = int(so[a]), int(so[b])
    rows = b - a + 1 if islands is None else rows_in(islands, first, last)
    tp = f"{log.topic}[{log.partition}]"
    where = f"offset {first}" if first == last else f"offsets {first}..{last}"
    stores = f"offset{d:+d}"
    each = "its row" if rows == 1 else "each row"
    detail = f"the sink stores {stores}: {each} holds the record at its offset {-d:+d}"
    held = f"{first - d}" if rows == 1 else f"{first - d}..{last - d}"
    example = f" (the row at {first} has key {keys[a]!r}, the key of the record at {first - d})" \
        if keys is not None and keys[a] is not None else ""
    what = f"holds the record at {held}" if rows == 1 else f"hold the records at {held}"
    summary = (f"{_the_rows(rows, tp, where)} {what}{example}: its writer stores the source offset "
               f"shifted by {d:+d} ({stores}), so the "
               "offsets it reports as held are not the records it holds.")
    cause = Cause(KIND, summary, rule=SHIFTED, shift=d)
    return Finding(KIND, log.topic, log.partition, first, last, rows, detail=detail, cause=cause)


def _other_findings(log: PartitionLog, rec: _Records, so: np.ndarray, m0: np.ndarray, rest: np.ndarray,
                    i0: np.ndarray, keys: _Keys | None, before: int = -1) -> list[Finding]:
    rk = log.record_keys
    epochs = rk.epochs[i0].astype(np.int64)
    # The newest leader epoch among the records the sink's rows *before* each row matched.
    # ``before``: the newest of the rows below the ones given (an incremental audit's cut), -1: none.
    seen = np.maximum(np.where(m0, epochs, -1), before)
    seen = np.maximum.accumulate(seen)
    seen_before = np.concatenate([[before], seen[:-1]])
    # With no matching row before it: the log shows the truncation itself, an epoch that began after the
    # log's first one.
    first_epoch = log.leader_epochs[0][0] if log.leader_epochs else -1
    rewritten = rest & np.where(seen_before >= 0, epochs > seen_before, epochs > first_epoch)
    out: list[Finding] = []
    idx = np.flatnonzero(rest)
    start = 0
    # One finding per run of consecutive mismatched rows with the same explanation (and epoch).
    for j in range(1, len(idx) + 1):
        if j < len(idx) and idx[j] == idx[j - 1] + 1 and rewritten[idx[j]] == rewritten[idx[start]] \
                and epochs[idx[j]] == epochs[idx[start]]:
            continue
        a, b = int(idx[start]), int(idx[j - 1])
        out.append(_other_finding(log, so, a, b, bool(rewritten[a]), int(epochs[a]), int(seen_before[a]),
                                  keys))
        start = j
    return out


def epoch_start(log: PartitionLog, epoch: int) -> int | None:
    """The first offset the scan read under this partition leader epoch."""
    return next((o for e, o in log.leader_epochs if e == epoch), None)


def _other_finding(log: PartitionLog, so: np.ndarray, a: int, b: int, rewritten: bool, epoch: int,
                   seen: int, keys: _Keys | None) -> Finding:
    """Rows at committed data records' offsets (the only rows compared: check_partition) that hold
    neither their record nor a neighbour's."""
    first, last, rows = int(so[a]), int(so[b]), b - a + 1
    tp = f"{log.topic}[{log.partition}]"
    where = f"offset {first}" if first == last else f"offsets {first}..{last}"
    key = f" (the row at {first} has key {keys[a]!r})" if keys is not None and keys[a] is not None else ""
    one = rows == 1
    if rewritten:
        start = epoch_start(log, epoch)
        since = f" from offset {start}" if start is not None else ""
        gone = ("belongs to a record that is no longer in the log: another record sits at its offset now"
                if one else "belong to records that are no longer in the log: other records sit at their "
                "offsets now")
        summary = (f"{_the_rows(rows, tp, where)}{key} {gone}, written under partition leader epoch {epoch}"
                   f"{since}, while the sink's rows before {'it' if one else 'them'} match records of epoch "
                   f"{seen} or older: the log was truncated and rewritten after a leader change (an unclean "
                   "leader election, or a replica that lost its data).")
        cause = Cause(KIND, summary, rule=REWRITTEN, leader_epoch=epoch, sink_leader_epoch=seen,
                      epoch_start=start)
        detail = f"re-written under leader epoch {epoch} (the sink's rows before saw epoch {seen})"
    else:
        other = ("holds a key that is neither the key of the record at its offset nor of its neighbours': "
                 "the writer stored a row with coordinates that are not its own" if one else
                 "hold keys that are neither the keys of the records at their offsets nor of their "
                 "neighbours': the writer stored rows with coordinates that are not their own")
        summary = f"{_the_rows(rows, tp, where)}{key} {other}."
        cause = Cause(KIND, summary, rule=DIFFERENT, leader_epoch=epoch)
        detail = "the record at this offset has another key" if one else \
            "the records at these offsets have other keys"
    return Finding(KIND, log.topic, log.partition, first, last, rows, detail=detail, cause=cause)


def _the_rows(rows: int, tp: str, where: str) -> str:
    """A summary's subject: "The sink's row at ..." or "The sink's N rows at ..."."""
    return f"The sink's row at {tp} {where}" if rows == 1 else f"The sink's {rows} rows at {tp} {where}"


def shifted_islands(islands: Iterable[tuple[int, int, int]],
                    shifts: Sequence[Shift]) -> list[tuple[int, int, int]]:
    """The sink's islands with each shift run's rows moved to the offsets they hold (offset - shift):
    rows landing on offsets other rows hold add up (a duplicate is still one)."""
    pieces: list[tuple[int, int, int]] = []
    for first, last, mult in islands:
        for s in shifts:
            if last < s.first or first > s.last:
                continue
            if first < s.first:
                pieces.append((first, s.first - 1, mult))
            lo, hi = max(first, s.first), min(last, s.last)
            pieces.append((lo - s.shift, hi - s.shift, mult))
            first = hi + 1
            if first > last:
                break
        if first <= last:
            pieces.append((first, last, mult))
    # Overlay: +mult where a piece starts, -mult after it ends.
    events: dict[int, int] = {}
    for first, last, mult in pieces:
        events[first] = events.get(first, 0) + mult
        events[last + 1] = events.get(last + 1, 0) - mult
    out: list[tuple[int, int, int]] = []
    level, prev = 0, None
    for at in sorted(events):
        if prev is not None and level > 0:
            if out and out[-1][1] == prev - 1 and out[-1][2] == level:
                out[-1] = (out[-1][0], at - 1, level)
            else:
                out.append((prev, at - 1, level))
        level += events[at]
        prev = at
    return out


def other_record_spans(findings: Iterable[Finding]) -> list[tuple[int, int]]:
    """The offsets (first, last) of the content findings whose rows hold another record than the one at
    their offset, and not a neighbour's (a shift's rows are moved instead: shifted_islands)."""
    return [(f.first_offset, f.last_offset) for f in findings
            if f.kind == KIND and f.cause is not None and f.cause.rule in (DIFFERENT, REWRITTEN)
            and f.first_offset is not None and f.last_offset is not None]


def once_at(islands: Sequence[tuple[int, int, int]],
            spans: Sequence[tuple[int, int]]) -> list[tuple[int, int, int]] | None:
    """The islands with each offset in ``spans`` held once (None: none of them was held more than once).

    One finding per row (docs/audit.md): an offset whose rows include another record's is that
    content_mismatch, not also a duplicate; it stays held (its record is not made a gap)."""
    spans = sorted(spans)
    if not any(m > 1 and a <= last and b >= first for first, last, m in islands for a, b in spans):
        return None
    out: list[tuple[int, int, int]] = []
    for first, last, m in islands:
        pos = first
        if m > 1:
            for a, b in spans:
                if b < pos or a > last:
                    continue
                lo, hi = max(a, pos), min(b, last)
                if lo > pos:
                    out.append((pos, lo - 1, m))
                out.append((lo, hi, 1))
                pos = hi + 1
        if pos <= last:
            out.append((pos, last, m))
    return out

