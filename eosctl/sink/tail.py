"""A DuckDB sink read incrementally, for the live model: only the rows added since the last read, in
slices that each hold the file for a bounded time, never a whole-file copy.

DuckDB lets a writer in only while no reader has the file open, so every slice opens the file read-only,
reads at most what fits in ``slice_s`` and closes it again: the writer waits at most one slice, whatever
the sink's size. Rows are addressed by DuckDB's ``rowid``: a sink that only appends gives each new row the
next rowid, so rows [read so far, last rowid] are the new ones. A sink whose rows were deleted (or
rewritten) since is noticed (the row count no longer matches the rowids, or the last row read is not the
same row any more) and read again from rowid 0, still in slices. Updates of a row in place are not seen.

The state is what the ledger needs (eosctl.inspection.ledger.SinkSide): per partition its islands and summary,
the sink table's invalid rows, the offsets table (small: read whole at the end of each read).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from eosctl.base.errors import SinkError, first_line
from eosctl.cluster.model import TP
from eosctl.config.model import Sink
from eosctl.report.findings import Finding
from eosctl.sink.base import OffsetIsland, ReadPoint, SinkPartition, StoredOffset, shown
from eosctl.sink.duckdb import check_duckdb_file, connect_readonly, relations_of
from eosctl.sink.relation import DuckDBReader
from eosctl.sink.sql import ident

# Each slice keeps the writer out for about this long (under the 0.5 s the writer may wait).
SLICE_S = 0.4
# The first slice's rows, before their rate is known (grows at most 4x a slice while slices stay short):
# small, since a row of a sink of many partitions costs more than one of a few.
FIRST_CHUNK_ROWS = 1 << 13
# Between two slices the file is left free this long: closing and opening again at once leaves a writer that
# retries every few ms no window, and it then waits two slices or more (measured: 1.0 s for 0.54 s slices).
GAP_S = 0.05
# Rows per slice at most, whatever the measured rate: a slice sized by a fast moment runs long when the
# machine gets busy (measured: 0.4M-row slices holding the file 1.3 s at load 3); at ~1M rows/s this is
# ~0.25 s of work, so a slice stays under 0.5 s even at half speed.
MAX_CHUNK_ROWS = 1 << 18


@dataclass
class TailState:
    """What the rows read so far hold."""

    rows_read: int = 0  # rowids below this were read
    count: int = 0  # rows (not deleted) among them
    last_row: tuple | None = None  # (topic, partition, offset) at rowid rows_read - 1
    islands: dict[TP, list[OffsetIsland]] = field(default_factory=dict)
    bad_offsets: dict[TP, int] = field(default_factory=dict)  # rows whose offset is invalid, per partition
    invalid: dict[tuple, Finding] = field(default_factory=dict)  # sink-table invalid rows, merged
    stored: list[StoredOffset] | None = None
    offsets_invalid: list[Finding] = field(default_factory=list)


class DuckDBTail:
    """Keeps a DuckDB sink's ledger side current by reading only new rows, in bounded slices."""

    def __init__(self, sink: Sink, where: str = "sink", slice_s: float = SLICE_S,
                 on_rows: Callable[[DuckDBReader | None], None] | None = None,
                 first_chunk: int = FIRST_CHUNK_ROWS, max_chunk: int = MAX_CHUNK_ROWS) -> None:
        assert sink.duckdb is not None
        self.sink, self.where, self.slice_s = sink, where, slice_s
        # Called with a reader of each slice's new rows while the slice holds the file (the incremental
        # audit reads their keys there: auditors.incremental), and with None when the state starts over.
        self.on_rows = on_rows
        self.state = TailState()
        # Rows of the first slice, and of any slice at most (a batch audit holds the file longer than the
        # live model, in fewer slices: the audit's frozen copy holds it for the whole copy).
        self.chunk, self.max_chunk = first_chunk, max_chunk
        self.longest_hold_s = 0.0  # the longest a slice kept the file (the writer's longest wait)
        self.slices = 0
        self.restarts = 0  # reads from rowid 0 again after rows were deleted or rewritten
        self._relations: tuple | None = None

    def read(self, budget_s: float = 30.0) -> bool:
        """Read the rows added since the last read; True when caught up (then the state is the sink as
        of the last slice), False when ``budget_s`` ran out first (call again)."""
        deadline = time.monotonic() + budget_s
        first = True
        while True:
            done = self._slice(check=first)
            first = False
            if done:
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(GAP_S)

    def _slice(self, check: bool) -> bool:
        # Imported before the file is held (the first import of each takes seconds on a busy machine):
        # lazy: see docs/imports.md
        import duckdb  # noqa: F401
        import numpy  # noqa: F401
        import pandas  # noqa: F401  (DuckDB's Arrow export imports it on first use)
        import pyarrow  # noqa: F401
        import pyarrow.compute  # noqa: F401

        path = str(self.sink.duckdb)
        check_duckdb_file(path, self.where, name=shown(self.sink))
        conn = connect_readonly(path, self.where, table=self.sink.table, name=shown(self.sink))
        started = time.monotonic()  # the file is held from here (connecting may wait for the writer first)
        try:
            # One thread: a slice is small, and on a busy machine waiting for DuckDB's other threads to be
            # scheduled is what made slices long.
            conn.execute("SET threads = 1")
            table = ident(self.sink.table)
            [(total, top)] = conn.execute(f"SELECT count(*), coalesce(max(rowid) + 1, 0) FROM {table}"
                                          ).fetchall()
            s = self.state
            if check and not self._only_appended(conn, table, total, top):
                self.restarts += 1
                s = self.state = TailState()
                if self.on_rows is not None:
                    self.on_rows(None)
            lo, hi = s.rows_read, min(top, s.rows_read + self.chunk)
            if self._relations is None:  # checked once; a table changed since fails a query instead
                self._relations = relations_of(conn, self.sink, self.where)
            _, offsets, types, offsets_types = self._relations
            name = shown(self.sink)
            reader = DuckDBReader(conn, f"(SELECT * FROM {table} WHERE rowid >= {lo} AND rowid < {hi})",
                                    self.sink, name, offsets, ReadPoint("duckdb", name), types, offsets_types)
            rows_s = time.monotonic()
            if hi > lo:
                self._add(reader, conn, table, lo, hi)
            rows_s = time.monotonic() - rows_s
            caught_up = hi >= top
            if caught_up:
                s.stored = reader.stored_offsets()
                s.offsets_invalid = [f for f in reader.invalid_rows()
                                     if _detail(f).startswith("offsets table")]
        except SinkError:
            raise
        except Exception as e:
            raise SinkError(f"reading sink {shown(self.sink)} failed: {first_line(e)}") from None
        finally:
            conn.close()
            held = time.monotonic() - started
            self.longest_hold_s = max(self.longest_hold_s, held)
            self.slices += 1
        # Rows per slice: what the rows' own rate fits in half of what the slice's fixed part (opening the
        # file, the checks) leaves of slice_s; growing at most 4x a slice (one fast slice on a busy machine
        # says little about the next).
        if hi - lo == self.chunk and rows_s > 0:
            room = max(self.slice_s - (held - rows_s), self.slice_s / 2) / 2  # half: the next may be slower
            self.chunk = max(1024, min(4 * self.chunk, self.max_chunk, int((hi - lo) / rows_s * room)))
        return caught_up

    def _only_appended(self, conn, table: str, total: int, top: int) -> bool:
        """Were rows only added since the last read (no row read before deleted or rewritten)?"""
        s = self.state
        if s.rows_read == 0:
            return True
        if top < s.rows_read or total - s.count != top - s.rows_read:
            return False
        return _row_at(conn, self.sink, table, s.rows_read - 1) == s.last_row

    def _add(self, reader: DuckDBReader, conn, table: str, lo: int, hi: int) -> None:
        s = self.state
        offset_problem = self.sink.offset_column + " "
        for f in reader.invalid_rows():
            if _detail(f).startswith("offsets table"):
                continue
            _merge_invalid(s.invalid, f)
            if f.topic is not None and f.partition is not None and _detail(f).startswith(offset_problem):
                # a row of a valid partition with an invalid offset: in its summary, in no island
                tp = (f.topic, f.partition)
                s.bad_offsets[tp] = s.bad_offsets.get(tp, 0) + f.count
        [(count,)] = conn.execute(f"SELECT count(*) FROM {table} WHERE rowid >= {lo} AND rowid < {hi}"
                                  ).fetchall()
        last_row = _row_at(conn, self.sink, table, hi - 1)
        if self.on_rows is not None:
            self.on_rows(reader)
        for tp, islands in _islands(conn, reader).items():
            held = s.islands.get(tp)
            if held and islands[0].first > held[-1].last:
                _append(held, islands)  # the usual case: rows past the ones read (in place: O(new rows))
            else:
                s.islands[tp] = merge_islands(held or [], islands)
        s.count += count
        s.rows_read = hi
        s.last_row = last_row

    # --- what the ledger reads ----------------------------------------------------------------------

    def summaries(self) -> dict[TP, SinkPartition]:
        out = {}
        for tp in sorted(set(self.state.islands) | set(self.state.bad_offsets)):
            islands = self.state.islands.get(tp, [])
            bad = self.state.bad_offsets.get(tp, 0)
            if not islands and not bad:
                continue
            out[tp] = SinkPartition(
                tp[0], tp[1], sum(i.count * i.multiplicity for i in islands) + bad,
                sum(i.count for i in islands), islands[0].first if islands else None,
                islands[-1].last if islands else None,
                sum(i.count for i in islands if i.multiplicity > 1), bad)
        return out

    def invalid_rows(self) -> list[Finding]:
        return sorted([*self.state.invalid.values(), *self.state.offsets_invalid], key=lambda f: f.sort_key)


def _islands(conn, reader: DuckDBReader) -> dict[TP, list[OffsetIsland]]:
    """The slice's islands per partition: (topic, partition, offset, rows) counted in DuckDB, then cut into
    runs with numpy over all partitions at once (no per-partition Python: a slice of a 10k-partition sink
    holds rows of thousands of partitions; the SQL islands query sorts with a window, ~8x slower here)."""
    # lazy: see docs/imports.md
    import numpy as np
    import pyarrow.compute as pc

    sql = (f"SELECT t, p, o, count(*) AS m FROM {reader._rows} "
           "WHERE o IS NOT NULL AND t IS NOT NULL AND p IS NOT NULL GROUP BY t, p, o")
    table = conn.sql(sql).to_arrow_table()
    if not table.num_rows:
        return {}
    topics = pc.dictionary_encode(table.column("t")).combine_chunks()
    t, p = topics.indices.to_numpy(), table.column("p").to_numpy()
    o, m = table.column("o").to_numpy(), table.column("m").to_numpy()
    order = np.lexsort((o, p, t))
    t, p, o, m = t[order], p[order], o[order], m[order]
    cut = np.ones(len(o), dtype=bool)
    cut[1:] = (t[1:] != t[:-1]) | (p[1:] != p[:-1]) | (o[1:] != o[:-1] + 1) | (m[1:] != m[:-1])
    firsts = np.flatnonzero(cut)
    lasts = np.r_[firsts[1:] - 1, len(o) - 1]
    names = topics.dictionary.to_pylist()
    out: dict[TP, list[OffsetIsland]] = {}
    for ti, partition, first, last, rows in zip(t[firsts].tolist(), p[firsts].tolist(), o[firsts].tolist(),
                                                o[lasts].tolist(), m[firsts].tolist(), strict=True):
        topic = names[ti]
        out.setdefault((topic, partition), []).append(OffsetIsland(topic, partition, first, last, rows))
    return out


def _row_at(conn, sink: Sink, table: str, rowid: int) -> tuple | None:
    """(topic, partition, offset) of the row at ``rowid`` (None: deleted, or none)."""
    cols = ", ".join(ident(c) for c in (sink.topic_column, sink.partition_column, sink.offset_column))
    rows = conn.execute(f"SELECT {cols} FROM {table} WHERE rowid = {int(rowid)}").fetchall()
    return rows[0] if rows else None


def merge_islands(a: list[OffsetIsland], b: list[OffsetIsland]) -> list[OffsetIsland]:
    """The islands of both multisets of offsets together (multiplicities add), maximal and in order."""
    if not a or not b:
        return _maximal(a or b)
    if b[0].first > a[-1].last:  # the usual case: new rows past the ones read
        return _maximal([*a, *b])
    topic, partition = a[0].topic, a[0].partition
    events: dict[int, int] = {}
    for i in (*a, *b):
        events[i.first] = events.get(i.first, 0) + i.multiplicity
        events[i.last + 1] = events.get(i.last + 1, 0) - i.multiplicity
    out: list[OffsetIsland] = []
    level, start = 0, None
    for at in sorted(events):
        if level and start is not None:
            out.append(OffsetIsland(topic, partition, start, at - 1, level))
        level += events[at]
        start = at
    return _maximal(out)


def _maximal(islands: list[OffsetIsland]) -> list[OffsetIsland]:
    out: list[OffsetIsland] = []
    _append(out, islands)
    return out


def _append(into: list[OffsetIsland], islands: list[OffsetIsland]) -> None:
    """Append islands past the last of ``into``, joining neighbours of equal multiplicity."""
    for i in islands:
        last = into[-1] if into else None
        if last is not None and last.last + 1 == i.first and last.multiplicity == i.multiplicity:
            into[-1] = OffsetIsland(last.topic, last.partition, last.first, i.last, last.multiplicity)
        else:
            into.append(i)


def _detail(f: Finding) -> str:
    return f.detail or ""  # an invalid_row finding always has one


def _merge_invalid(into: dict[tuple, Finding], f: Finding) -> None:
    """Findings of one kind of bad row add up; the example shown is the smallest (as one query gives)."""
    what, _, example = _detail(f).partition(" (e.g. ")
    key = (f.topic, f.partition, what)
    old = into.get(key)
    if old is None:
        into[key] = f
        return
    old_example = _detail(old).partition(" (e.g. ")[2]
    detail = old.detail if not example or (old_example and old_example <= example) else f.detail
    into[key] = replace(old, count=old.count + f.count, detail=detail)
