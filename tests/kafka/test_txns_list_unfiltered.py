"""`txns list` and the live refresh on a broker without ListTransactions v2 (the scripted broker answers
v0-1, as Apache Kafka 3.8-4.0): the prefix is filtered here, before any id is described, and the states
by the broker (v0's StateFilters). On Apache Kafka 4.4 the broker filters the prefix itself
(tests/integration/test_txns_list_filters.py)."""

from __future__ import annotations

import time

from eosctl.cluster.clients import kafka_admin
from eosctl.config.model import Cluster
from eosctl.txn.transactions import Listing, list_transactions
from tests.kafkasim import KafkaSim


def asked(sim: KafkaSim, api: str) -> list[int]:
    """The versions of each ``api`` request the broker answered."""
    return [version for _, name, version in sim.requests if name == api]


def test_without_v2_the_prefix_is_filtered_before_describing(kafka_sim: KafkaSim) -> None:
    now = int(time.time() * 1000)
    kafka_sim.transaction("app.stage-0", 11, producer_epoch=0, state="Ongoing", timeout_ms=60_000,
                          start_ms=now - 5_000, partitions=[])
    kafka_sim.transaction("app.stage-1", 12, producer_epoch=0, state="Empty", timeout_ms=60_000, start_ms=-1)
    for i in range(5):
        kafka_sim.transaction(f"other-{i}", 20 + i, producer_epoch=0, state="Ongoing", timeout_ms=60_000,
                              start_ms=now - 5_000, partitions=[])
    admin = kafka_admin(Cluster("sim", kafka_sim.bootstrap))
    try:
        listing = Listing()
        infos = list_transactions(admin, prefixes=["app."], listing=listing)
        assert [i.transactional_id for i in infos] == ["app.stage-0", "app.stage-1"]
        assert (listing.server_filters, listing.described) == ((), 2)
        # v1 is the broker's newest: no pattern sent (one request per broker, each v1); one
        # DescribeTransactions, for the 2 ids only.
        assert set(asked(kafka_sim, "ListTransactions")) == {1}
        assert len(asked(kafka_sim, "DescribeTransactions")) == 1

        kafka_sim.requests.clear()
        ongoing = Listing()
        infos = list_transactions(admin, states=["ongoing"], prefixes=["app."], listing=ongoing)
        assert [i.transactional_id for i in infos] == ["app.stage-0"]
        assert (ongoing.server_filters, ongoing.described) == (("state",), 1)
        # The broker filtered the state, sent as Kafka spells it (TransactionState.fromName): stage-1
        # (Empty) was never described.
    finally:
        admin.close()
