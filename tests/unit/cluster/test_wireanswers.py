"""What a broker's Fetch answer carries, and the cross-check of ListOffsets against it
(eosctl.cluster.wireanswers): a broker that disagrees with itself is named, and its Fetch answer is used."""

from __future__ import annotations

from eosctl.cluster.wireanswers import FetchResult, Offsets, checked, served

TP = ("t", 0)


def fetch(**kw) -> FetchResult:
    fields = dict(topic="t", partition=0, fetch_offset=0, error_code=0, high_watermark=10,
                  last_stable_offset=8, log_start_offset=2, aborted=(), records=b"")
    return FetchResult(**{**fields, **kw})


def test_a_fetch_answer_serves_its_offsets_unless_it_has_none():
    assert served(fetch()) == (2, 10, 8)
    assert served(fetch(answered=False)) is None  # a throttled fetch left the partition out (KIP-219)
    assert served(fetch(error_code=6)) is None
    assert served(fetch(last_stable_offset=-1)) is None
    assert fetch(error_code=6).error == "NotLeaderForPartitionError"


def test_offsets_that_agree_are_the_fetchs():
    assert checked(TP, Offsets(2, 10, 8), None, (2, 10, 8)) == Offsets(2, 10, 8)
    # Offsets only move on: a Fetch after ListOffsets may show more.
    assert checked(TP, Offsets(2, 10, 8), None, (2, 12, 9)) == Offsets(2, 12, 9)


def test_a_fetch_behind_listoffsets_names_either_answer():
    got = checked(TP, Offsets(2, 10, 8), None, (2, 10, 5))
    assert got.triple == (2, 10, 5) and got.listed == (2, 10, 8)
    assert got.disagreement == (
        "the broker disagrees with itself on t-0: a Fetch shows LSO 5, after ListOffsets answered 8: one of "
        "its ListOffsets or Fetch answers is wrong (these offsets never go back); a read_committed consumer "
        "is served the Fetch's")


def test_listoffsets_behind_an_earlier_fetch_is_the_wrong_one():
    got = checked(TP, Offsets(2, 10, 8), Offsets(2, 10, 8), (2, 12, 8))
    assert got.disagreement == (
        "the broker disagrees with itself on t-0: ListOffsets answers high watermark 10, but a Fetch already "
        "showed 12: ListOffsets is wrong (these offsets never go back); a read_committed consumer is served "
        "the Fetch's")
