"""eosctl.report.onerow: the suite's check that no sink row (topic, partition, offset) is named by two
findings of an audit, and the overlaps that are two true statements about one row."""

from __future__ import annotations

from eosctl.report.findings import Cause, Finding, PartitionSummary
from eosctl.report.onerow import named_twice
from eosctl.report.segments import LogSegment

# orders[0]: 0..4 committed, 5 COMMIT, 6..7 aborted, 8 ABORT, 9..10 aborted, 11 ABORT, 12..19 committed
PART = PartitionSummary("orders", 0, 0, 20, 20, 14, 14, log_segments=(
    LogSegment("MARKER", 5, 5, 1), LogSegment("ABORTED", 6, 7, 2), LogSegment("MARKER", 8, 8, 1),
    LogSegment("ABORTED", 9, 10, 2), LogSegment("MARKER", 11, 11, 1)))


def content(first: int, last: int, rule: str) -> Finding:
    return Finding("content_mismatch", "orders", 0, first, last, last - first + 1,
                   cause=Cause("content_mismatch", "...", rule=rule))


def f(kind: str, first: int, last: int, **kw) -> Finding:
    return Finding(kind, "orders", 0, first, last, last - first + 1, **kw)


def test_a_row_at_a_marker_named_as_a_phantom_and_a_content_mismatch_is_caught() -> None:
    """The overlap of issue 49: phantom_marker and content_mismatch at the marker's offset."""
    assert named_twice([PART], [f("phantom_marker", 5, 5), content(5, 5, "different_record")]) == [
        "orders[0] offset 5: named by phantom_marker 5..5 and by content_mismatch (different_record) 5..5"]
    assert named_twice([PART], [f("duplicate", 13, 14), content(14, 16, "different_record")]) != []
    # a key duplicate made up by a row holding another record's key
    key = f("key_duplicate", 3, 14, key="k", offsets=(3, 14))
    assert named_twice([PART], [key, content(14, 14, "different_record")]) != []


def test_runs_that_pass_over_other_offsets_name_only_their_own() -> None:
    # two aborted transactions leaked back to back are one run over the ABORT marker at 8, whose row is a
    # phantom_marker; a duplicate run passes over the aborted ones
    assert named_twice([PART], [f("phantom_aborted", 6, 10), f("phantom_marker", 8, 8)]) == []
    assert named_twice([PART], [f("duplicate", 3, 13), f("phantom_aborted", 6, 10),
                                f("phantom_marker", 5, 5)]) == []
    # gaps, offset mismatches and invalid rows name no row
    assert named_twice([PART], [f("gap", 0, 19), f("offset_mismatch", 0, 19), f("duplicate", 2, 2)]) == []


def test_two_true_statements_about_one_row_are_allowed() -> None:
    # a shift names the offsets its rows store, the duplicate the offset the rows hold
    assert named_twice([PART], [content(13, 19, "shifted_coordinates"), f("duplicate", 15, 15)]) == []
    # a record the sink stored twice whose key the producer also wrote at another offset
    key = f("key_duplicate", 3, 14, key="k", offsets=(3, 14))
    assert named_twice([PART], [key, f("duplicate", 3, 3)]) == []
    # but two content findings never share a row
    assert named_twice([PART], [content(13, 19, "shifted_coordinates"), content(15, 15, "different_value")])


def test_a_stages_input_runs_pass_over_the_aborted_input_its_phantom_key_names() -> None:
    """Stop 62's CI: a Streams stage killed past an aborted input transaction gave ahead_of_commit (and,
    after the restart, duplicate_key) 58..75 around phantom_key 60..69, the aborted input it read."""
    stage = PartitionSummary("in", 2, 0, 80, 80, 70, 70, log_segments=(
        LogSegment("ABORTED", 60, 69, 10), LogSegment("MARKER", 70, 70, 1), LogSegment("OPEN", 76, 79, 4)))

    def g(kind: str, first: int, last: int) -> Finding:
        return Finding(kind, "in", 2, first, last, last - first + 1)

    for run in ("ahead_of_commit", "duplicate_key"):
        assert named_twice([stage], [g(run, 58, 75), g("phantom_key", 60, 69)]) == []
        assert named_twice([stage], [g(run, 58, 79), g("phantom_key", 60, 79)]) == []
    # a phantom_key names the open input it read as well as the aborted
    assert named_twice([stage], [g("phantom_key", 60, 79), g("phantom_uncommitted", 77, 77)]) == [
        "in[2] offset 77: named by phantom_key 60..79 and by phantom_uncommitted 77..77"]
    # but the runs name the committed input they pass: two of them there name it twice
    assert named_twice([stage], [g("ahead_of_commit", 58, 75), g("duplicate_key", 71, 72)]) == [
        "in[2] offset 71: named by duplicate_key 71..72 and by ahead_of_commit 58..75"]
