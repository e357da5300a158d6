"""ListTransactions' server-side filters on Apache Kafka 4.4 (issue 52): the pipeline's prefix goes to the
brokers as v2's TransactionalIdPattern (KIP-1152) and the age as v1's DurationFilter (KIP-994), so only
the matching ids are described. Five ids are made with InitProducerId (Empty, nothing written); other
tests' ids on the session broker are never described."""

from __future__ import annotations

import time
import uuid

import pytest

from tests.support import txnguard

pytestmark = pytest.mark.integration


def init_ids(bootstrap: str, ids: list[str]) -> None:
    from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest
    from kafka.protocol.producer.transaction import InitProducerIdRequest

    from eosctl.cluster.wire import WireClient

    with WireClient(bootstrap, timeout_ms=30_000) as client:
        pending, deadline = list(ids), time.monotonic() + 60
        while pending:
            found = client.request_all([(client.any_node(), FindCoordinatorRequest(key=i, key_type=1,
                                                                                   max_version=3))
                                        for i in pending])
            ready = [(i, f.node_id) for i, f in zip(pending, found, strict=True) if not f.error_code]
            answers = client.request_all([(node, InitProducerIdRequest(
                transactional_id=i, transaction_timeout_ms=60_000, max_version=4)) for i, node in ready])
            done = {i for (i, _), a in zip(ready, answers, strict=True) if not a.error_code}
            pending = [i for i in pending if i not in done]
            assert not pending or time.monotonic() < deadline, f"InitProducerId kept failing for {pending}"
            if pending:
                time.sleep(0.3)


def test_the_prefix_and_the_age_are_filtered_by_the_broker(apache_kafka) -> None:
    from eosctl.cluster.clients import kafka_admin
    from eosctl.config.model import Cluster
    from eosctl.txn.transactions import Listing, list_transactions

    bs = apache_kafka.bootstrap
    mine = txnguard.register("l" + uuid.uuid4().hex[:10])
    other = txnguard.register("l" + uuid.uuid4().hex[:10])
    init_ids(bs, [f"{mine}.stage-{i}" for i in range(3)] + [f"{other}.stage-{i}" for i in range(2)])
    admin = kafka_admin(Cluster("k", bs))
    try:
        listing = Listing()
        infos = list_transactions(admin, prefixes=[f"{mine}."], listing=listing)
        assert sorted(i.transactional_id for i in infos) == [f"{mine}.stage-{i}" for i in range(3)]
        assert {i.state for i in infos} == {"Empty"}
        assert (listing.server_filters, listing.described) == (("pattern",), 3)

        # A prefix with regex characters means itself: "." is not "any character".
        dotted = Listing()
        assert list_transactions(admin, prefixes=[f"{mine[:-1]}."], listing=dotted) == []
        assert dotted.described == 0

        aged = Listing()
        assert list_transactions(admin, min_age_s=3600, prefixes=[f"{mine}."], listing=aged) == []
        # DurationFilter alone keeps Empty ids (their start is -1): the running states go with it.
        assert (aged.server_filters, aged.described) == (("state", "duration", "pattern"), 0)
    finally:
        admin.close()
