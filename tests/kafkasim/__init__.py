"""A scripted Kafka-protocol broker for tests: what Apache Kafka answers, where the sandbox can't show it.

Use the ``kafka_sim`` fixture (tests/kafkasim/fixtures.py, registered in tests/conftest.py): a started
two-node KafkaSim, closed at teardown; the test fails if the broker could not answer a request.

Declare the log (real v2 batches; offsets are assigned in order)::

    p = kafka_sim.partition("orders", 0, leader=0)   # topic + partition, created on first use
    p.data(5)                                        # non-transactional batch of 5 records
    p.data(3, producer_id=9, epoch=0)                # idempotent batch, sequences continue per producer
    p.txn(7, epoch=0, records=2); p.commit(7, 0)     # transactional data, then its COMMIT marker
    p.txn(8, 1, 2); p.abort(8, 1)                    # ... ABORT marker (markers take any epoch)
    p.skip(3)                                        # compaction removed whole batches here
    p.compacted([12, 14], last_offset=16, delete_horizon=True, timestamp=T)  # cleaner-rewritten batch
    p.delete_before(10)                              # retention moved the log start
    kafka_sim.group("billing", {("orders", 0): 4}, state="Stable")          # OffsetFetch/ListGroups
    kafka_sim.transaction("tx-1", producer_id=7, state="Ongoing", start_ms=..., partitions=[("orders", 0)])
    p.producer_rows = [ProducerRow(...)]             # DescribeProducers override (default: from batches)
    kafka_sim.move_leader("orders", 0, node=1)        # old leader answers NOT_LEADER_OR_FOLLOWER

Inject per request (``kafka_sim.inject(api, topic, partition, ...)``, api one of fetch, list_offsets,
metadata, describe_producers; offset_fetch, find_coordinator, list_groups take no topic): ``error=CODE``,
``no_records=True`` (no records, no error: tiered storage throttled), ``drop=True`` (partition left out),
``throttle_ms=N`` (KIP-219 empty answer), ``before=fn`` (change the state first: retention, leader
moves), ``after=N`` (let N matching requests through first), ``times=N`` (None: for ever),
``hang_up=True`` (the connection closes halfway through the answer; the group APIs).
``kafka_sim.move_leader(topic, p, node=-1)``: the partition has no leader. Faults apply in the order
injected. Point clients at ``kafka_sim.bootstrap``; ``kafka_sim.requests``, ``.fetches``,
``.fetch_times`` and ``.list_offsets`` record what was asked.

Misbehaviours of real brokers (issue 19), each naming where it was measured:

    kafka_sim.inject("list_offsets", "t", 0, offset=tansu_list_offsets, times=None)  # ListOffsets vs Fetch
    kafka_sim.inject("fetch", empty_without_wait=True, probe=None, times=None)  # nothing at max_wait_ms=0
    p.txn(7, 0, 5, timestamp=now - 2 * 3_600_000)      # CreateTime set by the client, hours in the past
    p.log_append_time = True; p.data(3, append_time=T)  # a LogAppendTime topic: the broker's clock

eosctl cross-checks ListOffsets with a 1-byte Fetch at the high watermark: fetch faults leave that probe
alone unless ``probe=True`` (only it) or ``probe=None`` (both); ``kafka_sim.probes`` records them apart.
"""

from tests.kafkasim.log import ProducerRow, SimPartition
from tests.kafkasim.server import (
    COORDINATOR_LOAD_IN_PROGRESS,
    COORDINATOR_NOT_AVAILABLE,
    FENCED_LEADER_EPOCH,
    KAFKA_STORAGE_ERROR,
    NOT_COORDINATOR,
    NOT_LEADER_OR_FOLLOWER,
    OFFSET_OUT_OF_RANGE,
    TOPIC_AUTHORIZATION_FAILED,
    UNKNOWN_LEADER_EPOCH,
    UNKNOWN_TOPIC_OR_PARTITION,
    Fault,
    KafkaSim,
    SimGroup,
    SimTransaction,
    tansu_list_offsets,
)

__all__ = [
    "COORDINATOR_LOAD_IN_PROGRESS", "COORDINATOR_NOT_AVAILABLE", "NOT_COORDINATOR",
    "FENCED_LEADER_EPOCH", "KAFKA_STORAGE_ERROR", "NOT_LEADER_OR_FOLLOWER", "OFFSET_OUT_OF_RANGE",
    "TOPIC_AUTHORIZATION_FAILED", "UNKNOWN_LEADER_EPOCH", "UNKNOWN_TOPIC_OR_PARTITION", "Fault", "KafkaSim",
    "ProducerRow", "SimGroup", "SimPartition", "SimTransaction", "tansu_list_offsets",
]
