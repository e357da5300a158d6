"""Fetch bounds: an answer larger than the client may receive (a broker ignoring size limits, as noida-db
does) is asked again in smaller requests, and the scan's result is the same."""

from __future__ import annotations

import pytest

from eosctl.base.errors import BrokerError
from eosctl.cluster.logscan import scan_partitions
from eosctl.cluster.wire import WireClient
from tests.kafkasim import KafkaSim

TPS = [("t", p) for p in range(8)]


def fill(sim: KafkaSim) -> None:
    for _, p in TPS:
        part = sim.partition("t", p)
        for _ in range(4):
            part.data(10, value_size=300)  # ~3.5 KB a batch, ~14 KB a partition


def test_an_oversized_answer_is_split_until_it_fits(kafka_sim: KafkaSim) -> None:
    fill(kafka_sim)
    with WireClient(kafka_sim.bootstrap) as roomy:
        expected = scan_partitions(roomy, TPS)
    with WireClient(kafka_sim.bootstrap, receive_max_bytes=40_000) as tight:
        logs = scan_partitions(tight, TPS)
        # 8 partitions (~115 KB) do not fit in 40 KB, 2 (~29 KB) do.
        assert tight.max_fetch_partitions == 2
    assert {tp: lg.to_dict() for tp, lg in logs.items()} == {tp: lg.to_dict() for tp, lg in expected.items()}
    assert sum(lg.committed_records for lg in logs.values()) == 8 * 40


def test_one_partition_over_the_limit_is_one_line(kafka_sim: KafkaSim) -> None:
    fill(kafka_sim)
    with WireClient(kafka_sim.bootstrap, receive_max_bytes=10_000) as tight, \
            pytest.raises(BrokerError, match="answered a Fetch of one partition with more than 10,000 bytes "
                                             "although it was asked for 1,048,576; the broker ignores fetch "
                                             "size limits"):
        scan_partitions(tight, TPS[:1])
