"""Expected findings: what a correct audit of the sink must report, derived from the truth and from
what the sink did on purpose. The run rules are the auditor's:

* gap / duplicate: a run is a maximal sequence of flagged committed-data offsets of one partition with no
  unflagged committed-data offset between them (markers and aborted records don't split a run); count =
  missing records (gap) or extra rows (duplicate).
* phantom_aborted: a run is a maximal sequence of leaked aborted offsets, split by any offset that is
  neither a leaked aborted record nor a transaction marker; count = rows.
* key_duplicate: one per business key found at more than one committed offset in the sink (aborted rows
  don't count); first/last = min/max offset, count = number of offsets, topic/partition of the first.
"""

from __future__ import annotations

from collections.abc import Sequence

from eosctl.sandbox.pipeline.faults import SinkTarget
from eosctl.sandbox.pipeline.truth import ABORTED, COMMITTED, GroundTruth


def expected_findings(truth: GroundTruth, topic: str, targets: Sequence[SinkTarget],
                      aborted_leak: bool) -> list[dict]:
    committed = truth.of(topic, COMMITTED)
    partitions = sorted({r.partition for r in truth.of(topic)})
    findings: list[dict] = []
    missing: set[tuple[int, int]] = set()
    for kind, fault in (("duplicate", "duplicate-replay"), ("gap", "skip")):
        for target in (t for t in targets if t.fault == fault):
            flagged = {r.offset for r in committed if r.partition == target.partition
                       and target.first_offset <= r.offset <= target.last_offset}
            if kind == "gap":
                missing |= {(target.partition, o) for o in flagged}
            order = [r.offset for r in committed if r.partition == target.partition]
            for run in _runs(order, flagged):
                findings.append(_finding(kind, topic, target.partition, run, len(run), fault))
    if aborted_leak:
        for p in partitions:
            leaked = [r.offset for r in truth.of(topic, ABORTED) if r.partition == p]
            markers = truth.markers_at(topic, p)
            # Only markers may sit between two leaked aborted records of one run.
            for run in _joined(leaked, lambda a, b, markers=markers: markers.issuperset(range(a + 1, b))):
                findings.append(_finding("phantom_aborted", topic, p, run, len(run), "aborted-leak"))
    # Computed whatever the faults: only upstream-retry should produce any, so a stray one is a pipeline bug
    # that the tests catch.
    by_key: dict[str, list[tuple[int, int]]] = {}
    for r in committed:
        if (r.partition, r.offset) not in missing:
            by_key.setdefault(r.key, []).append((r.partition, r.offset))
    findings.extend(_key_duplicates(topic, by_key))
    return sorted(findings, key=lambda f: (f["kind"], f["topic"], f["partition"], f["first_offset"]))


def expected_hop_findings(truth: GroundTruth, input_topic: str, output_topic: str) -> list[dict]:
    """What an audit of the process stage as a hop must report: its input is the sink's source, its committed
    output records (through their lineage) are the sink's rows. The stage commits its final position, so
    every committed input record is expected. Same run rules as above."""
    committed = truth.of(input_topic, COMMITTED)
    status = {(r.partition, r.offset): r.status for r in truth.of(input_topic)}
    rows: dict[tuple[int, int], int] = {}
    for r in truth.of(output_topic, COMMITTED):
        if r.source is not None and r.source[0] == input_topic:
            rows[r.source[1:]] = rows.get(r.source[1:], 0) + 1
    findings: list[dict] = []
    for p in sorted({r.partition for r in truth.of(input_topic)}):
        order = [r.offset for r in committed if r.partition == p]
        missing = {o for o in order if (p, o) not in rows}
        for run in _runs(order, missing):
            findings.append(_finding("gap", input_topic, p, run, len(run), "stage-skip"))
        extra = {o: rows[(p, o)] - 1 for o in order if rows.get((p, o), 0) > 1}
        for run in _runs(order, set(extra)):
            findings.append(_finding("duplicate", input_topic, p, run, sum(extra[o] for o in run),
                                     "stage-replay"))
        leaked = [o for (q, o) in rows if q == p and status.get((p, o)) == ABORTED]
        markers = truth.markers_at(input_topic, p)
        for run in _joined(leaked, lambda a, b, markers=markers: markers.issuperset(range(a + 1, b))):
            findings.append(_finding("phantom_aborted", input_topic, p, run, sum(rows[(p, o)] for o in run),
                                     "stage-read-uncommitted"))
    by_key: dict[str, list[tuple[int, int]]] = {}
    for r in committed:
        if (r.partition, r.offset) in rows:
            by_key.setdefault(r.key, []).append((r.partition, r.offset))
    findings.extend(_key_duplicates(input_topic, by_key))
    return sorted(findings, key=lambda f: (f["kind"], f["topic"], f["partition"], f["first_offset"]))


def _key_duplicates(topic: str, by_key: dict[str, list[tuple[int, int]]]) -> list[dict]:
    out = []
    for key, places in sorted(by_key.items()):
        if len(places) > 1:
            places.sort()
            offsets = [o for _, o in places]
            f = _finding("key_duplicate", topic, places[0][0], offsets, len(offsets), "upstream-retry")
            f.update(first_offset=min(offsets), last_offset=max(offsets), key=key, offsets=offsets)
            out.append(f)
    return out


def _finding(kind: str, topic: str, partition: int, run: list[int], count: int, fault: str) -> dict:
    return {"kind": kind, "topic": topic, "partition": partition, "first_offset": run[0],
            "last_offset": run[-1], "count": count, "fault": fault}


def _runs(order: list[int], flagged: set[int]) -> list[list[int]]:
    """Split the flagged offsets wherever an unflagged one of ``order`` sits between them."""
    runs: list[list[int]] = [[]]
    for o in order:
        if o in flagged:
            runs[-1].append(o)
        elif runs[-1]:
            runs.append([])
    return [r for r in runs if r]


def _joined(offsets: list[int], joins) -> list[list[int]]:
    runs: list[list[int]] = []
    for o in sorted(offsets):
        if runs and joins(runs[-1][-1], o):
            runs[-1].append(o)
        else:
            runs.append([o])
    return runs
