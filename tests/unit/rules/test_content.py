"""eosctl.rules.content: which sink rows hold another record than the one at their offset, and why."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from eosctl.cluster.model import Kind, OffsetRange, PartitionLog, merge_ranges
from eosctl.cluster.recordkeys import RecordKeys, hash_bytes
from eosctl.rules.content import check_partition, cut_at, once_at, shifted_islands


def log_of(keys: list[str | None], epochs: list[int], control: set[int] = frozenset()) -> PartitionLog:
    n = len(keys)
    ranges = [OffsetRange(o, o, Kind.MARKER if o in control else Kind.DATA) for o in range(n)]
    starts, prev = [], None
    for o, e in enumerate(epochs):
        if e != prev:
            starts.append((e, o))
            prev = e
    rk = RecordKeys(np.arange(n, dtype=np.int64), np.array(epochs, np.int32),
                    np.array([o in control for o in range(n)]), hash_bytes(None if k is None else k.encode()
                                                                          for k in keys))
    return PartitionLog("t", 0, 0, n, n, 0, n, ranges, leader_epochs=starts, record_keys=rk)


def check(log: PartitionLog, rows: list[tuple[int, str]]):
    keys = [k for _, k in rows]
    offsets = np.array([o for o, _ in rows], np.int64)
    return check_partition(log, offsets, hash_bytes(k.encode() for k in keys), keys)


def found(result) -> list[tuple]:
    return [(f.first_offset, f.last_offset, f.count, f.cause.rule, f.cause.shift, f.cause.leader_epoch,
             f.cause.sink_leader_epoch, f.cause.epoch_start) for f in result.findings]


def test_rows_the_log_rewrote_under_a_newer_leader_epoch() -> None:
    # The sink read 0..9 under epoch 3; an unclean election made epoch 5 from offset 6: 6..9 are new records.
    old = [f"k{o}" for o in range(10)]
    new = old[:6] + [f"n{o}" for o in range(6, 12)]
    log = log_of(new, [3] * 6 + [5] * 6)
    result = check(log, list(enumerate(old)))
    assert found(result) == [(6, 9, 4, "rewritten_after_leader_change", None, 5, 3, 6)]
    assert "written under partition leader epoch 5 from offset 6" in result.findings[0].cause.summary
    # the same rows where no leader changed: another record's key, nothing shifted
    result = check(log_of(new, [3] * 12), list(enumerate(old)))
    assert found(result) == [(6, 9, 4, "different_record", None, 3, None, None)]


def test_the_rows_from_a_cut_are_judged_as_in_the_whole_partition() -> None:
    # What an incremental audit checks (auditors.incremental): the rows from a cut on, with the newest epoch
    # the rows below matched (seen). Leader epoch 3 wrote 0..1, epoch 5 from 2 on; the sink's rows 0..5 hold
    # their records, its rows 7..13 keys of no record there: other records, not a rewrite (the rows before
    # them already matched records of epoch 5).
    keys = [f"k{o}" for o in range(6)] + [f"n{o}" for o in range(6, 16)]
    log = log_of(keys, [3] * 2 + [5] * 14)
    rows = [(o, f"k{o}") for o in range(6)] + [(o, f"k{o}") for o in range(7, 14)]
    whole = check(log, rows)
    assert found(whole) == [(7, 13, 7, "different_record", None, 5, None, None)]
    below = [(o, k) for o, k in rows if o < 12]
    cut = cut_at(log, np.array([o for o, _ in below], np.int64), hash_bytes(k.encode() for _, k in below),
                 None)
    assert cut == 6  # after row 5, the last row holding its own record's key and no neighbour's
    seen = max(e for e, o in whole.matched.items() if o < cut)
    after = [(o, k) for o, k in rows if o >= cut]
    offsets, names = np.array([o for o, _ in after], np.int64), [k for _, k in after]

    def part(**kw):
        return found(check_partition(log, offsets, hash_bytes(k.encode() for k in names), names, **kw))

    assert part(seen=seen, judged=True) == found(whole)
    # without what the rows below saw, the same rows would read as a rewrite after a leader change
    assert part(judged=True)[0][3] == "rewritten_after_leader_change"


def test_a_shift_is_one_finding_and_its_rows_move_to_the_offsets_they_hold() -> None:
    keys = [f"k{o}" for o in range(10)]
    log = log_of(keys, [0] * 10, control={4})
    rows = [(o + 1, keys[o]) for o in range(10) if o != 4]  # offset+1, the marker's row never written
    result = check(log, rows)
    assert found(result) == [(1, 10, 9, "shifted_coordinates", 1, None, None, None)]
    assert result.findings[0].detail == "the sink stores offset+1: each row holds the record at its offset -1"
    assert [(s.first, s.last, s.shift) for s in result.shifts] == [(1, 10, 1)]
    islands = [(1, 4, 1), (6, 10, 1), (12, 12, 2)]
    assert shifted_islands(islands, result.shifts) == [(0, 3, 1), (5, 9, 1), (12, 12, 2)]


def kinds_log() -> PartitionLog:
    """0..4 committed, 5 COMMIT, 6..8 aborted, 9 ABORT, 10..12 committed, 13..14 open (HW 15)."""
    kinds = [Kind.DATA] * 5 + [Kind.MARKER] + [Kind.ABORTED] * 3 + [Kind.MARKER] + [Kind.DATA] * 3 \
        + [Kind.OPEN] * 2
    log = log_of([f"k{o}" for o in range(15)], [0] * 15, control={5, 9})
    return replace(log, ranges=merge_ranges(OffsetRange(o, o, k) for o, k in enumerate(kinds)))


def audited(log: PartitionLog, rows: list[tuple[int, str]]) -> list[tuple]:
    """Every finding of the partition, as an audit task makes them (auditors.contentcheck.with_content):
    the offsets' rule, then the content check, and the partition reconciled again where the check says
    which rows hold what (auditors.contentcheck.reconciled)."""
    from auditors.contentcheck import reconciled
    from auditors.plan import WorkItem
    from eosctl.rules.reconcile import islands_from_counts
    from eosctl.rules.rule import audit_partition

    counts: dict[int, int] = {}
    for o, _ in rows:
        counts[o] = counts.get(o, 0) + 1
    islands = list(islands_from_counts(sorted(counts.items())))
    _, findings = audit_partition("t", 0, log, islands)
    result = check(log, rows)
    again = reconciled(WorkItem("t", 0, True), log, islands, result.shifts, result.findings, None)
    if again is not None:
        findings = again[1]
    return sorted((f.kind, f.first_offset, f.last_offset, f.count, f.cause.rule if f.cause else None)
                  for f in [*findings, *result.findings])


def test_a_row_where_no_committed_record_is_gets_that_finding_only() -> None:
    """Issue 49: a row at a marker's offset was phantom_marker and content_mismatch ("the record at this
    offset has another key"); there is no data record there to compare with. So at a marker, aborted or
    open data, and beyond the high watermark, the row is that phantom only."""
    log = kinds_log()
    clean = [(o, f"k{o}") for o in (*range(5), 10, 11, 12)]
    rows = clean + [(5, "zz"), (7, "k7"), (8, "yy"), (13, "xx"), (20, "ww")]
    assert audited(log, rows) == [("phantom_aborted", 7, 8, 2, None), ("phantom_beyond_hw", 20, 20, 1, None),
                                  ("phantom_marker", 5, 5, 1, None),
                                  ("phantom_uncommitted", 13, 13, 1, None)]
    assert check(log, rows).findings == []
    # a lone row at a marker holding the record before it: a phantom, not a one-row shift
    assert audited(log, [*clean, (5, "k4")]) == [("phantom_marker", 5, 5, 1, None)]
    # a row at a committed record's offset with another key still is a content finding, told in a sentence
    swapped = [(o, "k7" if o == 11 else k) for o, k in clean]
    assert audited(log, swapped) == [("content_mismatch", 11, 11, 1, "different_record")]
    assert check(log, swapped).findings[0].cause.summary == (
        "The sink's row at t[0] offset 11 (the row at 11 has key 'k7') holds a key that is neither the key "
        "of the record at its offset nor of its neighbours': the writer stored a row with coordinates that "
        "are not its own.")


def test_an_offset_with_a_row_of_another_record_is_that_content_finding_not_also_a_duplicate() -> None:
    """Re-used offsets read again: the sink holds at 10 the row of the record the log had there before
    (another key) and the row of the record there now; its record is held once, and the other row is the
    content finding. Two copies of its own record at 11 are still a duplicate."""
    log = kinds_log()
    clean = [(o, f"k{o}") for o in (*range(5), 10, 11, 12)]
    assert audited(log, [*clean, (10, "old10")]) == [("content_mismatch", 10, 10, 1, "different_record")]
    assert audited(log, [*clean, (10, "old10"), (11, "k11")]) == [
        ("content_mismatch", 10, 10, 1, "different_record"), ("duplicate", 11, 11, 1, None)]
    assert once_at([(0, 4, 1), (10, 12, 2)], [(11, 11)]) == [(0, 4, 1), (10, 10, 2), (11, 11, 1), (12, 12, 2)]
    assert once_at([(0, 4, 1), (10, 12, 1)], [(11, 11)]) is None


def test_a_shift_run_that_ends_on_a_marker_is_the_shift_only() -> None:
    """Rows 1..5 hold records 0..4 (stored offset+1, the last one at the COMMIT marker 5): one
    shifted_coordinates finding, and reconciled where they belong, no gap at 0 and no phantom_marker."""
    log = kinds_log()
    rows = [(o + 1, f"k{o}") for o in range(5)] + [(o, f"k{o}") for o in (10, 11, 12)]
    assert audited(log, rows) == [("content_mismatch", 1, 5, 5, "shifted_coordinates")]
    assert check(log, rows).findings[0].cause.summary.startswith(
        "The sink's 5 rows at t[0] offsets 1..5 hold the records at 0..4 (the row at 1 has key 'k0', the key "
        "of the record at 0): its writer stores")


def test_rows_moved_onto_held_offsets_add_up() -> None:
    from eosctl.rules.content import Shift

    assert shifted_islands([(0, 5, 1)], [Shift(3, 5, -1)]) == [(0, 2, 1), (4, 6, 1)]
    assert shifted_islands([(0, 5, 1)], [Shift(3, 5, 1)]) == [(0, 1, 1), (2, 2, 2), (3, 4, 1)]


def test_neighbours_swapped_name_their_shifts_and_rows_far_apart_do_not() -> None:
    keys = [f"k{o}" for o in range(20)]
    log = log_of(keys, [0] * 20)
    rows = list(enumerate(keys))
    rows[3], rows[4] = (3, keys[4]), (4, keys[3])
    rows[10], rows[18] = (10, keys[18]), (18, keys[10])
    assert found(check(log, rows)) == [(3, 3, 1, "shifted_coordinates", -1, None, None, None),
                                      (4, 4, 1, "shifted_coordinates", 1, None, None, None),
                                      (10, 10, 1, "different_record", None, 0, None, None),
                                      (18, 18, 1, "different_record", None, 0, None, None)]
    assert found(check(log, list(enumerate(keys)))) == []


def test_a_key_column_that_is_not_the_records_key_is_not_judged() -> None:
    """A sink whose key column holds a business key from the value: no row matches any record near it."""
    log = log_of([f"customer-{o % 3}" for o in range(10)], [0] * 10)
    result = check(log, [(o, f"order-{o}") for o in range(10)])
    assert (found(result), result.comparable) == ([], False)
    # one row that matches is enough to judge the others
    result = check(log, [(0, "customer-0")] + [(o, f"order-{o}") for o in range(1, 10)])
    assert result.comparable and found(result) == [(1, 9, 9, "different_record", None, 0, None, None)]


def test_content_check_without_a_key_column_is_one_line_and_exit_2(tmp_path) -> None:
    import duckdb
    from click.testing import CliRunner

    from eosctl.cli import main

    sink = tmp_path / "s.duckdb"
    duckdb.connect(str(sink)).close()
    r = CliRunner().invoke(main, ["audit", "--bootstrap", "127.0.0.1:1", "--topic", "t", "--sink-duckdb",
                                  str(sink), "--content-check", "--engine", "local"])
    assert r.exit_code == 2
    assert "--content-check compares each row's key with its record's: name the key column (--key-column, " \
           "or key_column in the config's sink)" in " ".join(r.stderr.split())
    assert "Traceback" not in r.stderr


def test_a_row_with_its_records_key_but_another_value() -> None:
    """With a value column: rows whose key is their record's but whose value is not are content findings
    of their own (consecutive rows one finding); a column that matches no row's value is not judged."""
    keys = [f"k{o}" for o in range(10)]
    log = log_of(keys, [0] * 10)
    vals = [f"v{o}".encode() for o in range(10)]
    log.record_keys.__dict__["values"] = hash_bytes(vals)  # the frozen dataclass, as a scan would fill it
    rows = [(o, f"k{o}") for o in range(10)]
    sink = list(vals)
    sink[3], sink[7], sink[8] = b"other", b"x", b"y"
    offsets = np.array([o for o, _ in rows], np.int64)
    result = check_partition(log, offsets, hash_bytes(k.encode() for _, k in rows), [k for _, k in rows],
                             values=hash_bytes(sink), value_name="value column 'payload'")
    assert found(result) == [(3, 3, 1, "different_value", None, 0, None, None),
                             (7, 8, 2, "different_value", None, 0, None, None)]
    assert result.findings[0].detail == "the record at this offset has this key but another value"
    assert "row at 3 has key 'k3'" in result.findings[0].cause.summary
    assert "value column 'payload' differs" in result.findings[0].cause.summary
    # the same values: nothing; values serialized otherwise (none matches): not judged
    same = check_partition(log, offsets, hash_bytes(k.encode() for _, k in rows), values=hash_bytes(vals))
    assert (same.findings, same.values_comparable) == ([], True)
    other = check_partition(log, offsets, hash_bytes(k.encode() for _, k in rows),
                            values=hash_bytes(v + b"!" for v in vals))
    assert (other.findings, other.values_comparable) == ([], False)


def test_a_readers_key_rows_split_per_partition_keep_every_row():
    """A sink read through committed_keys_in (PostgreSQL): its rows of several partitions in one batch are
    split per partition (sorted once, no per-row Python), every row in its partition, their order kept."""
    import pyarrow as pa

    from auditors.contentcheck import _by_partition

    batch = pa.record_batch([pa.array(["k1", "k2", "k3", "k4", "k5"]), pa.array(["b", "a", "b", "a", "b"]),
                             pa.array([0, 3, 0, 3, 1], pa.int32()), pa.array([5, 6, 7, 8, 9], pa.int64())],
                            names=["key", "topic", "partition", "offset"])
    split = {tp: part.column(0).to_pylist() for tp, part in _by_partition(batch)}
    assert split == {("b", 0): ["k1", "k3"], ("a", 3): ["k2", "k4"], ("b", 1): ["k5"]}
