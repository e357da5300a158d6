"""Sink stage: Kafka -> DuckDB or PostgreSQL, the consumed offsets stored in the same transaction as the rows.

The seeds' rule for exactly-once into an external system: commit state changes and offsets together. On
start (and after a crash) the sink seeks to the offsets in ``sink_offsets``, not to Kafka's; after each
DuckDB commit it also commits the same offsets to Kafka for group ``{prefix}.sink``, only so monitoring
tools see the sink's progress.
"""

from __future__ import annotations

import json
import shutil
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
from confluent_kafka import Message

from eosctl.base.errors import BrokerError
from eosctl.cluster.consumed import placed
from eosctl.config.model import Cluster
from eosctl.sandbox.pipeline.broker import Broker, payload
from eosctl.sandbox.pipeline.faults import SinkTarget
from eosctl.sandbox.pipeline.reader import Reader
from eosctl.sandbox.pipeline.topics import Names

TABLE = "orders_sink"
OFFSETS_TABLE = "sink_offsets"
BATCH = 25  # records per DuckDB transaction (at most)

# "partition" and "offset" are keywords in DuckDB's SQL, hence the quotes and the src_ prefixes.
SCHEMA = f"""
CREATE TABLE IF NOT EXISTS {TABLE} (
    src_topic VARCHAR NOT NULL,
    src_partition INTEGER NOT NULL,
    src_offset BIGINT NOT NULL,
    order_id VARCHAR,
    customer VARCHAR,
    amount DOUBLE,
    total DOUBLE,
    sink_batch INTEGER,          -- which DuckDB transaction wrote the row (replays show up here)
    written_at TIMESTAMPTZ DEFAULT current_timestamp
);
CREATE TABLE IF NOT EXISTS {OFFSETS_TABLE} (
    topic VARCHAR NOT NULL,
    "partition" INTEGER NOT NULL,
    next_offset BIGINT NOT NULL,
    PRIMARY KEY (topic, "partition")
);
"""


# The same tables in PostgreSQL, in a schema of the run's own (PgPlace.schema).
PG_SCHEMA = """
CREATE TABLE {schema}.orders_sink (
    src_topic TEXT NOT NULL,
    src_partition INTEGER NOT NULL,
    src_offset BIGINT NOT NULL,
    order_id TEXT,
    customer TEXT,
    amount DOUBLE PRECISION,
    total DOUBLE PRECISION,
    sink_batch INTEGER,
    written_at TIMESTAMPTZ DEFAULT now()
);
CREATE TABLE {schema}.sink_offsets (
    topic TEXT NOT NULL,
    "partition" INTEGER NOT NULL,
    next_offset BIGINT NOT NULL,
    PRIMARY KEY (topic, "partition")
);
"""


@dataclass(frozen=True)
class PgPlace:
    """Where a run's PostgreSQL sink goes: a database (URI) and a schema named after the run."""

    uri: str
    schema: str

    @property
    def has_password(self) -> bool:
        from psycopg.conninfo import conninfo_to_dict  # lazy: see docs/imports.md

        return "password" in conninfo_to_dict(self.uri)

    @property
    def quoted(self) -> str:
        return '"' + self.schema.replace('"', '""') + '"'


@dataclass
class SinkResult:
    rows: int
    batches: int
    crashes: int


class DuckSink:
    def __init__(self, path: Path, topic: str):
        self.con = duckdb.connect(str(path))
        self.con.execute(SCHEMA)
        self.topic = topic
        self.batches = 0

    def stored_offsets(self) -> dict[int, int]:
        rows = self.con.execute(f'SELECT "partition", next_offset FROM {OFFSETS_TABLE} WHERE topic = ?',
                                [self.topic]).fetchall()
        return {int(p): int(o) for p, o in rows}

    def write(self, msgs: Sequence[Message], offsets: dict[int, int]) -> None:
        """Rows and offsets in one DuckDB transaction: both land or neither does."""
        if not msgs and not offsets:
            return
        self.batches += 1
        self.con.execute("BEGIN TRANSACTION")
        try:
            if msgs:
                self.con.executemany(
                    f"INSERT INTO {TABLE} (src_topic, src_partition, src_offset, order_id, customer, amount, "
                    "total, sink_batch) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    [_row(m, self.batches) for m in msgs])
            if offsets:
                self.con.executemany(
                    f'INSERT INTO {OFFSETS_TABLE} (topic, "partition", next_offset) VALUES (?, ?, ?) '
                    'ON CONFLICT (topic, "partition") DO UPDATE SET next_offset = excluded.next_offset',
                    [(self.topic, p, o) for p, o in sorted(offsets.items())])
            self.con.execute("COMMIT")
        except BaseException:
            self.con.execute("ROLLBACK")
            raise

    def row_count(self) -> int:
        return _count(self.con.execute(f"SELECT count(*) FROM {TABLE}").fetchone())

    def close(self) -> None:
        self.con.close()


class PgSink:
    """DuckSink's twin on PostgreSQL: rows and offsets in one PostgreSQL transaction."""

    def __init__(self, place: PgPlace, topic: str):
        import psycopg  # lazy: see docs/imports.md

        # autocommit: a read is one statement; each write is an explicit transaction (con.transaction()).
        self.con = psycopg.connect(place.uri, autocommit=True)
        self.schema = place.quoted
        self.topic = topic
        self.batches = 0
        with self.con.transaction():
            self.con.execute(f"DROP SCHEMA IF EXISTS {self.schema} CASCADE")  # a fresh run
            self.con.execute(f"CREATE SCHEMA {self.schema}")
            self.con.execute(PG_SCHEMA.format(schema=self.schema))

    def stored_offsets(self) -> dict[int, int]:
        rows = self.con.execute(f'SELECT "partition", next_offset FROM {self.schema}.{OFFSETS_TABLE} '
                                "WHERE topic = %s", (self.topic,)).fetchall()
        return {int(p): int(o) for p, o in rows}

    def write(self, msgs: Sequence[Message], offsets: dict[int, int]) -> None:
        if not msgs and not offsets:
            return
        self.batches += 1
        with self.con.transaction(), self.con.cursor() as cur:
            if msgs:
                cur.executemany(
                    f"INSERT INTO {self.schema}.{TABLE} (src_topic, src_partition, src_offset, order_id, "
                    "customer, amount, total, sink_batch) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                    [_row(m, self.batches) for m in msgs])
            if offsets:
                cur.executemany(
                    f'INSERT INTO {self.schema}.{OFFSETS_TABLE} (topic, "partition", next_offset) '
                    'VALUES (%s, %s, %s) ON CONFLICT (topic, "partition") '
                    "DO UPDATE SET next_offset = excluded.next_offset",
                    [(self.topic, p, o) for p, o in sorted(offsets.items())])

    def row_count(self) -> int:
        return _count(self.con.execute(f"SELECT count(*) FROM {self.schema}.{TABLE}").fetchone())

    def close(self) -> None:
        self.con.close()


@dataclass(frozen=True)
class DeltaPlace:
    """A run's Delta Lake sink: the table's directory, and how many partitions the topic has (where the
    sink looks for its stored offsets on a restart)."""

    path: Path
    partitions: int


class DeltaSink:
    """DuckSink's twin on Delta Lake: each batch is one table commit holding the rows and, as the commit's
    application transactions (txn actions, what Spark's foreachBatch uses for idempotent Delta writes),
    the next offset of each partition: both land or neither does."""

    APP = "eosctl-sink"

    def __init__(self, place: DeltaPlace, topic: str):
        shutil.rmtree(place.path, ignore_errors=True)  # a fresh run
        self.path, self.partitions, self.topic, self.batches = str(place.path), place.partitions, topic, 0

    def _app(self, partition: int) -> str:
        return f"{self.APP}:{self.topic}:{partition}"

    def stored_offsets(self) -> dict[int, int]:
        from deltalake import DeltaTable  # lazy: see docs/imports.md

        if not DeltaTable.is_deltatable(self.path):
            return {}
        table = DeltaTable(self.path)
        versions = {p: table.transaction_version(self._app(p)) for p in range(self.partitions)}
        return {p: int(v) for p, v in versions.items() if v is not None}

    def write(self, msgs: Sequence[Message], offsets: dict[int, int]) -> None:
        # lazy: see docs/imports.md
        from deltalake import CommitProperties, Transaction, write_deltalake

        if not msgs and not offsets:
            return
        self.batches += 1
        rows = _arrow_rows(msgs, self.batches)
        txns = [Transaction(self._app(p), o) for p, o in sorted(offsets.items())]
        write_deltalake(self.path, rows, mode="append",
                        commit_properties=CommitProperties(app_transactions=txns))

    def row_count(self) -> int:
        from deltalake import DeltaTable  # lazy: see docs/imports.md

        return DeltaTable(self.path).to_pyarrow_dataset().count_rows() if self.batches else 0

    def close(self) -> None:
        pass


@dataclass(frozen=True)
class IcebergPlace:
    """A run's Iceberg sink: a SQL catalog on a SQLite file and its warehouse, in one directory."""

    root: Path
    catalog: str = "pipeline"
    namespace: str = "eosctl"

    @property
    def uri(self) -> str:
        return f"sqlite:///{self.root / 'catalog.db'}"

    @property
    def warehouse(self) -> str:
        return f"file://{self.root / 'warehouse'}"

    @property
    def name(self) -> str:
        return f"{self.namespace}.{TABLE}"

    def load(self) -> Any:
        from pyiceberg.catalog import load_catalog  # lazy: see docs/imports.md

        return load_catalog(self.catalog, uri=self.uri, warehouse=self.warehouse)


class IcebergSink:
    """DuckSink's twin on Iceberg: each batch is one table commit (a snapshot) holding the rows and, in the
    snapshot's summary properties, the next offset of every partition: both land or neither does."""

    KEY = "eosctl.sink.next-offset."

    def __init__(self, place: IcebergPlace, topic: str):
        shutil.rmtree(place.root, ignore_errors=True)  # a fresh run
        place.root.mkdir(parents=True)
        catalog = place.load()
        catalog.create_namespace(place.namespace)
        self.table = catalog.create_table(place.name, schema=_arrow_rows([], 0).schema)
        self.topic, self.batches = topic, 0

    def stored_offsets(self) -> dict[int, int]:
        current = self.table.current_snapshot()
        props = current.summary.additional_properties if current is not None else {}
        prefix = f"{self.KEY}{self.topic}."
        return {int(k[len(prefix):]): int(v) for k, v in props.items() if k.startswith(prefix)}

    def write(self, msgs: Sequence[Message], offsets: dict[int, int]) -> None:
        if not msgs and not offsets:
            return
        self.batches += 1
        every = {**self.stored_offsets(), **offsets}  # a snapshot's summary holds all partitions' offsets
        props = {f"{self.KEY}{self.topic}.{p}": str(o) for p, o in every.items()}
        self.table.append(_arrow_rows(msgs, self.batches), snapshot_properties=props)

    def row_count(self) -> int:
        return self.table.scan().to_arrow().num_rows

    def close(self) -> None:
        pass


def _arrow_rows(msgs: Sequence[Message], batch: int) -> Any:
    """The rows of one batch, with when the sink wrote them (``written_at``, as the SQL sinks' default)."""
    import pyarrow as pa  # lazy: see docs/imports.md

    now = datetime.now(UTC)
    cols = list(zip(*((*_row(m, batch), now) for m in msgs), strict=True)) or [()] * 9
    names = ["src_topic", "src_partition", "src_offset", "order_id", "customer", "amount", "total",
             "sink_batch", "written_at"]
    types = [pa.string(), pa.int32(), pa.int64(), pa.string(), pa.string(), pa.float64(), pa.float64(),
             pa.int32(), pa.timestamp("us", tz="UTC")]
    return pa.table([pa.array(c, t) for c, t in zip(cols, types, strict=True)], names=names)


Place = Path | PgPlace | DeltaPlace | IcebergPlace


def open_store(where: Place, topic: str) -> DuckSink | PgSink | DeltaSink | IcebergSink:
    if isinstance(where, IcebergPlace):
        return IcebergSink(where, topic)
    if isinstance(where, DeltaPlace):
        return DeltaSink(where, topic)
    return PgSink(where, topic) if isinstance(where, PgPlace) else DuckSink(where, topic)


def rows_in(where: Place, topic: str) -> Counter[tuple[Any, ...]]:
    """(partition, offset) -> rows, read back for the run's self-check."""
    sql = f"SELECT src_partition, src_offset FROM {TABLE} WHERE src_topic = ?"
    if isinstance(where, DeltaPlace | IcebergPlace):
        columns = ["src_topic", "src_partition", "src_offset"]
        if isinstance(where, IcebergPlace):
            table = where.load().load_table(where.name).scan(selected_fields=tuple(columns)).to_arrow()
        else:
            from deltalake import DeltaTable  # lazy: see docs/imports.md

            table = DeltaTable(str(where.path)).to_pyarrow_table(columns=columns)
        return Counter((p, o) for t, p, o in zip(*(c.to_pylist() for c in table.columns), strict=True)
                       if t == topic)
    if isinstance(where, PgPlace):
        import psycopg  # lazy: see docs/imports.md

        with psycopg.connect(where.uri) as con:
            rows = con.execute(sql.replace(TABLE, f"{where.quoted}.{TABLE}").replace("?", "%s"),
                               (topic,)).fetchall()
    else:
        db = duckdb.connect(str(where), read_only=True)
        try:
            rows = db.execute(sql, [topic]).fetchall()
        finally:
            db.close()
    return Counter(tuple(row) for row in rows)


def _count(row: tuple | None) -> int:
    assert row is not None  # count(*) always answers one row
    return int(row[0])


def _row(m: Message, batch: int) -> tuple:
    order = json.loads(payload(m))
    return (*placed(m), order.get("order_id"), order.get("customer"),
            order.get("amount"), order.get("total"), batch)


def next_offsets(msgs: Sequence[Message]) -> dict[int, int]:
    out: dict[int, int] = {}
    for m in msgs:
        _, partition, offset = placed(m)
        out[partition] = max(out.get(partition, 0), offset + 1)
    return out


def run_sink(cluster: Cluster, names: Names, broker: Broker, where: Place,
             targets: Sequence[SinkTarget], read_uncommitted: bool, progress: Callable[[str], None],
             timeout: float = 120.0) -> SinkResult:
    topic = names.output_topic
    sink = open_store(where, topic)
    reader: Reader | None = None
    done: set[SinkTarget] = set()
    held: dict[SinkTarget, list[Message]] = {}  # target records read so far, not yet written
    crashes = 0
    deadline = time.monotonic() + timeout
    try:
        while True:
            if reader is None:
                # A (re)started sink resumes from the offsets stored with its rows, not from Kafka's.
                reader = Reader(cluster, topic, names.sink_group, read_committed=not read_uncommitted,
                                starts=sink.stored_offsets())
            msgs = reader.poll(BATCH)
            if not msgs:
                if reader.caught_up(broker):
                    # Store the position past trailing markers/aborted records too: the group shows no lag.
                    stored = sink.stored_offsets()
                    moved = {p: o for p, o in reader.positions().items() if stored.get(p) != o}
                    _commit(sink, reader, [], moved)
                    break
                if time.monotonic() > deadline:
                    raise BrokerError(f"sink did not catch up with {topic} in {timeout:.0f}s")
                continue
            pending: list[Message] = []
            for m in msgs:
                target = next((t for t in targets if t not in done and t.covers(m)), None)
                if target is None:
                    pending.append(m)
                    continue
                held.setdefault(target, []).append(m)
                if placed(m)[2] < target.last_offset:
                    continue
                # Everything read before the crash point is stored properly first...
                _commit(sink, reader, pending, next_offsets(pending))
                pending = []
                # ...then the faulty half-commit, then the crash: the rest of this poll and anything
                # held for other targets is lost and read again after the restart.
                if target.fault == "duplicate-replay":
                    sink.write(held[target], {})  # rows committed, offsets not
                else:
                    _commit(sink, reader, [], {target.partition: target.last_offset + 1})  # offsets, no rows
                done.add(target)
                held.clear()
                reader.close()
                reader = None
                crashes += 1
                break
            else:
                _commit(sink, reader, pending, next_offsets(pending))
        rows = sink.row_count()
    finally:
        if reader is not None:
            reader.close()
        sink.close()  # other tools open the file read-only afterwards
    name, kind = (f"schema {where.schema}", "PostgreSQL") if isinstance(where, PgPlace) else \
        (where.path.name, "Delta") if isinstance(where, DeltaPlace) else \
        (where.name, "Iceberg") if isinstance(where, IcebergPlace) else (where.name, "DuckDB")
    progress(f"sink: {rows} rows in {name} ({sink.batches} {kind} transactions, {crashes} simulated crashes)")
    return SinkResult(rows, sink.batches, crashes)


def _commit(sink: DuckSink | PgSink | DeltaSink | IcebergSink, reader: Reader, msgs: Sequence[Message],
            offsets: dict[int, int]) -> None:
    """Rows and offsets into the sink in one transaction, then the same offsets to Kafka."""
    sink.write(msgs, offsets)
    reader.commit(offsets)
