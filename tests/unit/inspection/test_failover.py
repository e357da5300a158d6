"""Failover readiness arithmetic (eosctl.inspection.failover) without a broker: MM2's checkpoint records as
Kafka's Checkpoint.java serializes them (key: group, topic, partition; value: version, upstream offset,
downstream offset, metadata; Kafka protocol STRING = int16 length + UTF-8), and the counts of records a
consumer resuming on the replica would process again or never see. Checked against a real consumer on real
MirrorMaker 2 in tests/integration/test_mirror_replica.py."""

from __future__ import annotations

import struct

from eosctl.inspection.failover import counts, decode_checkpoint
from eosctl.sink.replica import Pairing


def kstring(s: str) -> bytes:
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def test_a_checkpoint_record_decodes_as_kafka_writes_it():
    key = kstring("billing") + kstring("src.orders") + struct.pack(">i", 3)
    value = struct.pack(">hqq", 0, 1200, 1187) + kstring("")
    assert decode_checkpoint(key, value) == ("billing", "src.orders", 3, 1200, 1187)


# Source offsets 0..9 committed except 4 (aborted) and 7 (a marker); the replica holds 0..6 and 8 once
# (replica offsets 0..7), then a replay of 5 and 6 (replica offsets 8, 9).
PAIRING = Pairing(offsets=list(range(10)), keys=[None] * 10, sources=[0, 1, 2, 3, 5, 6, 8, 9, 5, 6],
                  out_of_order=[], covered=10, committed=[0, 1, 2, 3, 5, 6, 8, 9], end=10)


def test_a_consumer_resuming_before_the_group_s_position_processes_those_records_again():
    # resume at replica offset 2 (source 2), group committed 5: sources 2, 3 again; the replayed 5, 6 are
    # not below 5.
    assert counts(PAIRING, committed=5, resume=2) == (2, 0)


def test_a_consumer_resuming_past_the_group_s_position_never_sees_what_lies_between():
    # resume at replica offset 6 (source 8) of a group at 5: 5 and 6 come again at replica 8 and 9, none is
    # lost; resume at replica 8 of a group at 3: only 5 and 6 come.
    assert counts(PAIRING, committed=5, resume=6) == (0, 0)
    assert counts(PAIRING, committed=3, resume=8) == (0, 3)  # 3, 8 and 9 have no copy at or past 8


def test_records_past_what_the_replica_holds_are_its_lag_not_misses():
    lagging = Pairing(offsets=[0, 1], keys=[None, None], sources=[0, 1], out_of_order=[], covered=2,
                      committed=[0, 1, 2, 3], end=2)
    assert counts(lagging, committed=1, resume=1) == (0, 0)
