"""The aggregate rule: does a table that folds each key's records (count, sum, min or max of a JSON value
field) hold the fold of the key's committed records below the read point?

Pure decision (no I/O): auditors/state.py reads the log and the table and calls ``judge``. The records are
eosctl.rules.upsert's StateRecords, their value the field's text (one element), a delete (a tombstone)
counted by no fold, as Kafka Streams' aggregations skip null values. Records past the read point are in
flight: a row holding the fold of the settled records and some of the next ones is lag, not a finding.

A row that holds another number is an ``aggregate_mismatch`` naming the key, the expected and the found
fold, and the records that explain the difference where exactly one explanation fits: the key's aborted or
open records counted in (a consumer reading read_uncommitted), one run of consecutive committed records
counted twice (an at-least-once restart replayed them), or one run left out (a skip lost them); for min
and max, the records beyond the found value left out. A key with committed records and no row is a
``missing_key``; a row whose key no record has an ``unknown_key`` (eosctl.rules.upsert).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from decimal import Decimal, InvalidOperation

from eosctl.cluster.model import TP
from eosctl.report.findings import COMMITTED, Cause, Finding
from eosctl.rules.keyed import histories, rows_by_key, settled_and_in_flight
from eosctl.rules.upsert import Judged, Key, StateRecord, StateRow, _missing, _unknown

FNS = ("count", "sum", "min", "max")
# Relative difference under which two folds are the same number (a float column's rounding).
TOLERANCE = Decimal("1e-9")


def number(text: str | None) -> Decimal | None:
    """A fold's or a field's number; None where it is none (a missing field, text that is no number)."""
    if text is None:
        return None
    try:
        n = Decimal(text)
    except InvalidOperation:
        return None
    return n if n.is_finite() else None


def same(a: Decimal | None, b: Decimal | None) -> bool:
    if a is None or b is None:
        return a is b
    return a == b or abs(a - b) <= TOLERANCE * max(Decimal(1), abs(a), abs(b))


def _part(fn: str, r: StateRecord) -> Decimal | None:
    """What one record adds to the fold: 1 for count, its field's number otherwise (None: nothing)."""
    if r.delete:
        return None
    if fn == "count":
        return Decimal(1)
    return number(r.value[0] if r.value else None)


def fold(fn: str, records: Iterable[StateRecord]) -> Decimal | None:
    """The fold of the records (None: no record adds to it; count: 0)."""
    parts = [p for p in (_part(fn, r) for r in records) if p is not None]
    if fn == "count":
        return Decimal(len(parts))
    if not parts:
        return None
    return sum(parts, Decimal(0)) if fn == "sum" else min(parts) if fn == "min" else max(parts)


def shown(n: Decimal | None) -> str:
    if n is None:
        return "null"
    return str(int(n)) if n == n.to_integral_value() else str(n.normalize())


def judge(records: Iterable[StateRecord], rows: Iterable[StateRow], bounds: Mapping[TP, int], fn: str, *,
          field: str | None, shown_key: Callable[[Key], str], topic: str | None = None) -> Judged:
    """The findings of an aggregate table against the log; ``rows``' value is the fold column (one
    element)."""
    hist = histories(records)
    by_key = rows_by_key(rows)
    findings: list[Finding] = []
    expected: dict[TP, int] = {}
    settled_n: dict[TP, int] = {}
    for key, h in hist.items():
        settled, flight = settled_and_in_flight(h, bounds)
        counted = [r for r in settled if _part(fn, r) is not None]
        for r in settled:
            settled_n[r.tp] = settled_n.get(r.tp, 0) + 1
        if counted:
            expected[counted[-1].tp] = expected.get(counted[-1].tp, 0) + 1
        there = by_key.get(key)
        if there is None:
            if counted:
                f = _missing(shown_key(key), counted[-1])
                what = f"{fn}({field})" if field else fn
                findings.append(replace(f, detail=f"no row; expected {what} {shown(fold(fn, settled))} (up "
                                                  f"to offset {counted[-1].offset})"))
            continue
        for row in there:
            judged = _judge_row(fn, field, shown_key(key), row, h, settled, flight, counted)
            if judged is not None:
                findings.append(judged)
    for key, there in by_key.items():
        if key not in hist:
            findings.extend(_unknown(shown_key(key), row, topic) for row in there)
    return Judged(findings, expected, settled_n)


def _judge_row(fn: str, field: str | None, key: str, row: StateRow, h: Sequence[StateRecord],
               settled: Sequence[StateRecord], flight: Sequence[StateRecord],
               counted: Sequence[StateRecord]) -> Finding | None:
    found = number(row.value[0] if row.value else None)
    if row.version is not None:  # the row says the last offset it folded: its own read point
        settled = [r for r in h if r.status == COMMITTED and r.offset <= row.version]
        flight, counted = [], [r for r in settled if _part(fn, r) is not None]
    want = fold(fn, settled)
    if same(found, want) or (want == 0 and found is None and fn == "count"):
        return None
    if any(same(found, fold(fn, [*settled, *flight[:i]])) for i in range(1, len(flight) + 1)):
        return None  # the sink is ahead of its read point: lag
    rule, explained = _explain(fn, found, want, h, counted)
    at = counted[-1] if counted else h[-1]
    what = f"{fn}({field})" if field else fn
    said = {"counted_aborted": "counted the aborted or open offsets {}",
            "counted_twice": "counted offsets {} twice", "missing_records": "missing offsets {}"}
    because = said[rule].format(_ranges([r.offset for r in explained])) if explained else ""
    detail = (f"expected {shown(want)} ({what} of {len(counted)} committed record"
              f"{'s' * (len(counted) != 1)} up to offset {at.offset}), found {shown(found)}"
              + (f": {because}" if because else ""))
    first, last = (explained[0], explained[-1]) if explained else (at, at)
    summary = {
        "counted_aborted": "the fold counts records of aborted or open transactions: the sink's consumer "
                           "reads read_uncommitted",
        "counted_twice": "the fold counts committed records twice: an at-least-once restart replayed them "
                         "into the aggregate (its state or output committed apart from its input offsets)",
        "missing_records": "the fold lacks committed records: a restart or a skip passed over them (offsets "
                           "committed before the aggregate was)",
        "unexplained_difference": "the fold differs from the committed records' and no one run of records "
                                  "explains it",
    }[rule]
    cause = Cause("aggregate_mismatch", f"{summary}; {detail}", rule=rule)
    return Finding("aggregate_mismatch", first.topic, first.partition, first.offset, last.offset,
                   max(1, len(explained)), key=key, offsets=tuple(r.offset for r in explained) or None,
                   detail=detail, cause=cause)


def _explain(fn: str, found: Decimal | None, want: Decimal | None, h: Sequence[StateRecord],
             counted: Sequence[StateRecord]) -> tuple[str, list[StateRecord]]:
    """The one explanation that fits, and its records; ("unexplained_difference", []) if none or several."""
    uncommitted = [r for r in h if r.status != COMMITTED and _part(fn, r) is not None]
    if uncommitted and same(found, fold(fn, [*counted, *uncommitted])):
        return "counted_aborted", uncommitted
    if found is None:
        return "unexplained_difference", []
    if fn in ("count", "sum"):
        diff = found - (want or Decimal(0))
        rule = "counted_twice" if diff > 0 else "missing_records"
        run = _one_run(counted, [_part(fn, r) or Decimal(0) for r in counted], abs(diff))
        return (rule, run) if run else ("unexplained_difference", [])
    # min / max: the records beyond the found value, left out, give it
    beyond = [r for r in counted if (_part(fn, r) or 0) < found] if fn == "min" else \
        [r for r in counted if (_part(fn, r) or 0) > found]
    rest = [r for r in counted if r not in beyond]
    if beyond and same(found, fold(fn, rest)):
        return "missing_records", beyond
    return "unexplained_difference", []


# A key with more committed records than this is not searched for a run that explains its difference
# (the search is quadratic in the key's records).
MAX_SEARCHED = 5_000


def _one_run(records: Sequence[StateRecord], parts: Sequence[Decimal], total: Decimal) -> list[StateRecord]:
    """The one run of consecutive records whose parts add up to ``total``; [] if none or several."""
    if len(records) > MAX_SEARCHED or total == 0:
        return []
    prefix = [Decimal(0)]
    for p in parts:
        prefix.append(prefix[-1] + p)
    found: tuple[int, int] | None = None
    for i in range(len(parts)):
        for j in range(i + 1, len(parts) + 1):
            if same(prefix[j] - prefix[i], total):
                if found is not None:
                    return []
                found = (i, j)
    return list(records[found[0]:found[1]]) if found else []


def _ranges(offsets: Sequence[int]) -> str:
    """120-122, 130: runs of consecutive offsets."""
    out: list[str] = []
    for o in offsets:
        if out and o == int(out[-1].rsplit("-", 1)[-1]) + 1:
            start = out[-1].split("-")[0]
            out[-1] = f"{start}-{o}"
        else:
            out.append(str(o))
    return ", ".join(out)
