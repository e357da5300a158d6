"""eosctl.rules.precedence: a row the content check names as holding another record is no place of its
key (one finding per sink row, docs/audit.md)."""

from __future__ import annotations

from eosctl.report.findings import Cause, Finding
from eosctl.rules import content
from eosctl.rules.precedence import KIND, NOT_THEIRS, content_first
from eosctl.rules.rule import key_finding


def mismatch(offset: int, rule: str = content.DIFFERENT) -> Finding:
    return Finding(KIND, "orders", 0, offset, offset, 1, cause=Cause(KIND, "...", rule=rule))


def key(*places: tuple[str, int, int]) -> Finding:
    """The key rule's finding of key "k" at these places, each written without a producer id."""
    return key_finding("k", [{"topic": t, "partition": p, "offset": o, "producer_id": -1,
                              "producer_epoch": -1, "marker_offset": None} for t, p, o in places])


def test_the_names_are_the_content_checks() -> None:
    assert KIND == content.KIND
    assert set(NOT_THEIRS) == {content.DIFFERENT, content.REWRITTEN, content.SHIFTED}


def test_a_key_at_two_rows_that_hold_other_records_is_no_key_duplicate() -> None:
    """Rows 1 and 3 hold a key that is neither record's (tests/kafka/test_hostile_text.py): two content
    findings, and the key is at no committed record twice."""
    dup = key(("orders", 0, 1), ("orders", 0, 3))
    assert content_first([dup, mismatch(1), mismatch(3)]) == [mismatch(1), mismatch(3)]
    # a row of its own record with another value is a place of its key
    value = [mismatch(1, content.DIFFERENT_VALUE), mismatch(3, content.DIFFERENT_VALUE)]
    assert content_first([dup, *value]) == [dup, *value]


def test_the_places_left_are_the_key_duplicate_told_again() -> None:
    dup = key(("orders", 0, 1), ("orders", 0, 3), ("orders", 1, 7))
    assert dup.detail == "in orders[0]@1, orders[0]@3, orders[1]@7"
    [left, m] = content_first([dup, mismatch(3)])
    assert (left.kind, left.partition, left.first_offset, left.last_offset, left.count, left.offsets,
            left.detail) == ("key_duplicate", 0, 1, 7, 2, (1, 7), "in orders[0]@1, orders[1]@7")
    assert left.cause.rule == "non_idempotent" and "orders[0]@3" not in left.cause.summary
    assert m == mismatch(3)
    # no content finding: nothing changes
    assert content_first([dup]) == [dup]
