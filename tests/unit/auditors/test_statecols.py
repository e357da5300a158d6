"""auditors.statecols: the columns of a state sink's records are eosctl.rules.stateids' per record, and the
judge in DuckDB gives exactly eosctl.rules.upsert's and aggregate's findings (random logs and tables)."""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, replace

import duckdb
import pytest

from auditors.statecols import (
    History,
    _safe,
    columns_table,
    judge_tables,
    latest_records,
    lazy_values,
    record_table,
    row_table,
    with_values,
)
from eosctl.cluster.model import Kind, OffsetRange, PartitionLog, Transaction
from eosctl.config.model import Aggregate, Sink
from eosctl.rules import aggregate
from eosctl.rules import stateids as ids
from eosctl.rules.upsert import StateRecord, StateRow, judge

T = "orders"


@dataclass
class Msg:
    """What auditors.statecols reads of a confluent-kafka Message."""

    p: int
    o: int
    k: bytes | None
    v: bytes | None
    ts: int = 0

    def topic(self) -> str:
        return T

    def partition(self) -> int:
        return self.p

    def offset(self) -> int:
        return self.o

    def key(self) -> bytes | None:
        return self.k

    def value(self) -> bytes | None:
        return self.v

    def timestamp(self) -> tuple[int, int]:
        return (1, self.ts)


def one_range_log(partition: int, end: int) -> PartitionLog:
    return PartitionLog(T, partition, 0, end, end, 0, end, ranges=[OffsetRange(0, end - 1, Kind.DATA, 7, 0)])


TRICKY = [b'{"v": 1}', b'{"v": 1.0}', b'{"v": 1.5}', b'{"v": -0}', b'{"v": 1e3}', b'{"v": "x"}',
          b'{"v": "{\\"b\\": 1, \\"a\\": 2}"}', b'{"v": {"b": 1, "a": [2]}}', b'{"v": [1, 2]}',
          b'{"v": true}', b'{"v": null}', b'{"w": 1}', b'{"v": NaN}', b'{"v": 123456789012345678901234}',
          b'not json', b'\xff\xfe', b'{"v": "caf\\u00e9"}', '{"v": "café"}'.encode(), b'[1, 2]', b'{"a": 1}',
          b'"text"', b'', b'{"v": {"w": [5, 6]}}', b'{"v": 1, "v2": 2}', None]


def safe(parts: tuple) -> tuple:
    """As the columns keep a text of bytes that are no UTF-8 (auditors.statecols.strings)."""
    return tuple(_safe(p) for p in parts)


@pytest.mark.parametrize("config", [
    {"key_column": "id", "value_fields": (("v", "value.v"),)},
    {"key_column": "id", "value_fields": (("w", "value.v.w.1"), ("x", "value"))},
    {"key_column": "id", "value_column": "val"},
    {"key_column": "id", "value_hash_column": "h"},
    {"key_column": "id"},
    {"key_fields": (("a", "value.v"), ("b", "key"))},
    {"key_column": "id", "value_fields": (("v", "value.v"),), "delete_values": ("value.v=true", "not json")},
])
def test_every_records_columns_are_the_rules_own(config):
    sink = Sink(duckdb="x.duckdb", table="t", mode="upsert", **config)
    keys = [b"k1", b"{\"z\": 1, \"a\": 2}", b"\xff", b"[3]", None, b"plain"]
    msgs = [Msg(0, i, keys[i % len(keys)], v) for i, v in enumerate(TRICKY * 2)]
    table = record_table(sink, {(T, 0): one_range_log(0, len(msgs))}, msgs).to_pylist()
    want = []
    for m in msgs:
        cache: dict = {}
        k = ids.record_key(sink, m.k, m.v, cache)
        if all(part is None for part in k):
            continue
        v = ids.record_value(sink, m.k, m.v, cache)
        want.append((m.o, safe(k), None if v is None else safe(v), ids.is_delete(sink, m.v, {}), m.v is None))
    nk, nv = len(ids.key_columns(sink)), len(ids.value_columns(sink))
    got = [(r["o"], tuple(r[f"k{i}"] for i in range(nk)),
            tuple(r[f"v{i}"] for i in range(nv)) if nv else None, r["d"], r["nv"]) for r in table]
    assert got == want
    if lazy_values(sink):  # the values read later, for some records, are the same texts
        import numpy as np
        import pyarrow as pa

        raw = columns_table(sink, {(T, 0): one_range_log(0, len(msgs))}, pa.array([T] * len(msgs)),
                            np.zeros(len(msgs), np.int32), np.arange(len(msgs)), np.zeros(len(msgs)),
                            pa.array([m.k for m in msgs], pa.binary()),
                            pa.array([m.v for m in msgs], pa.binary()), raw=True)
        assert all(r["v0"] is None for r in raw.to_pylist())
        assert with_values(sink, raw).to_pylist() == table
        assert with_values(sink, raw.slice(3, 7)).to_pylist() == table[3:10]
    if not nv:  # keys only: each value for people as the rule shows it
        assert [r["s"] for r in table] == [None if m.v is None else _safe(ids.shown(m.v)) for m in msgs
                                            if not all(p is None for p in ids.record_key(sink, m.k, m.v))]


def scenario(rng: random.Random, fn: str | None) -> tuple[list[StateRecord], dict, list[StateRow], dict]:
    """A random log of two partitions (committed, aborted and open records, tombstones, updates, a key in
    both partitions) and a table that is partly right."""
    records, logs, bounds = [], {}, {}
    for part in (0, 1):
        n, ranges, txns, o = rng.randint(3, 25), [], [], 0
        for _ in range(n):
            kind = rng.choice([Kind.DATA] * 4 + [Kind.ABORTED, Kind.OPEN])
            status = {Kind.DATA: "committed", Kind.ABORTED: "aborted", Kind.OPEN: "open"}[kind]
            key = f"k{rng.randint(0, 6)}" if rng.random() > 0.1 else "both"
            value = None if rng.random() < 0.15 else str(rng.randint(0, 4))
            pid = 10 + part
            ranges.append(OffsetRange(o, o, kind, pid, 0))
            marker = o + 1 if kind == Kind.ABORTED else None
            if kind == Kind.ABORTED:
                txns.append(Transaction(pid, 0, o, o, "ABORT", marker, 1))
                ranges.append(OffsetRange(o + 1, o + 1, Kind.MARKER, pid, 0))
            records.append(StateRecord(T, part, o, (key,), (value,), value is None, "null" if value is None
                                       else value, status, o * 2 + part, pid, 0, marker))
            o += 2 if kind == Kind.ABORTED else 1
        logs[(T, part)] = PartitionLog(T, part, 0, o, o, 0, o, ranges=ranges, transactions=txns)
        bounds[(T, part)] = rng.randint(0, o)
    rows = []
    for key in {r.key for r in records} | {("stranger",)}:
        if rng.random() < 0.2:
            continue
        mine = [r for r in records if r.key == key and r.value[0] is not None]
        if fn is None:
            value = rng.choice(mine).value[0] if mine and rng.random() < 0.8 else str(rng.randint(0, 9))
            version = rng.choice(mine).offset if mine and rng.random() < 0.2 else None
        else:
            settled = [r for r in records if r.key == key and r.status == "committed"
                       and r.offset < bounds[r.tp]]
            right = aggregate.fold(fn, settled)
            value = aggregate.shown(right) if rng.random() < 0.6 else str(rng.randint(0, 12))
            version = None
        rows.append(StateRow(key, (value,), value, version))
    return records, logs, rows, bounds


@pytest.mark.parametrize(("fn", "latest"), [(None, ""), (None, "latest"), (None, "lazy"), ("count", ""),
                                           ("sum", ""), ("min", ""), ("max", "")])
def test_the_judge_in_duckdb_gives_the_rules_findings(fn, latest):
    """With ``latest``, the per-key pass reads only latest_records (about one row a key and partition);
    ``lazy``, the records' values are read for those and the keys judged only: the same findings and
    counts as from every record."""
    rng = random.Random(51)
    base = Sink(duckdb="x.duckdb", table="t", key_column="id")
    if fn is None:
        sink = replace(base, mode="upsert", value_fields=(("v", "value"),), version_column="ver")
    else:
        agg = Aggregate(fn, "n", None if fn == "count" else "value")
        sink = replace(base, mode="aggregate", aggregate=agg)
    shrunk = 0
    for _ in range(20):
        records, logs, rows, bounds = scenario(rng, fn)
        if fn is None:
            want = judge(records, rows, bounds, shown_key=lambda k: k[0], topic=T)
        else:
            want = aggregate.judge(records, rows, bounds, fn, field=sink.aggregate.field,
                                   shown_key=lambda k: k[0], topic=T)
        msgs = [Msg(r.partition, r.offset, r.key[0].encode(), None if r.value[0] is None
                    else r.value[0].encode(), r.timestamp) for r in records]
        con = duckdb.connect()
        recs = record_table(sink, logs, msgs)
        if latest == "lazy":
            import numpy as np
            import pyarrow as pa

            recs = pa.concat_tables([columns_table(
                sink, {tp: logs[tp]}, pa.array([T] * len(mine)), np.full(len(mine), tp[1], np.int32),
                np.array([m.o for m in mine], np.int64), np.array([m.ts for m in mine], np.int64),
                pa.array([m.k for m in mine], pa.binary()), pa.array([m.v for m in mine], pa.binary()),
                raw=True) for tp in logs for mine in [[m for m in msgs if m.p == tp[1]]]])
        con.register("recs", recs)
        con.register("rows", row_table(sink, rows))
        if latest:
            reduced = latest_records(sink, recs.take(list(reversed(range(recs.num_rows)))), bounds)
            shrunk += reduced.num_rows < recs.num_rows
            con.register("recs_latest", with_values(sink, reduced) if latest == "lazy" else reduced)
        got = judge_tables(con, sink, logs, bounds, recs="recs", rows="rows", topic=T,
                           latest="recs_latest" if latest else None,
                           history=History(sink, "recs") if latest == "lazy" else None)
        if latest:  # and the same keys left to the rules
            con.register("recs_all", record_table(sink, logs, msgs))
            assert got.checked == judge_tables(con, sink, logs, bounds, recs="recs_all", rows="rows",
                                               topic=T).checked
        con.close()

        def key(f):
            return json.dumps(f.to_dict(), sort_keys=True, default=str)

        assert sorted(map(key, got.findings)) == sorted(map(key, want.findings))
        assert got.expected_keys == {tp: n for tp, n in want.expected_keys.items() if n}
    assert shrunk or not latest  # the per-key pass did read fewer rows than records


@pytest.mark.parametrize("nkeys", [1, 2])
def test_latest_records_keeps_each_keys_latest_settled_record_per_partition_and_what_is_in_flight(nkeys):
    """Per key (its parts, a null part its own) and partition: the record of the greatest (settled, offset),
    and every committed record at or past the bound; a partition with no bound has none settled. Random
    records over two topics, checked against that rule spelt out record by record; the rows in their
    order."""
    import pyarrow as pa

    sink = replace(Sink(duckdb="x.duckdb", table="t", key_fields=tuple((f"id{i}", f"key.a{i}")
                                                                       for i in range(nkeys))), mode="upsert")
    rng = random.Random(551)
    con = duckdb.connect()
    for trial in range(150):
        every = [(t, p, o) for t in "ab" for p in range(3) for o in range(30)]
        places = rng.sample(every, rng.randint(1, 50))
        recs = [{"t": t, "p": p, "o": o, "st": rng.choice([1, 1, 2, 3]),
                 **{f"k{i}": rng.choice(["x", "y", None]) for i in range(nkeys)}} for t, p, o in places]
        bounds = {(t, p): rng.randint(0, 32) for t in "ab" for p in range(3) if rng.random() < 0.8}

        def rank(r, bounds=bounds):
            return (r["st"] == 1 and r["o"] < bounds.get((r["t"], r["p"]), 0), r["o"])

        groups: dict = {}
        for r in recs:
            group = (r["t"], r["p"], *(r[f"k{i}"] for i in range(nkeys)))
            if group not in groups or rank(r) > rank(groups[group]):
                groups[group] = r
        want = [r for r in recs if any(r is g for g in groups.values())
                or (r["st"] == 1 and r["o"] >= bounds.get((r["t"], r["p"]), 0))]
        schema = pa.schema([("t", pa.string()), ("p", pa.int32()), ("o", pa.int64()), ("st", pa.int8()),
                            *((f"k{i}", pa.string()) for i in range(nkeys))])
        table = pa.Table.from_pylist(recs, schema=schema)
        cut = rng.randint(0, len(recs))  # and in chunks, as the scan's partitions come
        chunked = pa.concat_tables([table.slice(0, cut), table.slice(cut, 3), table.slice(cut + 3)])
        for using, records in ((None, table), (con, table), (con, chunked)):
            assert latest_records(sink, records, bounds, using).to_pylist() == want, trial
    con.close()
