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


def test_every_record_of_a_late_batch_is_out_of_order_one_finding_per_run():
    """Issue 49: the replica holds 70, 71, 78..81, 83, 84, 72, 74..77, 85 (markers at 73 and 82): the
    pairing went back to 72 and read 74..77 as in order again, one finding where five records came late."""
    source = log(*(o for o in range(70, 90) if o not in (73, 82)))
    found = align(source, copies(70, 71, 78, 79, 80, 81, 83, 84, 72, 74, 75, 76, 77, 85))
    assert found.out_of_order == [72, 74, 75, 76, 77]
    assert found.late_runs == [(72, 77, 5)]  # the marker at 73 doesn't split the batch
    assert found.sources == [70, 71, 78, 79, 80, 81, 83, 84, 72, 74, 75, 76, 77, 85]


def test_two_adjacent_batches_swapped_report_every_record_of_the_late_one():
    """Batches 0..4, 5..9, 10..14 written 0..4, 10..14, 5..9: all of 5..9, as one out_of_order finding of
    5 records; a record held in order between two late ones splits their runs."""
    import json

    from auditors.passes import out_of_order
    from eosctl.config.model import Sink
    from eosctl.report.findings import Finding
    from eosctl.sink.replica import late_runs

    source = log(*range(20))
    found = align(source, copies(*range(5), *range(10, 15), *range(5, 10), *range(15, 20)))
    assert found.out_of_order == [5, 6, 7, 8, 9] and found.late_runs == [(5, 9, 5)]
    assert late_runs([3, 5, 6], [o for o, _ in source]) == [(3, 3, 1), (5, 6, 2)]
    frozen = Sink(duckdb="x", frozen_from=Sink(kafka_topic="src.orders", lineage="replica"),
                  at=json.dumps({"replica_of": "orders", "out_of_order": [[0, [5, 6, 7, 8, 9]]]}))
    [f] = out_of_order(frozen)
    assert (f.kind, f.partition, f.first_offset, f.last_offset, f.count, f.detail) == (
        "out_of_order", 0, 5, 9, 5, "in src.orders[0] after later records")
    assert f.cause.summary.startswith("orders[0] offsets 5..9 (5 records) are in src.orders after records "
                                      "that follow them at the source")
    # record 7 was of an aborted transaction: its copy is that phantom only, the rest two runs
    aborted = Finding("phantom_aborted", "orders", 0, 7, 7, 1)
    assert [(f.first_offset, f.last_offset, f.count) for f in out_of_order(frozen, [aborted])] == [
        (5, 6, 2), (8, 9, 2)]
