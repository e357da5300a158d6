"""The live model equals a fresh reading on the sandbox broker too: random traffic written by real
transactional producers (commits, aborts, a transaction left open and ended later, fencing by a new
instance), DeleteRecords, the topic deleted and created again, sink rows added, replayed and deleted, group
commits; after every refresh the model's logs, ledger and lag equal those of a fresh `capture()`."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import duckdb
import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from eosctl.base.errors import BrokerError
from eosctl.cluster.clients import Admins, kafka_admin
from eosctl.cluster.wire import WireClient
from eosctl.config.model import Cluster, Pipeline, Sink
from eosctl.config.target import Target
from eosctl.inspection.capture import capture
from eosctl.inspection.live import LiveModel
from tests.kafka.test_live_model import reading
from tests.support.helpers import wait_until

pytestmark = pytest.mark.integration
TIMEOUT = 10
GROUP_SUFFIX = ".sink"

part = st.sampled_from((0, 1))
OPS = st.one_of(
    st.tuples(st.just("commit"), part, st.integers(1, 3)),
    st.tuples(st.just("abort"), part, st.integers(1, 3)),
    st.tuples(st.just("open"), part, st.integers(1, 2)),
    st.tuples(st.just("close"), st.booleans()),
    st.tuples(st.just("fence")),
    st.tuples(st.just("retention"), part, st.integers(1, 3)),
    st.tuples(st.just("recreate")),
    st.tuples(st.just("sink_add"), part, st.integers(1, 5)),
    st.tuples(st.just("sink_replay"), part, st.integers(0, 10**6)),
    st.tuples(st.just("sink_delete"), part, st.integers(0, 10**6)),
    st.tuples(st.just("group"), part, st.integers(0, 10**6)),
)


class Sandbox:
    """One topic of the sandbox with two transactional producers ("a" commits and aborts at once, "b"
    keeps a transaction open), a committed group and a DuckDB sink."""

    def __init__(self, bootstrap: str, sink: Path) -> None:
        self.bootstrap, self.sink = bootstrap, str(sink)
        self.topic = "live-" + uuid.uuid4().hex[:10]
        self.group = self.topic + GROUP_SUFFIX
        self.admin = AdminClient({"bootstrap.servers": bootstrap})
        self.wire = WireClient(bootstrap)
        self.txn_admin = kafka_admin(Cluster("c", bootstrap))
        self.stored: dict[int, int] = {}
        self.committed: dict[int, int] = {}
        self.open = False
        with duckdb.connect(self.sink) as con:
            con.execute("create table sink (src_topic varchar, src_partition int, src_offset bigint)")
            con.execute("create table offsets (topic varchar, partition int, next_offset bigint)")
        self.create()

    def create(self) -> None:
        self.admin.create_topics([NewTopic(self.topic, 2, 1)])[self.topic].result(TIMEOUT)
        deadline = time.monotonic() + TIMEOUT
        while True:  # the metadata of a topic created a moment ago may lag
            try:
                self.wire.metadata([self.topic])
                break
            except BrokerError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        self.producers = {name: self.producer(name) for name in ("a", "b")}
        self.open = False
        self._commit(0, 1)

    def producer(self, name: str) -> Producer:
        p = Producer({"bootstrap.servers": self.bootstrap, "transactional.id": f"{self.topic}.{name}",
                      "linger.ms": 0})
        p.init_transactions(TIMEOUT)
        return p

    def apply(self, op: tuple) -> None:
        kind, *args = op
        getattr(self, "_" + kind)(*args)

    def _write(self, name: str, partition: int, n: int) -> Producer:
        p = self.producers[name]
        p.begin_transaction()
        for i in range(n):
            p.produce(self.topic, value=b"v%d" % i, partition=partition)
        p.flush(TIMEOUT)
        return p

    def _commit(self, partition: int, n: int) -> None:
        self._write("a", partition, n).commit_transaction(TIMEOUT)
        self.settle("a")

    def _abort(self, partition: int, n: int) -> None:
        self._write("a", partition, n).abort_transaction(TIMEOUT)
        self.settle("a")

    def settle(self, name: str) -> None:
        """Until the coordinator has written the markers of the transaction that just ended: EndTxn answers
        once PrepareCommit/PrepareAbort is in the transaction log, and the markers reach the partitions
        after (TransactionCoordinator.endTransaction, then the marker channel), so a reading taken at once
        and one taken a moment later could differ (this test failed ~1 run in 3 on that)."""
        tid = f"{self.topic}.{name}"

        def state() -> str:
            desc = self.txn_admin.describe_transactions([tid])[tid]
            return str(getattr(desc.state, "value", desc.state))

        wait_until(f"the markers of {tid}'s last transaction", lambda: not state().startswith("Prepare"),
                   TIMEOUT)

    def _open(self, partition: int, n: int) -> None:
        if not self.open:
            self._write("b", partition, n)
            self.open = True

    def _close(self, commit: bool) -> None:
        if self.open:
            p = self.producers["b"]
            p.commit_transaction(TIMEOUT) if commit else p.abort_transaction(TIMEOUT)
            self.settle("b")
            self.open = False

    def _fence(self) -> None:
        """A new instance of "b" takes over: the open transaction (if any) is aborted by the broker."""
        self.producers["b"] = self.producer("b")
        self.settle("b")
        self.open = False

    def hw(self, partition: int) -> tuple[int, int]:
        o = self.wire.offsets([(self.topic, partition)])[(self.topic, partition)]
        return o.log_start, o.high_watermark

    def _retention(self, partition: int, k: int) -> None:
        start, hw = self.hw(partition)
        to = min(hw, start + k)
        self.admin.delete_records([TopicPartition(self.topic, partition, to)])[
            TopicPartition(self.topic, partition, to)].result(TIMEOUT)

    def _recreate(self) -> None:
        self.admin.delete_topics([self.topic])[self.topic].result(TIMEOUT)
        deadline = time.monotonic() + TIMEOUT
        while True:
            try:
                self.create()
                return
            except Exception:  # the deletion may take a moment to settle
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def _sink(self, sql: str, *params: object) -> None:
        with duckdb.connect(self.sink) as con:
            con.execute(sql, params)

    def _sink_add(self, partition: int, n: int) -> None:
        start, hw = self.hw(partition)
        lo = max(self.stored.get(partition, 0), start)
        hi = min(lo + n, hw)
        if hi > lo:
            self._sink("insert into sink select ?, ?, range from range(?, ?)", self.topic, partition, lo, hi)
            self._sink("delete from offsets where partition = ?", partition)
            self._sink("insert into offsets values (?, ?, ?)", self.topic, partition, hi)
            self.stored[partition] = hi

    def _sink_replay(self, partition: int, seed: int) -> None:
        if self.stored.get(partition):
            first = seed % self.stored[partition]
            self._sink("insert into sink select ?, ?, range from range(?, ?)", self.topic, partition, first,
                       min(self.stored[partition], first + 2))

    def _sink_delete(self, partition: int, seed: int) -> None:
        if self.stored.get(partition):
            self._sink("delete from sink where src_partition = ? and src_offset = ?", partition,
                       seed % self.stored[partition])

    def _group(self, partition: int, seed: int) -> None:
        _, hw = self.hw(partition)
        self.committed[partition] = seed % (hw + 1)
        request = ConsumerGroupTopicPartitions(self.group, [TopicPartition(self.topic, p, o)
                                                            for p, o in self.committed.items()])
        self.admin.alter_consumer_group_offsets([request])[self.group].result(TIMEOUT)

    def close(self) -> None:
        self.wire.close()
        self.txn_admin.close()


@settings(max_examples=2, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(ops=st.lists(OPS, min_size=1, max_size=6))
@example(ops=[("open", 0, 2), ("commit", 0, 2), ("group", 0, 2), ("sink_add", 0, 3), ("fence",),
              ("retention", 0, 2), ("sink_replay", 0, 1), ("recreate",), ("commit", 1, 1)])
def test_every_refresh_equals_a_fresh_capture_on_the_sandbox(bootstrap, tmp_path_factory, ops) -> None:
    world = Sandbox(bootstrap, tmp_path_factory.mktemp("live") / "sink.duckdb")
    try:
        sink = Sink(duckdb=world.sink, offsets_table="offsets")
        pipe = Pipeline("p", "c", (world.topic,), world.group, sink=sink)
        target = Target(Cluster("c", bootstrap), pipe, None, (world.topic,), world.group)
        with LiveModel(target, sink_every_s=0) as model, Admins(target.cluster) as admins:
            model.refresh()
            for op in ops:
                world.apply(op)
                live = reading(model.refresh())
                fresh = reading(capture(target, admins=admins))
                assert live == fresh, f"after {op} in {ops}"
    finally:
        world.close()
