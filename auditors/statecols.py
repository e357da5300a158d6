"""A state sink's records and rows as columns, judged per key in DuckDB, the rules of Python only where a
key may have a finding.

Both the full state audit (auditors.state) and the incremental one (auditors.stateinc) keep the source
records as one table (``recs``: t, p, o, ts, st, pid, ep, d, nv, s, k0.., v0..: the record's place, its
timestamp, its transaction's outcome (COMMITTED 1, ABORTED 2, OPEN 3) and writer, whether it deletes the
key, whether its value is null, its value for people where the sink compares no values, its key and value
as the sink's columns hold them, eosctl.rules.stateids) and the table's rows as another (``rows``: k0..,
v0.., ver). One pass of SQL finds, per key, its latest settled record and what is in flight, and marks
the keys whose every row (or no row) is certainly what eosctl.rules.upsert / aggregate would pass: a
clean key costs no Python object. The other keys (a row that differs, a missing or an unknown key, a key
in several partitions, a row with a version the fast path does not decide) are judged by those rules on
their whole history, so the findings are exactly theirs.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from eosctl.cluster.model import TP, Kind, PartitionLog
from eosctl.config.model import Sink
from eosctl.report.findings import ABORTED, COMMITTED, OPEN, Finding
from eosctl.rules import aggregate
from eosctl.rules import stateids as ids
from eosctl.rules.upsert import StateRecord, StateRow, judge

_CODE = {Kind.DATA: 1, Kind.ABORTED: 2, Kind.OPEN: 3}
_STATUS = {1: COMMITTED, 2: ABORTED, 3: OPEN}
OPEN_CODE = 3
# The fast path passes a fold when the float fold is this close (the rule's own tolerance is 1e-9) and
# the records' magnitudes do not cancel (a float sum that cancels is checked exactly, by the rule).
_CLOSE = 1e-12


@dataclass(frozen=True)
class Shape:
    """How many key and value columns a sink's records and rows have (no value columns: keys only)."""

    nkeys: int
    nvalues: int

    @classmethod
    def of(cls, sink: Sink) -> Shape:
        return cls(len(ids.key_columns(sink)), len(ids.value_columns(sink)))

    @property
    def keys(self) -> list[str]:
        return [f"k{i}" for i in range(self.nkeys)]

    @property
    def values(self) -> list[str]:
        return [f"v{i}" for i in range(self.nvalues)]

    def record_schema(self) -> Any:
        import pyarrow as pa  # lazy: see docs/imports.md

        return pa.schema([("t", pa.string()), ("p", pa.int32()), ("o", pa.int64()), ("ts", pa.int64()),
                          ("st", pa.int8()), ("pid", pa.int64()), ("ep", pa.int32()), ("d", pa.bool_()),
                          ("nv", pa.bool_()), ("s", pa.string()),
                          *((c, pa.string()) for c in self.keys), *((c, pa.string()) for c in self.values)])

    def record_ddl(self, name: str) -> str:
        cols = ", ".join([*(f"{c} VARCHAR" for c in self.keys), *(f"{c} VARCHAR" for c in self.values)])
        return (f"CREATE TABLE IF NOT EXISTS {name} (t VARCHAR, p INTEGER, o BIGINT, ts BIGINT, st TINYINT, "
                f"pid BIGINT, ep INTEGER, d BOOLEAN, nv BOOLEAN, s VARCHAR, {cols})")


def record_table(sink: Sink, logs: Mapping[TP, PartitionLog], messages: Iterable[Any]) -> Any:
    """The messages (a read_uncommitted consumer's) as the ``recs`` table (Arrow), each told by its log's
    classification; records outside a data, aborted or open range, and records without a key, left out
    (as eosctl.rules.upsert's records). Per message only its fields are taken; its key and value are read
    column by column (auditors.statecols' _Columns), Python's eosctl.rules.stateids only for the records
    the columns cannot decide."""
    import pyarrow as pa  # lazy: see docs/imports.md

    pieces, chunk = [], []
    for m in messages:
        chunk.append(m)
        if len(chunk) >= CHUNK:
            pieces.append(_records_table(sink, logs, chunk))
            chunk = []
    if chunk or not pieces:
        pieces.append(_records_table(sink, logs, chunk))
    return pa.concat_tables(pieces) if len(pieces) > 1 else pieces[0]


# Messages turned into columns at a time: their Python objects never outlive their chunk.
CHUNK = 262_144


def _records_table(sink: Sink, logs: Mapping[TP, PartitionLog], messages: list[Any]) -> Any:
    import numpy as np  # lazy: see docs/imports.md
    import pyarrow as pa  # lazy: see docs/imports.md

    t_ = [m.topic() for m in messages]
    p_ = [m.partition() for m in messages]
    o_ = [m.offset() for m in messages]
    ts_ = [m.timestamp()[1] for m in messages]
    k_ = [m.key() for m in messages]
    v_ = [m.value() for m in messages]
    return columns_table(sink, logs, pa.array(t_, pa.string()), np.array(p_, np.int32),
                         np.array(o_, np.int64), np.array(ts_, np.int64), pa.array(k_, pa.binary()),
                         pa.array(v_, pa.binary()))


def scanned_table(sink: Sink, logs: Mapping[TP, PartitionLog], scanned: Mapping[TP, Any],
                  raw: bool = False) -> Any:
    """The ``recs`` table of the records the log scans read (auditors.statebytes.RecordBytes' result per
    partition: offsets, timestamps, keys, values); with ``raw``, values left for ``with_values``."""
    import numpy as np  # lazy: see docs/imports.md
    import pyarrow as pa  # lazy: see docs/imports.md

    pieces = []
    for (t, p), (o, ts, k, v) in scanned.items():
        n = len(o)
        pieces.append(columns_table(sink, {(t, p): logs[(t, p)]}, pa.repeat(pa.scalar(t, pa.string()), n),
                                    np.full(n, p, np.int32), o, ts, k, v, raw=raw))
    if not pieces:
        schema = Shape.of(sink).record_schema()
        return pa.Table.from_pylist([], schema=_with_raw(schema) if raw else schema)
    return pa.concat_tables(pieces) if len(pieces) > 1 else pieces[0]


def columns_table(sink: Sink, logs: Mapping[TP, PartitionLog], topics_a: Any, parts: Any, offsets: Any,
                  ts: Any, keys_a: Any, values_a: Any, raw: bool = False) -> Any:
    """The ``recs`` table of records given as columns (topic, partition, offset, timestamp, key and value
    bytes), each told by its log's classification. With ``raw``, the value columns are null and the key
    and value bytes kept (``kb``, ``vb``): ``with_values`` reads the values of the records that need them."""
    import numpy as np  # lazy: see docs/imports.md
    import pyarrow as pa  # lazy: see docs/imports.md

    shape = Shape.of(sink)
    n = len(offsets)
    code, pid, ep = np.zeros(n, np.int8), np.full(n, -1, np.int64), np.full(n, -1, np.int32)
    topics = np.array(topics_a.to_pylist(), object) if len(logs) > 1 else None
    for tp, log in logs.items():
        at = np.flatnonzero((parts == tp[1]) & (topics == tp[0])) if len(logs) > 1 else np.arange(n)
        if not len(at) or not log.ranges:
            continue
        firsts = np.array([r.first for r in log.ranges], np.int64)
        lasts = np.array([r.last for r in log.ranges], np.int64)
        kinds = np.array([_CODE.get(r.kind, 0) for r in log.ranges], np.int8)
        i = np.searchsorted(firsts, offsets[at], side="right") - 1
        inside = (i >= 0) & (lasts[np.maximum(i, 0)] >= offsets[at])
        i = np.maximum(i, 0)
        code[at] = np.where(inside, kinds[i], 0)
        pid[at] = np.array([r.producer_id for r in log.ranges], np.int64)[i]
        ep[at] = np.array([r.producer_epoch for r in log.ranges], np.int32)[i]
    cols = _Columns(sink, keys_a, values_a)
    keys = [cols.part(src) for src in _key_sources(sink)]
    values = [pa.nulls(n, pa.string())] * shape.nvalues if raw else cols.values()
    keep = code > 0
    if keys:  # a key with every part null is no key to keep state by
        none = np.ones(n, bool)
        for k in keys:
            none &= np.asarray(k.is_null(), bool)
        keep &= ~none
    idx = None if keep.all() else pa.array(np.flatnonzero(keep))  # most often every record: no copy
    null_value = np.asarray(values_a.is_null(), bool)
    shown = cols.shown() if shape.nvalues == 0 else pa.nulls(n, pa.string())
    arrays = [topics_a, pa.array(parts), pa.array(offsets), pa.array(ts, pa.int64()),
              pa.array(code), pa.array(pid), pa.array(ep), cols.deletes(), pa.array(null_value), shown,
              *keys, *values, *([keys_a, values_a] if raw else [])]
    schema = _with_raw(shape.record_schema()) if raw else shape.record_schema()
    return pa.Table.from_arrays([a if idx is None else a.take(idx) for a in arrays], schema=schema)


def _with_raw(schema: Any) -> Any:
    import pyarrow as pa  # lazy: see docs/imports.md

    return schema.append(pa.field("kb", pa.binary())).append(pa.field("vb", pa.binary()))


def lazy_values(sink: Sink) -> bool:
    """Whether the value columns can wait for ``with_values``: an upsert sink's values are compared for a
    key's latest records and the histories the rules judge only (an aggregate folds every record, a hash
    column and a sink of no values are read otherwise)."""
    return sink.mode == "upsert" and bool(sink.value_fields or sink.value_column) \
        and not (sink.value_hash_column and not sink.value_fields)


def with_values(sink: Sink, recs: Any) -> Any:
    """Records of a ``raw`` table (``columns_table``) with their value columns, as ``columns_table`` reads
    them (record by record the same), the bytes dropped."""
    shape = Shape.of(sink)
    kb, vb = recs.column("kb").combine_chunks(), recs.column("vb").combine_chunks()
    values = _Columns(sink, kb, vb).values() if recs.num_rows else []
    out = recs.drop_columns(["kb", "vb"])
    for name, col in zip(shape.values, values, strict=False):
        out = out.set_column(out.schema.get_field_index(name), name, col)
    return out


class History:
    """The records of some keys with their values, from a ``raw`` records table registered in a DuckDB
    connection: ``judge_tables``' second pass and rules read these, not every record's values."""

    def __init__(self, sink: Sink, recs: str) -> None:
        self.sink, self.recs, self.made = sink, recs, 0

    def __call__(self, con: Any, keys_sql: str) -> str:
        keys = Shape.of(self.sink).keys
        on = " AND ".join(f"x.{c} IS NOT DISTINCT FROM j.{c}" for c in keys)
        got = con.sql(f"SELECT x.* FROM {self.recs} x SEMI JOIN ({keys_sql}) j ON {on}").to_arrow_table()
        self.made += 1
        name = f"state_history{self.made}"
        con.register(name, with_values(self.sink, got))
        return name


def _key_sources(sink: Sink) -> list[str]:
    """What each key column holds of a record ("key", "key.PATH", "value.PATH")."""
    return [src for _, src in sink.key_fields] if sink.key_fields else ["key"]


_SIMPLE = ("VARCHAR", "BIGINT", "UBIGINT", "BOOLEAN", "NULL")


class _Columns:
    """A batch of records' keys and values as eosctl.rules.stateids canonicalises them, column by column:
    UTF-8 text as it is, a JSON field extracted by DuckDB where its type keeps its text (a string, an
    integer, a boolean, null); stateids' own functions for every record the columns can't decide (bytes
    that are no UTF-8, text that is a JSON object or list, a float, invalid JSON, a path DuckDB spells
    otherwise)."""

    def __init__(self, sink: Sink, keys: Any, values: Any) -> None:
        self.sink, self.raw = sink, {"key": keys, "value": values}
        self.texts: dict[str, Any] = {}
        self.con: Any = None

    def _text(self, which: str) -> tuple[Any, Any]:
        """(the bytes as UTF-8 text, a mask of records whose bytes are not UTF-8)."""
        import numpy as np  # lazy: see docs/imports.md
        import pyarrow as pa  # lazy: see docs/imports.md

        if which not in self.texts:
            raw = self.raw[which]
            try:
                self.texts[which] = (raw.cast(pa.string()), np.zeros(len(raw), bool))
            except pa.ArrowInvalid:
                got, bad = [], np.zeros(len(raw), bool)
                for i, b in enumerate(raw.to_pylist()):
                    try:
                        got.append(None if b is None else b.decode("utf-8"))
                    except UnicodeDecodeError:
                        got.append(None)
                        bad[i] = True
                self.texts[which] = (pa.array(got, pa.string()), bad)
        return self.texts[which]

    def _python(self, out: Any, fix: Any, source: str) -> Any:
        """``out`` with the records of mask ``fix`` canonicalised by eosctl.rules.stateids."""
        import numpy as np  # lazy: see docs/imports.md

        at = np.flatnonzero(fix)
        if not len(at):
            return out
        keys, values = self.raw["key"], self.raw["value"]
        got = out.to_pylist()
        for i in at.tolist():
            got[i] = ids.canon(ids._field(keys[i].as_py(), values[i].as_py(), source, {}))
        return strings(got)

    def part(self, source: str) -> Any:
        """One key or value column: what ``source`` ("key", "value", "key.PATH", "value.PATH") names of
        each record, canonical."""
        import numpy as np  # lazy: see docs/imports.md
        import pyarrow.compute as pc  # lazy: see docs/imports.md

        head, _, path = source.partition(".")
        text, bad = self._text(head)
        n = len(text)
        if not path:
            json_like = np.asarray(pc.fill_null(pc.or_(pc.starts_with(text, "{"), pc.starts_with(text, "[")),
                                                False), bool)
            return self._python(text, bad | json_like, source)
        parts = path.split(".")
        if not all(p.isidentifier() for p in parts):  # a list index or a name DuckDB's paths quote
            import pyarrow as pa  # lazy: see docs/imports.md

            return self._python(pa.nulls(n, pa.string()), np.ones(n, bool), source)
        if self.con is None:
            import duckdb  # lazy: see docs/imports.md

            self.con = duckdb.connect()
        import pyarrow as pa  # lazy: see docs/imports.md

        self.con.register("texts", pa.table({"s": text}))
        jpath = "$." + ".".join(parts)
        got = self.con.sql(
            f"SELECT ok, CASE WHEN ok THEN json_type(s, '{jpath}') END AS ty, "
            f"CASE WHEN ok THEN json_extract_string(s, '{jpath}') END AS x "
            "FROM (SELECT s, json_valid(s) AS ok FROM texts)").to_arrow_table() if n else None
        self.con.unregister("texts")
        if got is None:
            return pa.nulls(0, pa.string())
        x = got.column("x").combine_chunks()
        ty = got.column("ty").combine_chunks()
        ok = np.asarray(pc.fill_null(got.column("ok").combine_chunks(), False), bool)
        simple = np.asarray(pc.fill_null(pc.is_in(ty, pa.array(_SIMPLE)), True), bool)  # NULL: no such field
        json_like = np.asarray(pc.fill_null(pc.and_(pc.equal(ty, "VARCHAR"), pc.or_(
            pc.starts_with(x, "{"), pc.starts_with(x, "["))), False), bool)
        present = np.asarray(text.is_valid(), bool)
        fix = bad | (present & (~ok | ~simple | json_like))
        x = pc.if_else(pa.array(present & ok), x, pa.nulls(n, pa.string()))
        return self._python(x.cast(pa.string()), fix, source)

    def values(self) -> list[Any]:
        """The value columns (eosctl.rules.stateids.record_value), none where the sink compares none."""
        import pyarrow as pa  # lazy: see docs/imports.md

        sink = self.sink
        if sink.mode == "aggregate" and sink.aggregate is not None:
            field = sink.aggregate.field
            return [self.part(field) if field else pa.nulls(len(self.raw["value"]), pa.string())]
        if sink.value_fields:
            return [self.part(src) for _, src in sink.value_fields]
        if sink.value_column:
            return [self.part("value")]
        if sink.value_hash_column:
            return [pa.array([None if v is None else hashlib.md5(v).hexdigest()
                              for v in self.raw["value"].to_pylist()], pa.string())]
        return []

    def deletes(self) -> Any:
        """Whether each record deletes its key: a tombstone, or a value the config names."""
        import pyarrow as pa  # lazy: see docs/imports.md

        values = self.raw["value"]
        if not self.sink.delete_values:
            return values.is_null()
        return pa.array([ids.is_delete(self.sink, v, {}) for v in values.to_pylist()], pa.bool_())

    def shown(self) -> Any:
        """Each value for people (eosctl.rules.stateids.shown), where the sink compares no values."""

        whole = self.part("value").to_pylist()
        return strings([v if v is None or len(v) <= ids.SHOWN_MAX else v[:ids.SHOWN_MAX - 3] + "..."
                        for v in whole])


def row_table(sink: Sink, rows: Iterable[StateRow]) -> Any:
    """The table's rows (eosctl.rules.upsert.StateRow each) as the ``rows`` table (Arrow)."""
    import pyarrow as pa  # lazy: see docs/imports.md

    shape = Shape.of(sink)
    kc: list[list[Any]] = [[] for _ in range(shape.nkeys)]
    vc: list[list[Any]] = [[] for _ in range(shape.nvalues)]
    ver: list[int | None] = []
    for r in rows:
        for c, part in zip(kc, r.key, strict=True):
            c.append(part)
        if r.value is not None:
            for c, part in zip(vc, r.value, strict=True):
                c.append(part)
        else:
            for c in vc:
                c.append(None)
        ver.append(r.version)
    return pa.table({**{f"k{i}": strings(c) for i, c in enumerate(kc)},
                     **{f"v{i}": strings(c) for i, c in enumerate(vc)},
                     "ver": pa.array(ver, pa.int64())})


def raw_row_table(sink: Sink, raw: list[tuple], version: bool) -> Any:
    """A table sink's rows as read (key columns, value columns, the version column if ``version``) as the
    ``rows`` table, each cell in the canonical form eosctl.rules.stateids compares."""
    import pyarrow as pa  # lazy: see docs/imports.md

    shape = Shape.of(sink)
    hashed = bool(sink.value_hash_column) and not sink.value_fields and sink.mode == "upsert"
    canon = ids.canon
    out: dict[str, Any] = {}
    for i in range(shape.nkeys):
        out[f"k{i}"] = strings([canon(r[i]) for r in raw])
    for j in range(shape.nvalues):
        at = shape.nkeys + j
        cells = [canon(r[at]) for r in raw]
        if hashed:
            cells = [None if c is None else c.lower() for c in cells]
        out[f"v{j}"] = strings(cells)
    out["ver"] = pa.array([_int(r[-1]) for r in raw] if version else [None] * len(raw), pa.int64())
    return pa.table(out)


def arrow_row_table(sink: Sink, raw: Any, version: bool) -> Any:
    """``raw_row_table`` of rows read as Arrow (key columns, value columns, the version column if
    ``version``), text and integer and boolean columns canonical column by column; None where a column
    has another type (then the rows are read as tuples and canonicalised by Python)."""
    import numpy as np  # lazy: see docs/imports.md
    import pyarrow as pa  # lazy: see docs/imports.md
    import pyarrow.compute as pc  # lazy: see docs/imports.md

    shape = Shape.of(sink)
    hashed = bool(sink.value_hash_column) and not sink.value_fields and sink.mode == "upsert"
    names = [*shape.keys, *shape.values]
    out: dict[str, Any] = {}
    for i, name in enumerate(names):
        col = raw.column(i).combine_chunks()
        kind = col.type
        if pa.types.is_string(kind) or pa.types.is_large_string(kind):
            col = col.cast(pa.string())
            json_like = np.asarray(pc.fill_null(pc.or_(pc.starts_with(col, "{"), pc.starts_with(col, "[")),
                                                False), bool)
            if json_like.any():  # a JSON object or list compares by content (stateids.canon)
                got = col.to_pylist()
                for j in np.flatnonzero(json_like).tolist():
                    got[j] = ids.canon(got[j])
                col = strings(got)
        elif pa.types.is_integer(kind):
            col = col.cast(pa.string())
        elif pa.types.is_boolean(kind):
            col = pc.if_else(col, "true", "false")
        elif pa.types.is_null(kind):
            col = pa.nulls(len(col), pa.string())
        else:
            return None
        if hashed and i >= shape.nkeys:
            col = pc.utf8_lower(col)
        out[name] = col
    vers = [_int(v) for v in raw.column(len(names)).to_pylist()] if version else [None] * raw.num_rows
    out["ver"] = pa.array(vers, pa.int64())
    return pa.table(out)


def strings(values: list[str | None]) -> Any:
    """Canonical texts as an Arrow column. Bytes that are no UTF-8 were decoded with surrogateescape
    (eosctl.rules.stateids.canon), which Arrow and DuckDB can't hold: those texts, of records and rows alike,
    are kept with each such byte as \\xNN."""
    import pyarrow as pa  # lazy: see docs/imports.md

    try:
        return pa.array(values, pa.string())
    except UnicodeEncodeError:
        return pa.array([_safe(v) for v in values], pa.string())


def _safe(v: str | None) -> str | None:
    if v is None:
        return None
    try:
        v.encode("utf-8")
        return v
    except UnicodeEncodeError:
        return v.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def _int(v: Any) -> int | None:
    """A version column's value as an offset; None where it holds none (NULL, text that is no integer)."""
    try:
        return None if v is None or isinstance(v, bool) else int(v)
    except (TypeError, ValueError):
        return None


@dataclass(frozen=True)
class Verdict:
    """What the judge found, and what the partitions' summaries count."""

    findings: list[Finding]
    expected_keys: dict[TP, int]  # keys whose latest settled record (a value; a fold: counted) is there
    sink_rows: dict[TP, int]  # rows whose key's latest record is in the partition
    checked: int  # keys judged by the rules in Python (the others passed in SQL)


def latest_records(sink: Sink, recs: Any, bounds: Mapping[TP, int], con: Any = None) -> Any:
    """Of an upsert sink's records (the ``recs`` table, Arrow), those the per-key pass of ``judge_tables``
    needs: per key and partition its latest settled record (else its last record: the key's partitions
    are all there), and every committed record past the read point (in flight). Each key's latest settled
    record, its partitions and what is in flight are the same as of all records, so the pass folds about
    one row a key, not one a record; None for an aggregate, whose fold needs every record.

    The groups by one GROUP BY in DuckDB (``con``, else a connection of its own): its hash aggregate runs
    on every core, where an Arrow dictionary encoding of the key column (one thread) took most of a
    10M-record audit's pass."""
    import numpy as np  # lazy: see docs/imports.md
    import pyarrow as pa  # lazy: see docs/imports.md

    if sink.mode == "aggregate" or recs.num_rows == 0:
        return None
    n = recs.num_rows
    topics = recs.column("t").combine_chunks().dictionary_encode()
    tcode = np.asarray(topics.indices.fill_null(-1), np.int64)
    p = np.asarray(recs.column("p").combine_chunks().fill_null(-1), np.int64)
    nparts = int(p.max()) + 2
    tp = (tcode + 1) * nparts + (p + 1)
    names = topics.dictionary.to_pylist()
    bound = np.zeros((len(names) + 1) * nparts, np.int64)  # a partition without a bound: none settled
    for (t, p_), at in bounds.items():
        if t in names and -1 <= p_ < nparts - 1:
            bound[(names.index(t) + 1) * nparts + p_ + 1] = at
    b = bound[tp]
    o = np.asarray(recs.column("o").combine_chunks(), np.int64)
    st = np.asarray(recs.column("st").combine_chunks(), np.int8)
    settled = (st == 1) & (o < b)
    low = int(o.min())
    rank = (o - low) + settled.astype(np.int64) * (int(o.max()) - low + 1)
    keys = Shape.of(sink).keys
    places = pa.table({**{k: recs.column(k) for k in keys}, "g": tp, "r": rank,
                       "i": np.arange(n, dtype=np.int64)})
    own = con is None
    if own:
        import duckdb  # lazy: see docs/imports.md

        from eosctl.sink.relation import NO_EXTENSION_DOWNLOADS  # lazy: see docs/imports.md

        con = duckdb.connect(config=NO_EXTENSION_DOWNLOADS)
    try:
        # Per group (key parts, a null part its own, and partition) the row of the greatest (settled,
        # offset): offsets are unique in a partition, so the row is one.
        con.register("latest_places", places)
        got = con.sql(f"SELECT arg_max(i, r) AS i FROM latest_places GROUP BY {', '.join([*keys, 'g'])}")
        at = got.to_arrow_table().column("i")
    finally:
        con.unregister("latest_places")
        if own:
            con.close()
    keep = (st == 1) & (o >= b)
    keep[np.asarray(at.combine_chunks(), np.int64)] = True
    return take_sorted(recs, np.flatnonzero(keep))


def take_sorted(table: Any, rows: Any) -> Any:
    """``table.take(rows)`` for ascending ``rows``, batch by batch: a chunked table's take would first
    concatenate each column (a copy of every record's key and value bytes)."""
    import numpy as np  # lazy: see docs/imports.md
    import pyarrow as pa  # lazy: see docs/imports.md

    batches = table.to_batches()
    ends = np.cumsum([batch.num_rows for batch in batches])
    out, first = [], 0
    for batch, end in zip(batches, ends.tolist(), strict=True):
        lo, hi = np.searchsorted(rows, [first, end])
        if hi > lo:
            out.append(batch.take(pa.array(rows[lo:hi] - first)))
        first = end
    return pa.Table.from_batches(out, schema=table.schema)


def judge_tables(con: Any, sink: Sink, logs: Mapping[TP, PartitionLog], bounds: Mapping[TP, int], *,
                 recs: str, rows: str, topic: str | None, latest: str | None = None,
                 history: Any = None) -> Verdict:
    """The findings of the rows (table ``rows`` in ``con``) against the records (table ``recs``), with
    ``bounds`` (per partition, the offset below which committed records are settled); ``latest``: a table
    of ``latest_records`` of them, which the per-key pass reads instead; ``history`` (a ``History``): where
    ``recs`` holds no values, the table of some keys' records with them (the second pass, the rules)."""
    import pyarrow as pa  # lazy: see docs/imports.md

    shape = Shape.of(sink)
    keys, values = shape.keys, shape.values
    con.register("state_bounds", pa.table({"t": [t for t, _ in bounds], "p": pa.array([p for _, p in bounds],
                                                                                       pa.int32()),
                                           "b": pa.array(list(bounds.values()), pa.int64())}))
    kl = ", ".join(keys)
    aggregate_mode = sink.mode == "aggregate" and sink.aggregate is not None
    settled = "st = 1 AND o < b"
    # Per key: in one partition or several, its latest settled record, what is in flight, its last record.
    if aggregate_mode:
        fn = sink.aggregate.fn  # type: ignore[union-attr]
        x = "TRY_CAST(v0 AS DOUBLE)"
        part = f"{settled} AND NOT d{'' if fn == 'count' else f' AND {x} IS NOT NULL'}"
        bad = "0" if fn == "count" else (f"count(*) FILTER (WHERE {settled} AND NOT d AND v0 IS NOT NULL AND "
                                         f"({x} IS NULL OR NOT isfinite({x})))")
        per_key = (f"count(*) FILTER (WHERE {settled} AND NOT d) AS cnt, "
                   f"count({x}) FILTER (WHERE {settled} AND NOT d) AS nx, {bad} AS bad, "
                   f"{'sum' if fn == 'count' else fn}({x}) FILTER (WHERE {settled} AND NOT d) AS agg, "
                   f"{'0' if fn == 'count' else f'sum(abs({x})) FILTER (WHERE {settled} AND NOT d)'} AS mag, "
                   f"arg_max(struct_pack(t := t, p := p), o) FILTER (WHERE {part}) AS ctp1")
        multi = f"arg_max(struct_pack(t := t, p := p), row(ts, t, p, o)) FILTER (WHERE {part}) AS ctp2"
    else:
        ev = ", ".join(f"{c} := {c}" for c in ["o", "d", "t", "p", *values])
        per_key = (f"arg_max(struct_pack({ev}), o) FILTER (WHERE {settled}) AS e1, "
                   f"bool_or(st = 1 AND o >= b AND d) AS fdel, bool_or(st = 1 AND o >= b AND NOT d) AS fnon")
        multi = f"arg_max(struct_pack({ev}), row(ts, t, p, o)) FILTER (WHERE {settled}) AS e2"

    def bounded(table: str) -> str:
        return f"(SELECT r.*, coalesce(s.b, 0) AS b FROM {table} r LEFT JOIN state_bounds s USING (t, p))"

    with_bounds = bounded(recs)
    con.execute(f"""CREATE OR REPLACE TEMP TABLE state_keys1 AS
        SELECT {kl}, min(t) = max(t) AND min(p) = max(p) AS single,
               any_value(struct_pack(t := t, p := p)) AS tp1, {per_key}
        FROM {bounded(latest or recs)} GROUP BY ALL""")
    # A key of several partitions (applied by timestamp): its latest record by (timestamp, partition,
    # offset), a second pass over those keys' records alone.
    mon = " AND ".join(f"r.{c} IS NOT DISTINCT FROM m.{c}" for c in keys)
    if history is not None:
        with_bounds = bounded(history(con, f"SELECT {kl} FROM state_keys1 WHERE NOT single"))
    con.execute(f"""CREATE OR REPLACE TEMP TABLE state_multi AS
        SELECT {kl}, arg_max(struct_pack(t := t, p := p), row(ts, t, p, o)) AS last, {multi}
        FROM (SELECT r.* FROM {with_bounds} r SEMI JOIN (SELECT {kl} FROM state_keys1 WHERE NOT single) m
              ON {mon}) GROUP BY ALL""")
    kon = " AND ".join(f"k.{c} IS NOT DISTINCT FROM m.{c}" for c in keys)
    con.execute(f"""CREATE OR REPLACE TEMP TABLE state_keys AS
        SELECT k.*, coalesce(m.last, k.tp1) AS last, m.* EXCLUDE ({kl}, last)
        FROM state_keys1 k LEFT JOIN state_multi m ON {kon}""")
    if aggregate_mode:
        counted = "(cnt > 0)" if sink.aggregate.fn == "count" else "(nx > 0)"  # type: ignore[union-attr]
        want = "cnt" if sink.aggregate.fn == "count" else "agg"  # type: ignore[union-attr]
        found = "TRY_CAST(w.v0 AS DOUBLE)"
        clean_row = (f"k.single AND w.ver IS NULL AND k.bad = 0 AND {found} IS NOT NULL "
                     f"AND isfinite({found}) AND {want} IS NOT NULL AND abs({found} - {want}) <= "
                     f"{_CLOSE} * greatest(1, abs({found}), abs({want})) "
                     f"AND coalesce(k.mag, 0) <= 1e3 * greatest(1, abs({want}))")
        expected = f"CASE WHEN {counted} THEN CASE WHEN k.single THEN k.ctp1 ELSE k.ctp2 END END"
        no_row_clean = f"NOT {counted} AND k.bad = 0"
    else:
        e = "CASE WHEN k.single THEN k.e1 ELSE k.e2 END"
        same_value = " AND ".join(f"k.e1.{c} IS NOT DISTINCT FROM w.{c}" for c in values) or "TRUE"
        if values:
            unversioned = f"k.e1 IS NOT NULL AND NOT k.e1.d AND {same_value}"
        else:
            unversioned = "(k.e1 IS NOT NULL AND NOT k.e1.d) OR coalesce(k.fnon, FALSE)"
        versioned = (f"k.e1 IS NOT NULL AND w.ver = k.e1.o AND "
                     f"({'TRUE' if not values else f'k.e1.d OR ({same_value})'})")
        clean_row = f"k.single AND CASE WHEN w.ver IS NOT NULL THEN {versioned} ELSE {unversioned} END"
        expected = (f"CASE WHEN {e} IS NOT NULL AND NOT ({e}).d "
                    f"THEN struct_pack(t := ({e}).t, p := ({e}).p) END")
        no_row_clean = "k.single AND (k.e1 IS NULL OR k.e1.d OR coalesce(k.fdel, FALSE))"
    won = " AND ".join(f"w.{c} IS NOT DISTINCT FROM k.{c}" for c in keys)
    # The keys the rules judge: a row not certainly clean, a row of no known key, a key without a row
    # that may be missing, a key of several partitions (applied by timestamp: left to the rule).
    con.execute(f"""CREATE OR REPLACE TEMP TABLE state_judged AS
        SELECT {', '.join(f'w.{c} AS {c}' for c in keys)} FROM {rows} w LEFT JOIN state_keys k ON {won}
        WHERE k.single IS NULL OR NOT coalesce({clean_row}, FALSE)
        UNION
        SELECT {', '.join(f'k.{c}' for c in keys)} FROM state_keys k
        WHERE NOT k.single OR (NOT EXISTS (SELECT 1 FROM {rows} w WHERE {won}) AND NOT ({no_row_clean}))""")
    expected_keys: dict[TP, int] = {}
    for t, p, n in con.execute(f"SELECT x.t, x.p, count(*) FROM (SELECT {expected} AS x FROM state_keys k) "
                               "WHERE x IS NOT NULL GROUP BY ALL").fetchall():
        expected_keys[(t, p)] = n
    sink_rows = {(t, p): n for t, p, n in con.execute(
        f"SELECT k.last.t, k.last.p, count(*) FROM {rows} w JOIN state_keys k ON {won} GROUP BY ALL"
    ).fetchall()}
    [(checked,)] = con.execute("SELECT count(*) FROM state_judged").fetchall()
    judged_recs = recs if history is None or not checked else history(con, f"SELECT {kl} FROM state_judged")
    findings = _judge_some(con, sink, logs, bounds, judged_recs, rows, topic) if checked else []
    con.unregister("state_bounds")
    return Verdict(findings, expected_keys, sink_rows, int(checked))


def _judge_some(con: Any, sink: Sink, logs: Mapping[TP, PartitionLog], bounds: Mapping[TP, int], recs: str,
                rows: str, topic: str | None) -> list[Finding]:
    """The rules of eosctl.rules.upsert / aggregate on the keys of ``state_judged``: their whole histories."""
    shape = Shape.of(sink)
    keys, values = shape.keys, shape.values
    on = " AND ".join(f"x.{c} IS NOT DISTINCT FROM j.{c}" for c in keys)
    got = con.execute(f"SELECT x.* FROM {recs} x SEMI JOIN state_judged j ON {on} "
                      "ORDER BY x.t, x.p, x.o").fetchall()
    names = [d[0] for d in con.description]
    at = {n: i for i, n in enumerate(names)}
    ki, vi = [at[c] for c in keys], [at[c] for c in values]
    columns = ids.value_columns(sink)
    markers: dict[tuple[TP, int], list[tuple[int, int, int | None]]] = {}
    for tp, log in logs.items():
        for x in log.transactions:
            span = (x.first_offset, x.last_offset, x.marker_offset)
            markers.setdefault((tp, x.producer_id), []).append(span)
    records: list[StateRecord] = []
    for r in got:
        tp, offset, status = (r[at["t"]], r[at["p"]]), r[at["o"]], _STATUS[r[at["st"]]]
        v = tuple(r[i] for i in vi) if values else None
        shown = "null" if r[at["nv"]] else ids.value_text(columns, v) if v is not None else r[at["s"]]
        marker = next((mk for first, last, mk in markers.get((tp, r[at["pid"]]), ())
                       if first <= offset <= last), None) if status != COMMITTED else None
        records.append(StateRecord(tp[0], tp[1], offset, tuple(r[i] for i in ki), v, r[at["d"]], shown,
                                   status, r[at["ts"]], r[at["pid"]], r[at["ep"]], marker))
    row_got = con.execute(f"SELECT x.* FROM {rows} x SEMI JOIN state_judged j ON {on}").fetchall()
    rnames = [d[0] for d in con.description]
    rat = {n: i for i, n in enumerate(rnames)}
    rki, rvi = [rat[c] for c in keys], [rat[c] for c in values]
    state_rows = []
    for r in row_got:
        value = tuple(r[i] for i in rvi) if values else None
        text = ids.value_text(columns, value) if values else "a row (values not compared)"
        state_rows.append(StateRow(tuple(r[i] for i in rki), value, text, r[rat["ver"]]))
    key_columns = ids.key_columns(sink)

    def shown_key(k: Any) -> str:
        return ids.key_text(key_columns, k)

    if sink.mode == "aggregate" and sink.aggregate is not None:
        return aggregate.judge(records, state_rows, bounds, sink.aggregate.fn, field=sink.aggregate.field,
                               shown_key=shown_key, topic=topic).findings
    return judge(records, state_rows, bounds, shown_key=shown_key, topic=topic).findings
