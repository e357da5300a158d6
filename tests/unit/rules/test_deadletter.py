"""The sink and its dead-letter queue reconciled together (eosctl.rules.deadletter through the audit rule):
dead-lettered records are no gaps; sink-and-DLQ, DLQ duplicates and dead-lettered aborted input are
findings; what is left of a gap is a loss no DLQ record explains."""

from __future__ import annotations

from eosctl.cluster.deadletter import DeadLetters
from eosctl.cluster.model import Kind, OffsetRange, PartitionLog
from eosctl.report.window import PartitionWindow
from eosctl.rules.rule import audit_partition


def plog(*ranges: tuple[int, int, str]) -> PartitionLog:
    rs = [OffsetRange(a, b, Kind[k]) for a, b, k in ranges]
    hw = rs[-1].last + 1
    return PartitionLog("orders", 0, 0, hw, hw, 0, hw, rs)


# 0-9 committed, 10 marker, 11-13 aborted, 14 abort marker, 15-24 committed
LOG = plog((0, 9, "DATA"), (10, 10, "MARKER"), (11, 13, "ABORTED"), (14, 14, "MARKER"), (15, 24, "DATA"))
HELD = [(0, 2, 1), (5, 9, 1), (15, 17, 1), (20, 24, 1)]  # missing 3-4, 18-19


def audit(dead, islands=HELD, window=None):
    summary, findings = audit_partition("orders", 0, LOG, iter(islands), dead_lettered=dead,
                                        dlq_topic="orders.dlq", window=window)
    return summary, [(f.kind, f.first_offset, f.last_offset, f.count) for f in findings]


def test_without_a_dlq_every_missing_record_is_a_gap() -> None:
    summary, found = audit(None)
    assert found == [("gap", 3, 4, 2), ("gap", 18, 19, 2)] and summary.dead_lettered is None


def test_dead_lettered_records_are_no_gaps_and_the_rest_is_a_loss_no_dlq_record_explains() -> None:
    summary, found = audit([(3, 1), (4, 1), (18, 1)])
    assert found == [("gap", 19, 19, 1)] and summary.dead_lettered == 3
    _, findings = audit_partition("orders", 0, LOG, iter(HELD), dead_lettered=[(18, 1)], dlq_topic="q")
    assert [(f.first_offset, f.detail) for f in findings if f.kind == "gap"] == [
        (3, "in neither the sink nor the DLQ q"), (19, "in neither the sink nor the DLQ q")]
    # the piece the DLQ leaves is explained as itself, with the sink's neighbours of the whole gap
    rest = next(f for f in findings if f.first_offset == 19)
    assert rest.cause is not None and "offset 19 " in rest.cause.summary
    assert "holds offset 20 after them" in rest.cause.summary and "18" not in rest.cause.summary


def test_a_gap_split_around_a_marker_counts_only_committed_records() -> None:
    log = plog((0, 4, "DATA"), (5, 5, "MARKER"), (6, 9, "DATA"))
    _, findings = audit_partition("orders", 0, log, iter([(0, 1, 1)]), dead_lettered=[(4, 1), (6, 1)],
                                  dlq_topic="q")
    assert [(f.kind, f.first_offset, f.last_offset, f.count) for f in findings] == [
        ("gap", 2, 3, 2), ("gap", 7, 9, 3)]


def test_sink_and_dlq_duplicates_and_aborted_input_are_findings() -> None:
    dead = [(1, 1), (2, 1), (3, 2), (4, 1), (12, 1)]
    summary, found = audit(dead)
    assert sorted(found) == sorted([
        ("sink_and_dlq", 1, 2, 2),  # held by the sink and dead-lettered
        ("dlq_duplicate", 3, 3, 1),  # dead-lettered twice (count = extra)
        ("dlq_aborted", 12, 12, 1),  # an aborted record dead-lettered
        ("gap", 18, 19, 2)])
    assert summary.dead_lettered == 2  # 3 and 4: only the DLQ holds them


def test_dead_letters_outside_the_window_are_not_judged() -> None:
    _, found = audit([(3, 2), (4, 1)], window=PartitionWindow(15, None))
    assert found == [("gap", 18, 19, 2)]


def test_the_dlq_headers_of_connect_and_streams() -> None:
    dead = DeadLetters("q")
    dead.add([("__connect.errors.topic", b"orders"), ("__connect.errors.partition", b"0"),
              ("__connect.errors.offset", b"42"),
              ("__connect.errors.exception.class.name", b"org.apache.kafka.connect.errors.DataException")])
    dead.add([("__streams.errors.topic", b"orders"), ("__streams.errors.partition", b"1"),
              ("__streams.errors.offset", b"7"),
              ("__streams.errors.exception", b"java.lang.ArithmeticException")])
    dead.add([("__connect.errors.topic", b"orders"), ("__connect.errors.partition", b"x"),
              ("__connect.errors.offset", b"1")])
    dead.add([("other", b"1")])
    assert {tp: dict(c) for tp, c in dead.by_partition.items()} == {("orders", 0): {42: 1},
                                                                    ("orders", 1): {7: 1}}
    assert dict(dead.exceptions) == {"org.apache.kafka.connect.errors.DataException": 1,
                                     "java.lang.ArithmeticException": 1}
    assert (dead.records, dead.unreadable, dict(dead.conventions)) == (4, 2, {"connect": 1, "streams": 1})
