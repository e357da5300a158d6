"""The upsert rule: does a table keyed by the record's key hold, per key, the latest committed record?

Pure decision (no I/O): auditors/state.py reads the log and the table and calls ``judge``.

The expectation, per key: its committed records in partition order (a key in several partitions: by
timestamp, then partition and offset), of which those below the read point (``bounds``: per partition, the
sink group's committed offset, else the last stable offset) are *settled*; the latest settled one is what
the row must hold, and a delete (a tombstone, or a value the config names) means no row. Committed records
at or past the read point are *in flight*: a row holding one of their values, or no row where one of them
deletes, is lag, never a finding. Records of aborted or still-open transactions never count.

A row's value is explained by the latest record of its key that carries it: an older settled record
(``stale_value``), an aborted or open transaction's (``aborted_value``, ``uncommitted_value``); a row where
the key's latest settled record deletes it is ``resurrected_key``; a value no record of the key has is
``value_mismatch``; a key no record has is ``unknown_key``; a key whose latest settled record is a value,
without a row, is ``missing_key``. Without value columns only the keys are compared (an older value is then
invisible), unless the sink names a version column (the source offset each row was written from): a
row is then judged by the record at its version. An intermediate value overwritten in time is invisible by
design: the state is what users read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from eosctl.cluster.model import TP
from eosctl.report.findings import ABORTED, COMMITTED, OPEN, Cause, Finding, TxnCause
from eosctl.report.rootcauses import READ_COMMITTED_FIX
from eosctl.rules.keyed import Key, StateRecord, StateRow, histories, rows_by_key, settled_and_in_flight


@dataclass(frozen=True)
class Judged:
    """What ``judge`` found, and what it compared (for the partitions' summaries)."""

    findings: list[Finding]
    expected_keys: dict[TP, int]  # keys whose latest settled record (a value) is in the partition
    settled: dict[TP, int]  # committed records below the read point, per partition


def judge(records: Iterable[StateRecord], rows: Iterable[StateRow], bounds: Mapping[TP, int], *,
          shown_key: Callable[[Key], str], topic: str | None = None) -> Judged:
    """The findings of a table against the log. ``bounds``: per partition, the offset below which committed
    records are settled; ``shown_key``: a key for people; ``topic``: the topic an unknown key is told
    under (the pipeline's only one), else none."""
    hist = histories(records)
    by_key = rows_by_key(rows)
    findings: list[Finding] = []
    expected: dict[TP, int] = {}
    settled_n: dict[TP, int] = {}
    for key, h in hist.items():
        settled, flight = settled_and_in_flight(h, bounds)
        for r in settled:
            settled_n[r.tp] = settled_n.get(r.tp, 0) + 1
        exp = settled[-1] if settled else None
        if exp is not None and not exp.delete:
            expected[exp.tp] = expected.get(exp.tp, 0) + 1
        there = by_key.get(key)
        if there is None:
            if exp is not None and not exp.delete and not any(r.delete for r in flight):
                findings.append(_missing(shown_key(key), exp))
            continue
        for row in there:
            f = _judge_row(shown_key(key), row, h, settled, flight, exp)
            if f is not None:
                findings.append(f)
    for key, there in by_key.items():
        if key not in hist:
            findings.extend(_unknown(shown_key(key), row, topic) for row in there)
    return Judged(findings, expected, settled_n)


def _judge_row(key: str, row: StateRow, h: Sequence[StateRecord], settled: Sequence[StateRecord],
               flight: Sequence[StateRecord], exp: StateRecord | None) -> Finding | None:
    held = _versioned(row, h)
    if held is not None:  # the row says which record it holds: judged by that record
        if row.value is not None and not held.delete and held.value != row.value:
            return _mismatch(key, row, exp, h)
        if held is exp or held in flight:
            return None
        if held.status != COMMITTED:
            return _uncommitted(key, row, held, exp)
        if exp is not None and exp.delete:
            return _resurrected(key, row, exp, held)
        if exp is not None:
            return _stale(key, row, held, exp, len(settled) - 1 - list(settled).index(held))
    if row.value is None:  # keys only
        if (exp is not None and not exp.delete) or any(not r.delete for r in flight):
            return None
        if exp is not None:
            return _resurrected(key, row, exp, None)
        uncommitted = [r for r in h if r.status != COMMITTED and not r.delete]
        return _uncommitted(key, row, uncommitted[-1], None) if uncommitted else None
    if exp is not None and not exp.delete and exp.value == row.value:
        return None
    if any(not r.delete and r.value == row.value for r in flight):
        return None  # the sink is ahead of its read point: lag, not a finding
    matches = [r for r in h if not r.delete and r.value == row.value and r is not exp]
    match = matches[-1] if matches else None
    if match is not None and match.status != COMMITTED:
        return _uncommitted(key, row, match, exp)
    if exp is not None and exp.delete:
        return _resurrected(key, row, exp, match)
    if match is not None and exp is not None:
        behind = len(settled) - 1 - list(settled).index(match)
        return _stale(key, row, match, exp, behind)
    return _mismatch(key, row, exp, h)


def _versioned(row: StateRow, h: Sequence[StateRecord]) -> StateRecord | None:
    """The record of the key at the row's version (its source offset), if the row names one the key has."""
    if row.version is None:
        return None
    return next((r for r in reversed(h) if r.offset == row.version), None)


def _values(row: StateRow, exp: StateRecord | None) -> str:
    wanted = "no row" if exp is None or exp.delete else exp.shown
    return f"sink holds {row.shown}; expected {wanted}"


def _stale(key: str, row: StateRow, held: StateRecord, exp: StateRecord, behind: int) -> Finding:
    same = held.tp == exp.tp
    first = held.offset if same else exp.offset
    summary = (f"the row holds the value of committed offset {held.where}, {behind} committed "
               f"update{'s' if behind != 1 else ''} behind the latest, {exp.where}: the sink applied an "
               f"older record over a newer one (a replay from an older offset, or a retry reordered after "
               f"a newer write) without checking the row's version")
    cause = Cause("stale_value", summary, rule="older_committed_value")
    detail = (f"{_values(row, exp)} (offset {exp.offset}); it is the value of offset {held.offset}"
              f"{'' if same else f' of partition {held.partition}'}")
    return Finding("stale_value", exp.topic, exp.partition, first, exp.offset, behind, key=key,
                   offsets=(held.offset, exp.offset), detail=detail, cause=cause)


def _uncommitted(key: str, row: StateRow, held: StateRecord, exp: StateRecord | None) -> Finding:
    kind = "aborted_value" if held.status == ABORTED else "uncommitted_value"
    how = (f"in a transaction that aborted (marker at offset {held.marker_offset})" if held.status == ABORTED
           else "in a transaction still open")
    summary = (f"the row holds the value of offset {held.where}, written by producer id {held.producer_id} "
               f"(epoch {held.producer_epoch}) {how}: the sink's consumer reads read_uncommitted; "
               f"{READ_COMMITTED_FIX}")
    txn = TxnCause(held.producer_id, held.producer_epoch, held.offset, held.offset,
                   ABORTED if held.status == ABORTED else OPEN, held.marker_offset)
    cause = Cause(kind, summary, transactions=(txn,), rule="read_uncommitted")
    detail = f"{_values(row, exp)}{'' if exp is None else f' (offset {exp.offset})'}"
    return Finding(kind, held.topic, held.partition, held.offset, held.offset, 1, key=key,
                   offsets=(held.offset,) if exp is None else (held.offset, exp.offset), detail=detail,
                   cause=cause)


def _resurrected(key: str, row: StateRow, exp: StateRecord, held: StateRecord | None) -> Finding:
    what = "a tombstone" if exp.shown == "null" else f"a delete value ({exp.shown})"
    since = "" if held is None else f" (it holds the value of offset {held.where})"
    summary = (f"committed offset {exp.where}, {what}, deleted the key, but the row is there{since}: the "
               f"sink did not apply the delete (deletes turned off, e.g. delete.enabled=false, or tombstones "
               f"dropped), or a replay of an older record wrote the row again after it")
    cause = Cause("resurrected_key", summary, rule="delete_not_applied")
    detail = f"sink holds {row.shown}; expected no row (offset {exp.offset} deletes the key)"
    return Finding("resurrected_key", exp.topic, exp.partition, exp.offset, exp.offset, 1, key=key,
                   offsets=(exp.offset,) if held is None else (held.offset, exp.offset), detail=detail,
                   cause=cause)


def _missing(key: str, exp: StateRecord) -> Finding:
    summary = (f"committed offset {exp.where} is the key's latest value, but the table has no row for it: "
               f"the write was lost (offsets committed before the upsert, or a batch skipped), or a delete "
               f"no record asked for removed it")
    cause = Cause("missing_key", summary, rule="never_written")
    return Finding("missing_key", exp.topic, exp.partition, exp.offset, exp.offset, 1, key=key,
                   offsets=(exp.offset,), detail=f"no row; expected {exp.shown} (offset {exp.offset})",
                   cause=cause)


def _unknown(key: str, row: StateRow, topic: str | None) -> Finding:
    summary = ("no record of the source topics (log start to high watermark) has this key: the row came "
               "from elsewhere (another topic, a manual write), its records were deleted by retention, or "
               "the config's key mapping is not the writer's")
    cause = Cause("unknown_key", summary, rule="no_record")
    return Finding("unknown_key", topic, None, None, None, 1, key=key, detail=f"sink holds {row.shown}",
                   cause=cause)


def _mismatch(key: str, row: StateRow, exp: StateRecord | None, h: Sequence[StateRecord]) -> Finding:
    at = exp if exp is not None else h[-1]
    summary = ("the row's value is no record's value for this key: the sink transforms the values "
               "(check value_fields against the writer's mapping), or wrote another key's value")
    cause = Cause("value_mismatch", summary, rule="no_such_value")
    return Finding("value_mismatch", at.topic, at.partition, at.offset, at.offset, 1, key=key,
                   offsets=(at.offset,), detail=f"{_values(row, exp)} (offset {at.offset})", cause=cause)
