"""The pairing of a MirrorMaker 2 replica with its source partition (eosctl.sink.replica.align): which source
offset each replica record is, what the replica promises to hold, and what it holds out of order. (The
findings these rows make are the reconciliation's, checked on real MM2 in
tests/integration/test_mirror_replica.py.)"""

from __future__ import annotations

from eosctl.sink.replica import align, fingerprint


def log(*offsets: int) -> list[tuple[int, tuple]]:
    """A source partition with a record at each offset (gaps between are markers)."""
    return [(o, fingerprint(f"k{o}".encode(), f"v{o}".encode(), 1000 + o)) for o in offsets]


def copies(*offsets: int) -> list[tuple]:
    return [fingerprint(f"k{o}".encode(), f"v{o}".encode(), 1000 + o) for o in offsets]


SOURCE = log(0, 1, 2, 4, 5, 6, 8, 9)  # markers at 3 and 7


def test_a_clean_copy_pairs_each_record_with_its_source_offset_and_covers_up_to_the_last():
    found = align(SOURCE, copies(0, 1, 2, 4, 5, 6))
    assert found.sources == [0, 1, 2, 4, 5, 6]
    assert found.covered == 7 and found.out_of_order == []


def test_a_replay_pairs_the_copies_again_from_where_the_task_resumed():
    found = align(SOURCE, copies(0, 1, 2, 4, 1, 2, 4, 5))
    assert found.sources == [0, 1, 2, 4, 1, 2, 4, 5]
    assert found.out_of_order == [] and found.covered == 6


def test_a_record_copied_once_after_a_later_one_is_out_of_order():
    found = align(SOURCE, copies(0, 2, 1, 4))
    assert found.sources == [0, 2, 1, 4] and found.out_of_order == [1]


def test_a_copy_that_matches_nothing_has_no_source_and_a_missing_record_is_not_paired():
    changed = [fingerprint(b"k4", b"other", 1004)]
    found = align(SOURCE, copies(0, 1) + changed + copies(5))
    assert found.sources == [0, 1, None, 5] and found.covered == 6


def test_the_timestamp_is_part_of_the_match():
    found = align(SOURCE, [fingerprint(b"k0", b"v0", 999)])
    assert found.sources == [None] and found.covered == 0
