"""One finding per sink row: no (topic, partition, offset) of the sink is named by two findings of an audit.

The precedence that makes it so is the rule's (docs/audit.md, "One finding per row"); this module is the
check the test suite runs over every audit's findings (``EOSCTL_CHECK_ONE_FINDING_PER_ROW``: a file each
overlap is appended to, tests/conftest.py fails the test that wrote one). Pure: no I/O but that file.

What a finding names:
- no row: ``gap``, ``lost_key`` (records the sink lacks), ``offset_mismatch`` (the offsets table),
  ``invalid_row`` (no offset), ``dlq_duplicate`` and ``dlq_aborted`` (dead letters: the DLQ's records);
- ``key_duplicate``: its places (``offsets``; a key across partitions is not checked);
- ``duplicate``: its range but for the markers, aborted and open data it passes over (a run of duplicates
  is not split by offsets that are not expected, whose rows are their phantoms); so do a stage's
  ``duplicate_key`` and ``ahead_of_commit`` (eosctl.rules.hop), whose input runs pass over the aborted and
  open input a ``phantom_key`` names;
- ``phantom_aborted`` / ``phantom_uncommitted``: the aborted / open offsets of its range (markers between
  two aborted transactions don't split a run, and a row at one is a ``phantom_marker``); a ``phantom_key``:
  both;
- every other kind: its range.

Two overlaps are legitimate, each two true statements about the same rows:
- a ``shifted_coordinates`` content finding names the offsets its rows *store*; the partition's offsets
  findings are reconciled at the offsets the rows *hold* (offset - shift), so a record the shifted writer
  wrote twice is a ``duplicate`` inside the shift's range;
- a ``key_duplicate`` names source records that carry one key (the producer wrote it twice); one of them
  may also be a ``duplicate`` (the sink stored that record twice).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence

from eosctl.report.findings import Finding, PartitionSummary

ENV = "EOSCTL_CHECK_ONE_FINDING_PER_ROW"
# dlq_duplicate and dlq_aborted name dead letters, records of the DLQ topic, not rows of the sink.
NO_ROWS = frozenset({"gap", "lost_key", "offset_mismatch", "invalid_row", "dlq_duplicate", "dlq_aborted"})
# Kinds whose runs pass over offsets of other kinds, and the log segments (eosctl.report.segments) they
# name: "not" = every offset but those kinds', "only" = those kinds' offsets alone.
_PASSED_OVER = ("ABORTED", "MARKER", "OPEN")
_NOT = {"duplicate": _PASSED_OVER, "duplicate_key": _PASSED_OVER, "ahead_of_commit": _PASSED_OVER}
_ONLY = {"phantom_aborted": ("ABORTED",), "phantom_uncommitted": ("OPEN",),
         "phantom_key": ("ABORTED", "OPEN")}
_SHIFTED = "shifted_coordinates"


def named_twice(partitions: Iterable[PartitionSummary], findings: Sequence[Finding]) -> list[str]:
    """Each (topic, partition, offset) two findings name, as a line naming both: [] when none is."""
    segments: dict[tuple[str, int], dict[str, list[tuple[int, int]]]] = {}
    for p in partitions:
        by_kind: dict[str, list[tuple[int, int]]] = {}
        for s in p.log_segments or ():
            if s.count == s.last - s.first + 1:  # exact (a coalesced segment's kind is not every offset's)
                by_kind.setdefault(s.kind, []).append((s.first, s.last))
        segments[(p.topic, p.partition)] = by_kind
    spans: dict[tuple[str, int], list[tuple[int, int, int]]] = {}
    for i, f in enumerate(findings):
        if f.topic is None or f.partition is None:
            continue
        tp = (f.topic, f.partition)
        for first, last in _named(f, segments.get(tp, {})):
            spans.setdefault(tp, []).append((first, last, i))
    out = []
    for (topic, partition), these in sorted(spans.items()):
        active: list[tuple[int, int, int]] = []
        for first, last, i in sorted(these):
            active = [a for a in active if a[1] >= first]
            for _, _, j in active:
                if j != i and not _legitimate(findings[i], findings[j]):
                    out.append(f"{topic}[{partition}] offset {first}: named by {_name(findings[j])} and by "
                               f"{_name(findings[i])}")
            active.append((first, last, i))
    return out


def _named(f: Finding, segs: dict[str, list[tuple[int, int]]]) -> list[tuple[int, int]]:
    """The offsets ``f`` names, as (first, last) spans."""
    if f.kind in NO_ROWS or f.first_offset is None or f.last_offset is None:
        return []
    if f.kind == "key_duplicate":
        return [] if f.detail else [(o, o) for o in f.offsets or ()]
    whole = [(f.first_offset, f.last_offset)]
    if f.kind in _ONLY:
        if not segs:
            return whole
        only = sorted(s for kind in _ONLY[f.kind] for s in segs.get(kind, ()))
        return _cut(whole, only, keep=True)
    if f.kind in _NOT:
        for kind in _NOT[f.kind]:
            whole = _cut(whole, segs.get(kind), keep=False)
    return whole


def _cut(spans: list[tuple[int, int]], by: list[tuple[int, int]] | None, keep: bool) -> list[tuple[int, int]]:
    """``spans`` intersected with ``by`` (keep) or without it."""
    by = by or []
    out = []
    for first, last in spans:
        inside = [(max(first, a), min(last, b)) for a, b in by if a <= last and b >= first]
        if keep:
            out += inside
            continue
        pos = first
        for a, b in inside:
            if a > pos:
                out.append((pos, a - 1))
            pos = max(pos, b + 1)
        if pos <= last:
            out.append((pos, last))
    return out


def _legitimate(a: Finding, b: Finding) -> bool:
    kinds = {a.kind, b.kind}
    if kinds == {"key_duplicate", "duplicate"}:
        return True
    shifted = [f for f in (a, b) if f.kind == "content_mismatch" and f.cause is not None
               and f.cause.rule == _SHIFTED]
    return len(shifted) == 1 and kinds != {"content_mismatch"}


def _name(f: Finding) -> str:
    rule = f" ({f.cause.rule})" if f.cause is not None and f.cause.rule else ""
    return f"{f.kind}{rule} {f.first_offset}..{f.last_offset}"


def record(partitions: Sequence[PartitionSummary], findings: Sequence[Finding]) -> None:
    """Under the test suite (ENV names a file): append each overlap of this audit's findings to it."""
    path = os.environ.get(ENV)
    if not path:
        return
    problems = named_twice(partitions, findings)
    if problems:
        with open(path, "a", encoding="utf-8") as out:
            out.write("".join(f"{p}\n" for p in problems))
