"""A PostgreSQL table, read at one snapshot.

Every reader is one connection in one ``REPEATABLE READ READ ONLY`` transaction: it sees one committed
state of the sink and, under MVCC, never blocks the pipeline's writer (nor waits for it). A command pins
that state once (``exported``: a transaction held open for the command that exports its snapshot with
pg_export_snapshot()); every reader of the command, the local pool's workers and Spark's tasks included,
starts its transaction with ``SET TRANSACTION SNAPSHOT`` to it, so every partition is judged at one point.
The queries are the shared SQL of eosctl.sink.relation, run on the server: a partition's filter is pushed
down with them.

Connection failures (a bad URI, a server that isn't there, wrong credentials, a missing database, table
or column) are one SinkError line each; a password is never shown.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from eosctl.base.errors import SinkError, first_line
from eosctl.cluster.model import TP
from eosctl.config.model import Sink
from eosctl.sink.base import (
    ISLAND_BATCH,
    MAX_OFFSET,
    MAX_PARTITION,
    Limits,
    OffsetIsland,
    ReadPoint,
    redact_uri,
    shown,
)
from eosctl.sink.relation import SqlReader, check_columns, check_offsets_columns, islands_from_offsets
from eosctl.sink.sql import ident, literal, name_parts, pg_int_column

if TYPE_CHECKING:
    import numpy as np
    import psycopg
    import pyarrow as pa

CONNECT_TIMEOUT_S = 10
# A reader's sorts (islands, keys) stay in memory up to here instead of spilling at the default 4MB (2-3x
# faster at a few million rows a partition); JIT is off: compiling costs ~0.1 s a query and these queries are
# many and simple (one a partition at 10k partitions).
READER_SETTINGS = {"work_mem": "64MB", "jit": "off"}
# One partition's offsets, where an index holds them in order, come to the client in chunks of this many
# rows, each one binary int8 array (12 bytes an offset), and break into islands there: 0.36-0.39 s for a
# 2.5M-row partition, where the server's lead() over them took 0.55-0.63 s (its window was the cost).
OFFSET_CHUNK = 1 << 20
URI_FORM = "postgresql://USER@HOST:PORT/DB, or postgresql://USER@/DB?host=/socket/dir for a Unix socket"
# pg_export_snapshot()'s identifiers: hex transaction parts and a counter (e.g. 00000003-0000001B-1).
_SNAPSHOT_ID = re.compile(r"^[0-9A-Fa-f]+-[0-9A-Fa-f]+(-[0-9]+)?$")
_cursors = itertools.count()
_TEXT_TYPES = ("text", "character varying", "character")


def conninfo(uri: str, where: str) -> dict[str, Any]:
    """The URI's connection parameters, checked; SinkError (never echoing the URI) if it isn't one."""
    from psycopg.conninfo import conninfo_to_dict  # lazy: see docs/imports.md

    scheme = uri.split("://", 1)[0] if "://" in uri else ""
    if scheme not in ("postgresql", "postgres"):
        raise SinkError(f"[{where}].postgres is not a PostgreSQL URI; write {URI_FORM} (a password goes in "
                        f"from the environment: postgresql://USER:${{PGPASSWORD}}@HOST/DB)")
    try:
        info = conninfo_to_dict(uri)
    except Exception as e:
        raise SinkError(f"[{where}].postgres {redact_uri(uri)} is not a valid PostgreSQL URI "
                        f"({_scrub(first_line(e), uri)}); write {URI_FORM}") from None
    port = str(info.get("port", "5432"))
    if not all(p.isascii() and p.isdigit() and 0 < int(p) < 65536 for p in port.split(",")):
        raise SinkError(f"[{where}].postgres {redact_uri(uri)}: port {port!r} is not a number in 1-65535")
    return info


def connect(uri: str, where: str) -> psycopg.Connection:
    """A connection (autocommit off: the first statement opens the transaction), or one SinkError line."""
    import psycopg  # lazy: see docs/imports.md

    info = conninfo(uri, where)
    name = redact_uri(uri)
    try:
        return psycopg.connect(uri, connect_timeout=CONNECT_TIMEOUT_S, application_name="eosctl")
    except psycopg.Error as e:
        raise _connect_error(_scrub(str(e), uri, info.get("password")), name, info, where) from None


def _scrub(text: str, uri: str, password: str | None = None) -> str:
    text = text.replace(uri, redact_uri(uri))
    return text.replace(password, "***") if password else text


def _connect_error(msg: str, name: str, info: dict[str, Any], where: str) -> SinkError:
    """libpq's "connection to server ... failed: REASON" as one line that says what to do."""
    reason = first_line(msg).rsplit("failed: ", 1)[-1].replace("FATAL:", "").strip()
    user = info.get("user", "")
    if "password authentication failed" in reason:
        return SinkError(f"PostgreSQL at {name} refused the password of user {user}; check the password "
                         f"in [{where}].postgres (e.g. from ${{PGPASSWORD}})")
    if "no password supplied" in reason:
        return SinkError(f"PostgreSQL at {name} wants a password and [{where}].postgres has none; add it "
                         f"from the environment: postgresql://{user or 'USER'}:${{PGPASSWORD}}@HOST/DB")
    if re.search(r'role ".*" does not exist', reason):
        return SinkError(f"PostgreSQL at {name} has no user {user}; check [{where}].postgres")
    if re.search(r'database ".*" does not exist', reason):
        return SinkError(f"PostgreSQL at {name} has no database {info.get('dbname', '')}; check "
                         f"[{where}].postgres")
    return SinkError(f"cannot connect to PostgreSQL at {name}: {reason}; check [{where}].postgres and that "
                     f"the server is running")


def _begin(conn: psycopg.Connection) -> None:
    """The next statement opens a REPEATABLE READ READ ONLY transaction: one snapshot, no writes."""
    from psycopg import IsolationLevel  # lazy: see docs/imports.md

    conn.isolation_level = IsolationLevel.REPEATABLE_READ
    conn.read_only = True
    for name, value in READER_SETTINGS.items():  # SET isn't a query: SET TRANSACTION SNAPSHOT may follow
        conn.execute(f"SET {name} = {literal(value)}")


def server_version(conn: psycopg.Connection) -> str:
    v = conn.info.server_version  # e.g. 150018 for 15.18 (PostgreSQL 10 and later)
    return f"{v // 10000}.{v % 10000}"


@contextmanager
def exported(sink: Sink, where: str = "sink") -> Iterator[Sink]:
    """The sink pinned at one snapshot for the block: a transaction held open that exports it; readers
    of the pinned sink join it. The transaction ends (and the snapshot with it) when the block does."""
    assert sink.postgres is not None
    conn = connect(sink.postgres, where)
    try:
        _begin(conn)
        try:
            snapshot = _one(conn.execute("SELECT pg_export_snapshot()").fetchone())
        except Exception as e:
            raise SinkError(f"cannot pin a snapshot of {shown(sink)}: {first_line(e)}") from None
        yield replace(sink, frozen_from=sink, at=snapshot)
    finally:
        conn.close()


class PostgresReader(SqlReader):
    """The shared SQL run on the PostgreSQL server, in this reader's one transaction."""

    _int_column = staticmethod(pg_int_column)

    def __init__(self, conn: psycopg.Connection, relation: str, sink: Sink, source: str,
                 offsets_relation: str | None, read_point: ReadPoint, types: dict[str, str] | None = None,
                 offsets_types: dict[str, str] | None = None, indexed: bool = False, ordered: bool = False):
        super().__init__(relation, sink, source, offsets_relation, read_point, types, offsets_types)
        self.conn = conn
        self.indexed = indexed  # a btree index leads with (topic, partition)
        self.ordered = ordered  # ... and then the offset
        self.scans_all_per_partition = not indexed
        self._t_text = (types or {}).get(_unquoted(sink.topic_column), "").split("(")[0] in _TEXT_TYPES
        # The index seeks a partition's rows by the columns themselves: text, then integers.
        self._seekable = ordered and self._t_text and self._p.exact and self._o.exact

    def columns(self) -> list[str]:
        """The relation's column names (the decoded content check's default mapping)."""
        try:
            with self.conn.cursor() as cur:
                cur.execute(f"SELECT * FROM {self.relation} LIMIT 0")
                return [c.name for c in cur.description or ()]
        except Exception as e:
            raise self._query_error(e) from None

    def partitions(self) -> dict[TP, int]:
        """With an index leading with (topic, partition) of text and integer types: the partitions by a
        loose index scan (one index probe a partition, not a scan of every row: 1 s saved at 10M rows),
        each with an estimate of its rows (the table's row estimate shared out: it only sizes tasks)."""
        if not (self.indexed and self._t_text and self._p.exact):
            return super().partitions()
        sql = f"""WITH RECURSIVE {self._loose_scans()}
            SELECT {self._t.value}, {self._p.value} FROM d WHERE {self._t.valid} AND {self._p.valid}"""
        found = [(str(t), int(p)) for t, p in self._query(sql)]
        estimate = self._query(f"SELECT greatest(reltuples, 0)::bigint FROM pg_class "
                               f"WHERE oid = {literal(self.relation)}::regclass")[0][0]
        return {tp: estimate // max(len(found), 1) for tp in found}

    def _maybe_invalid(self) -> str:
        """With topic, partition and offset leading an index, and of text and integer types: only the rows
        that can be invalid, each found by probing the index (a NULL or empty topic; per topic a NULL,
        negative or too large partition; per partition a NULL, negative or too large offset), not by a
        pass over the whole table, whose other columns (a JDBC sink's payload) may be most of its size.
        The branches are disjoint, so no row is counted twice."""
        if not self._seekable:
            return super()._maybe_invalid()
        t, p, o = (ident(c) for c in (self.sink.topic_column, self.sink.partition_column,
                                        self.sink.offset_column))
        rel = self.relation

        def probes(keys: str, match: str, col: str, limit: int) -> list[str]:
            """A branch for each way ``col`` can be wrong, probed once for each row of ``keys`` (x)."""
            return [f"SELECT r.* FROM {keys} AS x CROSS JOIN LATERAL "
                    f"(SELECT * FROM {rel} WHERE {match} AND {wrong}) AS r"
                    for wrong in (f"{col} IS NULL", f"{col} < 0", f"{col} > {limit}")]

        branches = [f"SELECT * FROM {rel} WHERE {t} IS NULL", f"SELECT * FROM {rel} WHERE {t} = ''",
                    *probes(f"(SELECT * FROM tt WHERE {self._t.valid})", f"{t} = x.{t}", p, MAX_PARTITION),
                    *probes(f"(SELECT * FROM d WHERE {self._t.valid} AND {self._p.valid})",
                            f"{t} = x.{t} AND {p} = x.{p}", o, MAX_OFFSET)]
        return f"""(WITH RECURSIVE {self._loose_scans()}
            {" UNION ALL ".join(branches)}) AS maybe_invalid"""

    def _loose_scans(self) -> str:
        """Two recursive CTEs over the index: tt, the distinct topics, and d, the distinct (topic, partition)
        pairs, one index probe each (not a pass over every row). Both keep the columns' own names, so the
        same checks judge them as the rows."""
        t, p, rel = ident(self.sink.topic_column), ident(self.sink.partition_column), self.relation
        return f"""
            tt AS ((SELECT {t} FROM {rel} WHERE {t} IS NOT NULL ORDER BY {t} LIMIT 1)
                   UNION ALL
                   SELECT n.* FROM tt CROSS JOIN LATERAL (
                       SELECT {t} FROM {rel} WHERE {t} > tt.{t} ORDER BY {t} LIMIT 1) AS n),
            d AS ((SELECT {t}, {p} FROM {rel} WHERE {t} IS NOT NULL AND {p} IS NOT NULL
                   ORDER BY {t}, {p} LIMIT 1)
                  UNION ALL
                  SELECT n.* FROM d CROSS JOIN LATERAL (
                      SELECT {t}, {p} FROM {rel} WHERE ({t}, {p}) > (d.{t}, d.{p}) ORDER BY {t}, {p} LIMIT 1)
                      AS n)"""

    def islands_in(self, tps: Sequence[TP]) -> Iterator[OffsetIsland]:
        """With an index on (topic, partition, ...), one query a partition: each reads its rows in the
        index's order, no sort (5x faster than one query sorting the group's rows); without one, one scan
        for the whole group."""
        if not self.indexed:
            yield from super().islands_in(tps)
            return
        for topic, partition in sorted(tps):
            yield from self.islands(topic, partition)

    def islands(self, topic: str | None = None, partition: int | None = None) -> Iterator[OffsetIsland]:
        """One partition's islands from its offsets in the index's order (OFFSET_CHUNK), where the offset
        column is an integer one (its order is the index's, and a page starts where the index can seek)."""
        if not (self._seekable and topic is not None and partition is not None):
            yield from super().islands(topic, partition)
            return
        yield from islands_from_offsets(topic, partition, self._offsets(topic, partition))

    def _offsets(self, topic: str, partition: int) -> Iterator[np.ndarray]:
        """The partition's valid offsets in order, OFFSET_CHUNK rows at a time (keyset pages: each starts
        at the last offset of the page before, whose rows it reads again, so no offset's rows are split).
        Filtered and ordered by the columns themselves, as the index holds them."""
        import numpy as np  # lazy: see docs/imports.md

        o = self._o.raw
        rows = (f"FROM {self.relation} WHERE {ident(self.sink.topic_column)} = {literal(topic)} "
                f"AND {self._p.equals(int(partition))} AND {self._o.valid}")
        low: int | None = None
        while True:
            after = "" if low is None else f" AND {o} >= {low}"
            page = self._one(f"SELECT array_send(array_agg(o)) FROM (SELECT CAST({o} AS BIGINT) AS o {rows}"
                             f"{after} ORDER BY {o} LIMIT {OFFSET_CHUNK}) AS c")
            if page is None:
                return
            n = int.from_bytes(page[12:16], "big")  # array_send: ndim, flags, type, then size and lbound
            offsets = np.frombuffer(page, dtype=[("n", ">i4"), ("o", ">i8")], count=n, offset=20)["o"]
            offsets = offsets.astype(np.int64)
            if n > 1 and bool((offsets[1:] < offsets[:-1]).any()):
                offsets.sort()  # array_agg keeps its input's order in practice; SQL doesn't promise it
            if n < OFFSET_CHUNK:
                yield offsets
                return
            last = int(offsets[-1])
            below = int(np.searchsorted(offsets, last))
            if below:
                yield offsets[:below]
                low = last
                continue
            # A whole page of one offset: its rows counted, the next page after it.
            yield np.full(self._one(f"SELECT count(*) {rows} AND {o} = {last}"), last, dtype=np.int64)
            if last == MAX_OFFSET:
                return
            low = last + 1

    def _one(self, sql: str) -> Any:
        """The one value of a one-row query, its bytes as the server sends them (binary)."""
        try:
            with self.conn.cursor(binary=True) as cur:
                return _one(cur.execute(sql).fetchone())
        except Exception as e:
            raise self._query_error(e) from None

    def close(self) -> None:
        self.conn.close()  # ends the read-only transaction

    def limit(self, limits: Limits) -> None:
        """Nothing to cap here: the server does the work, within its own settings."""

    def _query(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple]:
        try:
            return self.conn.execute(sql, params or None).fetchall()
        except Exception as e:
            raise self._query_error(e) from None

    def _stream(self, sql: str, params: tuple[Any, ...] = ()) -> Iterator[list[tuple]]:
        """Row batches from a server-side cursor: memory bounded by the batch, not by the sink."""
        try:
            with self.conn.cursor(name=f"eosctl_{next(_cursors)}") as cur:
                cur.execute(sql, params or None)
                while rows := cur.fetchmany(ISLAND_BATCH):
                    yield rows
        except Exception as e:
            raise self._query_error(e) from None

    def key_rows_sql(self) -> str:
        """SQL for (t, p, o, k) of every row with a key and a valid offset, the key as text, in no order and
        with every repeat: committed_keys' rows of every partition at once, for Spark's JDBC source
        (auditors.spark_sink), which filters them by the committed spans."""
        key = ident(self.sink.key_column or "")
        offset = self._o.checked or self._o.value
        return (f"SELECT {self._t.value} AS t, {self._p.value} AS p, {offset} AS o, "
                f"CAST({key} AS VARCHAR) AS k FROM {self.relation} "
                f"WHERE {self._o.valid} AND {key} IS NOT NULL")

    def committed_keys(self, topic: str, partition: int,
                       committed: list[tuple[int, int]]) -> Iterator[pa.RecordBatch]:
        import pyarrow as pa  # lazy: see docs/imports.md

        rows = self._rows_sql(topic, partition, with_key=True)
        if self.conn.info.server_version >= 140000:
            # A multirange: one containment test per row, by binary search over the ranges.
            # Half-open, and unbounded past the last offset an int8 holds: PostgreSQL makes [a,b] into
            # [a,b+1), which overflows for b = 2^63-1 (the content check asks for every row that way).
            ranges = "{" + ",".join(f"[{a},{b + 1})" if b < _INT8_MAX else f"[{a},)"
                                    for a, b in committed) + "}"
            sql = (f"SELECT DISTINCT s.k, s.o FROM ({rows}) s WHERE s.k IS NOT NULL "
                   f"AND s.o <@ %s::int8multirange")
            params: tuple[Any, ...] = (ranges,)
        else:
            sql = (f"SELECT DISTINCT s.k, s.o FROM ({rows}) s JOIN unnest(%s::bigint[], %s::bigint[]) "
                   f"AS r(rf, rl) ON s.o BETWEEN r.rf AND r.rl WHERE s.k IS NOT NULL")
            params = ([a for a, _ in committed], [b for _, b in committed])
        schema = pa.schema([("key", pa.string()), ("offset", pa.int64())])
        try:
            for batch in self._stream(sql, params):
                keys, offsets = zip(*batch, strict=True)
                yield pa.RecordBatch.from_arrays([pa.array(keys, pa.string()), pa.array(offsets, pa.int64())],
                                                 schema=schema)
        except SinkError as e:
            raise SinkError(f"reading keys of {topic}-{partition} from sink {self.source} failed: "
                            f"{str(e).split(': ', 1)[-1]}") from None


_INT8_MAX = (1 << 63) - 1


def _one(row: tuple | None) -> Any:
    """The value of a query that answers one row (pg_export_snapshot(), a count)."""
    assert row is not None
    return row[0]


def open_postgres(sink: Sink, where: str = "sink") -> PostgresReader:
    """A reader of the sink's table in its own read-only transaction, at the sink's pinned snapshot
    (sink.at, from ``exported``) or, unpinned, at a snapshot of its own."""
    assert sink.postgres is not None
    name = shown(sink)
    conn = connect(sink.postgres, where)
    try:
        _begin(conn)
        if sink.at is not None:
            snapshot = _join(conn, sink.at, name)
        else:
            snapshot = _one(conn.execute("SELECT pg_export_snapshot()").fetchone())
        schema, table = _find_table(conn, sink.table, where, "table", name)
        have = _column_types(conn, schema, table)
        check_columns(have, sink, where, f"table {sink.table} in {name}")
        sink = _actual_columns(sink, have)
        offsets = offsets_types = None
        if sink.offsets_table:
            o_schema, o_table = _find_table(conn, sink.offsets_table, where, "offsets_table", name)
            offsets_types = check_offsets_columns(_column_types(conn, o_schema, o_table), where,
                                                  f"table {sink.offsets_table} in {name}")
            offsets = _qualified(o_schema, o_table)
        point = ReadPoint("postgres", name, {"snapshot": snapshot, "server_version": server_version(conn)})
        leads = _index_leads(conn, schema, table)
    except BaseException:
        conn.close()
        raise
    want = [_unquoted(c) for c in (sink.topic_column, sink.partition_column, sink.offset_column)]
    return PostgresReader(conn, _qualified(schema, table), sink, name, offsets, point, have, offsets_types,
                          any(cols[:2] == want[:2] for cols in leads), any(cols == want for cols in leads))


def _join(conn: psycopg.Connection, snapshot: str, name: str) -> str:
    if not _SNAPSHOT_ID.match(snapshot):
        raise SinkError(f"{snapshot!r} is not a PostgreSQL snapshot identifier")
    try:
        conn.execute(f"SET TRANSACTION SNAPSHOT {literal(snapshot)}")
    except Exception as e:
        raise SinkError(f"cannot read {name} at snapshot {snapshot} (the command that pinned it has ended, "
                        f"or the server's idle_in_transaction_session_timeout ended its transaction): "
                        f"{first_line(e)}") from None
    return snapshot


def _qualified(schema: str, table: str) -> str:
    return ident('"' + schema.replace('"', '""') + '"."' + table.replace('"', '""') + '"')


def _find_table(conn: psycopg.Connection, name: str, where: str, key: str, shown_as: str) -> tuple[str, str]:
    """(schema, table) that ``name`` (table, schema.table or db.schema.table) names: exactly, else
    case-insensitively (a name written unquoted folds to lower case in PostgreSQL)."""
    parts = name_parts(name)
    rows = conn.execute(
        "SELECT n.nspname, c.relname, array_position(current_schemas(false), n.nspname), current_database() "
        "FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE c.relkind IN ('r', 'v', 'm', 'p', 'f') "
        "AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg_toast%' "
        "ORDER BY 3 NULLS LAST, 1, 2").fetchall()

    def matches(fold: Any) -> list[tuple[str, str]]:
        out = []
        for schema, table, position, db in rows:
            names = {1: [table] if position is not None else None, 2: [schema, table],
                     3: [db, schema, table]}[len(parts)]
            if names is not None and [fold(n) for n in names] == [fold(p) for p in parts]:
                out.append((schema, table))
        return out

    found = matches(lambda s: s) or matches(str.lower)
    if not found:
        known = ", ".join(t if pos is not None else f"{s}.{t}" for s, t, pos, _ in rows[:20]) or "none"
        raise SinkError(f"{shown_as} has no table {name!r} (tables: {known}); check [{where}].{key} "
                        f"(schema.table, and double quotes for a name with dots: \"my.table\")")
    return found[0]


def _index_leads(conn: psycopg.Connection, schema: str, table: str) -> list[list[str]]:
    """The first three columns of each usable btree index on the table: one leading with the topic and
    partition columns (a JDBC sink's primary key with pk.mode=kafka) serves one partition's rows, and with
    the offset third, in offset order. An expression in the index is None here; partial indexes and ones
    the planner won't use (a failed CREATE INDEX CONCURRENTLY) are left out: a query counting on one would
    pass over the whole table instead, once for every page of every partition."""
    return [cols for (cols,) in conn.execute(
        "SELECT (SELECT array_agg(a.attname ORDER BY k.n) FROM unnest(i.indkey[0:2]) WITH ORDINALITY k(a, n) "
        "        LEFT JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.a) "
        "FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid JOIN pg_namespace n ON n.oid = c.relnamespace "
        "JOIN pg_class ic ON ic.oid = i.indexrelid JOIN pg_am am ON am.oid = ic.relam "
        "WHERE n.nspname = %s AND c.relname = %s AND am.amname = 'btree' AND i.indpred IS NULL "
        "AND i.indisvalid AND i.indisready",
        (schema, table)).fetchall() if cols]


def _unquoted(name: str) -> str:
    return name[1:-1].replace('""', '"') if name.startswith('"') and name.endswith('"') else name


def _column_types(conn: psycopg.Connection, schema: str, table: str) -> dict[str, str]:
    return {r[0]: r[1] for r in conn.execute(
        "SELECT a.attname, format_type(a.atttypid, a.atttypmod) FROM pg_attribute a "
        "JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = %s AND c.relname = %s AND a.attnum > 0 AND NOT a.attisdropped "
        "ORDER BY a.attnum", (schema, table)).fetchall()}


def _actual_columns(sink: Sink, have: dict[str, str]) -> Sink:
    """The sink with its column names as the table spells them (the SQL quotes every name, and PostgreSQL
    compares quoted names exactly)."""
    def actual(name: str) -> str:
        real = name if name in have else next((c for c in have if c.lower() == name.lower()), name)
        return '"' + real.replace('"', '""') + '"' if "." in real or '"' in real else real

    return replace(sink, topic_column=actual(sink.topic_column),
                   partition_column=actual(sink.partition_column), offset_column=actual(sink.offset_column),
                   key_column=None if sink.key_column is None else actual(sink.key_column))


__all__ = ["PostgresReader", "connect", "exported", "open_postgres"]
