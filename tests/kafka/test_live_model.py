"""The live model is always equal to a fresh reading: random traffic on the scripted broker (commits,
aborts, open transactions, fencing, retention, compaction below the scanned point, holes, a topic deleted
and created again, sink rows added, replayed and deleted, group commits), and after every refresh the
model's logs, ledger and lag equal those of a fresh `capture()`."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import duckdb
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from eosctl.cluster.clients import Admins
from eosctl.config.model import Cluster, Pipeline, Sink
from eosctl.config.target import Target
from eosctl.inspection.capture import Capture, capture
from eosctl.inspection.live import LiveModel
from tests.kafkasim import KafkaSim

TOPIC, GROUP = "t", "g"
PARTITIONS = (0, 1)
PIDS = (7, 8)

part = st.sampled_from(PARTITIONS)
pid = st.sampled_from(PIDS)
OPS = st.one_of(
    st.tuples(st.just("data"), part, st.integers(1, 4)),
    st.tuples(st.just("txn"), part, pid, st.integers(1, 3)),
    st.tuples(st.just("commit"), part, pid),
    st.tuples(st.just("abort"), part, pid),
    st.tuples(st.just("fence"), part, pid),
    st.tuples(st.just("retention"), part, st.integers(1, 4)),
    st.tuples(st.just("hole"), part, st.integers(1, 3)),
    st.tuples(st.just("compact"), part, st.integers(0, 10**6)),
    st.tuples(st.just("recreate")),
    st.tuples(st.just("sink_add"), part, st.integers(1, 6)),
    st.tuples(st.just("sink_replay"), part, st.integers(0, 10**6)),
    st.tuples(st.just("sink_delete"), part, st.integers(0, 10**6)),
    st.tuples(st.just("group"), part, st.integers(0, 10**6)),
    st.tuples(st.just("refresh")),
)


class World:
    """The scripted broker and a DuckDB sink, driven by one op at a time."""

    def __init__(self, sim: KafkaSim, sink: Path) -> None:
        self.sim, self.sink = sim, str(sink)
        self.epochs: dict[tuple[int, int], int] = {}
        self.open: set[tuple[int, int]] = set()
        self.stored: dict[int, int] = {}
        self.committed: dict[tuple[str, int], int] = {}
        with duckdb.connect(self.sink) as con:
            con.execute("create table sink (src_topic varchar, src_partition int, src_offset bigint)")
            con.execute("create table offsets (topic varchar, partition int, next_offset bigint)")
        self.create()

    def create(self) -> None:
        for p in PARTITIONS:
            self.sim.partition(TOPIC, p, leader=p % 2).data(2)

    def apply(self, op: tuple) -> None:
        kind, *args = op
        getattr(self, "_" + kind)(*args)

    def p(self, partition: int):
        return self.sim.partition(TOPIC, partition, leader=partition % 2)

    def _data(self, partition: int, n: int) -> None:
        self.p(partition).data(n)

    def _txn(self, partition: int, pid: int, n: int) -> None:
        self.p(partition).txn(pid, self.epochs.get((partition, pid), 0), n)
        self.open.add((partition, pid))

    def _end(self, partition: int, pid: int, kind: str, bump: int = 0) -> None:
        epoch = self.epochs.get((partition, pid), 0) + bump
        self.p(partition).marker(kind, pid, epoch)
        self.epochs[(partition, pid)] = epoch
        self.open.discard((partition, pid))

    def _commit(self, partition: int, pid: int) -> None:
        if (partition, pid) in self.open:
            self._end(partition, pid, "COMMIT")

    def _abort(self, partition: int, pid: int) -> None:
        if (partition, pid) in self.open:
            self._end(partition, pid, "ABORT")

    def _fence(self, partition: int, pid: int) -> None:
        """A new instance took over: the coordinator's ABORT at the next epoch (Kafka v1 fencing)."""
        self._end(partition, pid, "ABORT", bump=1)

    def _retention(self, partition: int, k: int) -> None:
        p = self.p(partition)
        p.delete_before(min(p.high_watermark, p.log_start + k))

    def _hole(self, partition: int, k: int) -> None:
        p = self.p(partition)
        p.skip(k)
        p.data(1)

    def _compact(self, partition: int, seed: int) -> None:
        """The cleaner removes records below the LSO (never past the first unstable offset)."""
        p = self.p(partition)
        below = [o for b in p.batches if not b.control and not b.transactional for o in b.offsets
                 if o < p.last_stable]
        if below:
            p.compact({below[seed % len(below)], below[(seed // 7) % len(below)]})

    def _recreate(self) -> None:
        self.sim.delete_topic(TOPIC)
        self.epochs.clear()
        self.open.clear()
        self.create()

    def _sink(self, sql: str, *params: object) -> None:
        with duckdb.connect(self.sink) as con:
            con.execute(sql, params)

    def _sink_add(self, partition: int, n: int) -> None:
        p = self.p(partition)
        start = max(self.stored.get(partition, 0), p.log_start)
        end = min(start + n, p.high_watermark)
        if end <= start:
            return
        self._sink("insert into sink select ?, ?, range from range(?, ?)", TOPIC, partition, start, end)
        self._sink("delete from offsets where partition = ?", partition)
        self._sink("insert into offsets values (?, ?, ?)", TOPIC, partition, end)
        self.stored[partition] = end

    def _sink_replay(self, partition: int, seed: int) -> None:
        stored = self.stored.get(partition, 0)
        if stored:
            first = seed % stored
            self._sink("insert into sink select ?, ?, range from range(?, ?)", TOPIC, partition, first,
                       min(stored, first + 2))

    def _sink_delete(self, partition: int, seed: int) -> None:
        stored = self.stored.get(partition, 0)
        if stored:
            self._sink("delete from sink where src_partition = ? and src_offset = ?", partition,
                       seed % stored)

    def _group(self, partition: int, seed: int) -> None:
        hw = self.p(partition).high_watermark
        self.committed[(TOPIC, partition)] = seed % (hw + 1)
        self.sim.group(GROUP, self.committed, state="Empty")

    def _refresh(self) -> None:
        pass  # the test refreshes after this op


def reading(cap: Capture) -> dict:
    """What must be identical: logs, ledger and lag (their times aside), and each section's status."""
    lag = None if cap.lag is None else [dataclasses.astuple(p) for p in cap.lag.partitions]
    return {
        "sections": cap.sections,
        "logs": {tp: lg.to_dict() for tp, lg in sorted(cap.logs.items())},
        "ledger": None if cap.ledger is None else cap.ledger.to_dict(),
        "lag": lag,
    }


# Each detector of the model, in at least one example whatever hypothesis draws.
COMPACTED_BELOW = [("data", 0, 4), ("data", 0, 3), ("refresh",), ("compact", 0, 3)]
RECREATED = [("txn", 0, 7, 2), ("data", 1, 3), ("refresh",), ("recreate",), ("data", 0, 3), ("refresh",)]
OPEN_AT_THE_TAIL = [("txn", 0, 7, 2), ("group", 0, 1), ("refresh",), ("data", 0, 2), ("commit", 0, 7),
                    ("txn", 0, 8, 1), ("refresh",), ("fence", 0, 8), ("txn", 0, 8, 2), ("refresh",)]
RETENTION_AND_SINK = [("sink_add", 0, 3), ("txn", 0, 7, 3), ("refresh",), ("retention", 0, 3),
                      ("sink_replay", 0, 1), ("abort", 0, 7), ("sink_add", 0, 4), ("sink_delete", 0, 2),
                      ("hole", 0, 2), ("refresh",)]


@settings(max_examples=3, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(ops=st.lists(OPS, min_size=1, max_size=16))
@example(ops=COMPACTED_BELOW)
@example(ops=RECREATED)
@example(ops=OPEN_AT_THE_TAIL)
@example(ops=RETENTION_AND_SINK)
def test_every_refresh_equals_a_fresh_capture(tmp_path_factory, ops) -> None:
    sink_path = tmp_path_factory.mktemp("live") / "sink.duckdb"
    with KafkaSim(nodes=2) as sim:
        world = World(sim, sink_path)
        sink = Sink(duckdb=str(sink_path), offsets_table="offsets")
        pipe = Pipeline("p", "c", (TOPIC,), GROUP, sink=sink)
        target = Target(Cluster("c", sim.bootstrap), pipe, None, (TOPIC,), GROUP)
        with LiveModel(target, sink_every_s=0, timeout_ms=3000) as model, \
                Admins(target.cluster, timeout=3) as admins:
            model.refresh()
            for op in [*ops, ("refresh",)]:
                world.apply(op)
                if op[0] in ("refresh", "recreate", "compact", "retention", "sink_delete"):
                    live = reading(model.refresh())
                    fresh = reading(capture(target, timeout_ms=3000, admins=admins))
                    assert live == fresh, f"after {op} in {ops}"
        assert not sim.errors, sim.errors
