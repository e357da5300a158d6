"""The incremental audit's state file: where the last verdict left off, in one DuckDB file of the user's
choosing (`eosctl audit --incremental STATE`, the exporter's `--audit-state`).

It holds what the pipeline was (its name, the cluster id, the topics and their topic ids, the sink and its
columns: a state of another pipeline is refused), when the last full audit ran, each partition's log scan
where it stopped (eosctl.cluster.logclassify.LogScan: open transactions still waiting for their marker go
on from there), the sink's rows read so far (eosctl.sink.tail.TailState: islands per partition, invalid
rows, the offsets table), the key_duplicate findings, and the key index: every sink row's key and place
(``key_index``: h, k, t, p, o and vh, the hash of its value where the content check compares values), so a
new row's key is compared with the old rows' without reading them again; ``pending_keys`` holds the places at
offsets not committed yet at the last verdict (at or past the LSO), whose keys the next run looks up again.
With the content check, ``records`` holds every record's key (and value) hash, leader epoch and whether it
is a marker (t, p, o, e, c, kh, vh: eosctl.cluster.recordkeys), and ``content`` each partition's content
findings, shifts and what the rows before a cut showed (auditors.incremental).

The scans and the tail's state are kept pickled; they are read back by an unpickler that builds only the
classes listed here (a state file from elsewhere can't make it run anything else).

The checks both incremental audits (auditors.incremental, auditors.stateinc) make of a state before going
on from it are here too: the file may be written (``previous``), it is this pipeline's (``belonging``), it
may be gone on from or a full audit is due (``full_reason``), and a kept scan may resume
(``still_the_log``); and the new state written in its place (``writing``).
"""

from __future__ import annotations

import copyreg
import dataclasses
import functools
import io
import json
import os
import pickle
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from eosctl.base.errors import EosctlError
from eosctl.base.files import check_output, shown, writing_output
from eosctl.cluster import model
from eosctl.sink import shown as shown_sink

if TYPE_CHECKING:
    from eosctl.config.model import Sink
    from eosctl.config.target import Target

FORMAT = "eosctl-audit-state"
VERSION = 2  # 2: the content check (records, content, key_index.vh)
_TABLE = "eosctl_audit_state"

# (module, name) of everything a state's pickles may build: the scan's and the tail's own classes.
_ALLOWED = {
    ("eosctl.cluster.logclassify", "LogScan"), ("eosctl.cluster.logclassify", "_OpenTxn"),
    *(("eosctl.cluster.model", n) for n in ("Batch", "OffsetRange", "Kind", "Transaction", "EpochBump",
                                             "ZombieWrite", "SequenceAnomaly", "ProducerState")),
    ("eosctl.cluster.wireanswers", "Offsets"),
    ("eosctl.rules.content", "Shift"), ("auditors.incremental", "Content"),
    ("eosctl.sink.tail", "TailState"), ("eosctl.sink.base", "OffsetIsland"),
    ("eosctl.sink.base", "StoredOffset"),
    *(("eosctl.report.findings", n) for n in ("Finding", "Cause", "TxnCause", "MarkerCause")),
    ("builtins", "set"), ("builtins", "frozenset"), ("copyreg", "_reconstructor"), ("builtins", "object"),
}


class _Unpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in _ALLOWED:
            raise pickle.UnpicklingError(f"{module}.{name} is not part of an audit state")
        return super().find_class(module, name)


@dataclass
class State:
    """One state file's content. ``meta``: JSON (identity, times, each partition's LSO at the verdict)."""

    meta: dict[str, Any]
    scans: dict[tuple[str, int], Any] = field(default_factory=dict)  # LogScan per partition
    tail: Any = None  # eosctl.sink.tail.TailState
    key_findings: list[Any] = field(default_factory=list)
    content: dict[tuple[str, int], Any] = field(default_factory=dict)  # auditors.incremental.Content each


def is_state(path: str) -> bool:
    """Whether ``path`` is a state file this module wrote (then a new state may replace it)."""
    try:
        with open(path, "rb") as f:
            head = f.read(16)
    except OSError:
        return False
    if b"DUCK" not in head:
        return False
    try:
        import duckdb  # lazy: see docs/imports.md

        with duckdb.connect(path, read_only=True) as con:
            rows = con.execute(f"SELECT value FROM {_TABLE} WHERE name = 'meta'").fetchall()
        return bool(rows) and json.loads(bytes(rows[0][0])).get("format") == FORMAT
    except Exception:  # noqa: BLE001 - any file DuckDB can't read as ours is not ours
        return False


def load(path: str, option: str) -> State:
    """The state in ``path``; one line (exit 2) when it is not one."""
    import duckdb  # lazy: see docs/imports.md

    not_ours = (f"{option} {shown(path)} is not an eosctl audit state file; name a new file (the first "
                f"incremental audit writes it) or one an earlier {option} wrote")
    try:
        with duckdb.connect(path, read_only=True) as con:
            rows = dict(con.execute(f"SELECT name, value FROM {_TABLE}").fetchall())
    except Exception:  # noqa: BLE001
        raise EosctlError(not_ours) from None
    try:
        meta = json.loads(bytes(rows["meta"]))
    except (KeyError, ValueError):
        raise EosctlError(not_ours) from None
    if meta.get("format") != FORMAT:
        raise EosctlError(not_ours)
    if meta.get("version") != VERSION:
        raise EosctlError(f"{option} {shown(path)} was written by another eosctl (state version "
                          f"{meta.get('version')}, this one reads {VERSION}); name a new file: a full audit "
                          "writes it")
    try:
        return State(meta, _loads(rows["scans"]), _loads(rows["tail"]), _loads(rows["key_findings"]),
                     _loads(rows["content"]))
    except Exception:  # noqa: BLE001 - a damaged state is refused in one line, never half-used
        raise EosctlError(f"{option} {shown(path)} is damaged; name a new file (a full audit writes it)"
                          ) from None


def create(con: Any) -> None:
    """The tables of a new state file, in the open connection ``con``."""
    con.execute(f"CREATE TABLE IF NOT EXISTS {_TABLE} (name VARCHAR, value BLOB)")
    # h: DuckDB's hash of k, what lookups join on (an integer join; every place of a key has its hash)
    for table in ("key_index", "pending_keys"):
        con.execute(f"CREATE TABLE IF NOT EXISTS {table} "
                    "(h UBIGINT, k VARCHAR, t VARCHAR, p INTEGER, o BIGINT, vh UBIGINT)")
    con.execute("CREATE TABLE IF NOT EXISTS records (t VARCHAR, p INTEGER, o BIGINT, e INTEGER, c BOOLEAN, "
                "kh UBIGINT, vh UBIGINT)")


@contextmanager
def writing(path: str, reads: tuple[str, ...], option: str, go_on: bool) -> Iterator[Any]:
    """A DuckDB connection to the new state: written beside ``path`` and put in its place when the block
    ends without an error (never one of ``reads``, never half a state), a copy of the last state where the
    run goes on from it (``go_on``), else new; its tables made either way."""
    import duckdb  # lazy: see docs/imports.md

    with writing_output(path, reads, False, option, also=(".wal",), ours=is_state) as tmp:
        if go_on:
            shutil.copyfile(path, tmp)
        con = duckdb.connect(tmp)
        try:
            create(con)
            con.execute("SET preserve_insertion_order = false")
            yield con
        finally:
            con.close()


def save(con: Any, state: State) -> None:
    """Write ``state`` (all but the key index, which the audit keeps in ``con`` itself)."""
    values = [("meta", json.dumps({**state.meta, "format": FORMAT, "version": VERSION}).encode()),
              ("scans", _dumps(state.scans)), ("tail", _dumps(state.tail)),
              ("key_findings", _dumps(state.key_findings)), ("content", _dumps(state.content))]
    con.execute(f"DELETE FROM {_TABLE}")
    con.executemany(f"INSERT INTO {_TABLE} VALUES (?, ?)", values)


def _dumps(value: Any) -> bytes:
    buf = io.BytesIO()
    p = pickle.Pickler(buf, protocol=pickle.HIGHEST_PROTOCOL)
    p.dispatch_table = _fast()
    p.dump(value)
    return buf.getvalue()


def _fast() -> dict[type, Any]:
    """The model's slotted dataclasses pickled as their constructor's arguments: pickle's own way for them
    calls dataclasses.fields() per object (a state of 10M offsets holds tens of thousands)."""
    table = dict(copyreg.dispatch_table)
    for cls in (model.Batch, model.OffsetRange, model.Transaction, model.EpochBump, model.ZombieWrite,
                model.SequenceAnomaly):
        names = tuple(f.name for f in dataclasses.fields(cls))
        table[cls] = functools.partial(_by_fields, names)
    return table


def _by_fields(names: tuple[str, ...], obj: Any) -> tuple[Any, tuple[Any, ...]]:
    return type(obj), tuple(getattr(obj, n) for n in names)


def _loads(data: Any) -> Any:
    return _Unpickler(io.BytesIO(bytes(data))).load()


def previous(path: str, reads: tuple[str, ...], option: str, sink_mode: str) -> State | None:
    """The state to go on from (None: no file yet), once ``path`` is known to be writable and never one of
    ``reads`` (by inode, whatever it holds); one line (exit 2) when it is no state or another sink mode's
    (a state sink's state holds its records, not an offsets sink's islands)."""
    check_output(path, reads, True, option)
    prev = load(path, option) if os.path.exists(path) else None
    was = prev.meta.get("sink_mode", "offsets") if prev is not None else sink_mode
    if was != sink_mode:
        raise EosctlError(f"{option} {shown(path)} was written for a sink of mode = {was!r}, this sink is "
                          f"mode = {sink_mode!r}: name another state file for it (a full audit writes it)")
    return prev


def belonging(prev: State | None, target: Target, sink: Sink, cluster_id: str | None,
              topic_ids: dict[str, str | None], path: str, option: str) -> dict[str, Any]:
    """What the state belongs to now (kept in its meta); one line when ``prev`` is another pipeline's,
    another cluster's or a recreated topic's."""
    now = {"pipeline": target.pipeline.name if target.pipeline else None, "cluster_id": cluster_id,
           "topics": sorted(target.topics), "topic_ids": topic_ids, "group": target.group,
           "sink": f"{shown_sink(sink)} ({sink.table})",
           "columns": [sink.topic_column, sink.partition_column, sink.offset_column, sink.key_column,
                       sink.order_column, sink.offsets_table]}
    if prev is None:
        return now
    was, where = prev.meta, f"{option} {shown(path)}"
    if was.get("cluster_id") != now["cluster_id"]:
        raise EosctlError(f"{where} was written for cluster {was.get('cluster_id')}, this is cluster "
                          f"{now['cluster_id']}: name another state file for this cluster")
    if any(was.get(key) != now[key] for key in ("pipeline", "topics", "sink", "columns", "group")):
        was_name = was.get("pipeline") or ",".join(was.get("topics") or [])
        raise EosctlError(f"{where} belongs to another pipeline ({was_name} into {was.get('sink')}); name "
                          "one state file per pipeline")
    for topic, tid in topic_ids.items():
        old = (was.get("topic_ids") or {}).get(topic)
        if old != tid:
            raise EosctlError(f"{where}: topic {topic} was deleted and created again since (topic id "
                              f"{old}, now {tid}); the state describes the old topic: name a new state file "
                              "(a full audit writes it)")
    return now


def full_reason(prev: State | None, full_every: float, content: str | None = None) -> str:
    """Why this run reads everything again ("": it goes on from ``prev``): no state yet, the content check
    changed (``content``: the mode it runs with now, None where the audit has none), or the last full
    audit is ``full_every`` seconds old."""
    if prev is None:
        return "no state yet"
    if content is not None and prev.meta.get("content", "off") != content:
        return "the content check was turned on or off (or its value column changed) since the last audit"
    if full_every > 0 and time.time() - float(prev.meta.get("full_at", 0)) >= full_every:
        return f"the last full audit is {full_every:g}s old or more (--full-every)"
    return ""


def still_the_log(scan: Any, o: Any) -> bool:
    """Whether a kept scan may go on (as the live model decides, eosctl.inspection.live): not truncated
    below what it read, and its log start unmoved (a full scan starts at the log start, and so must this)."""
    return o.high_watermark >= scan.end and o.log_start == scan.offsets.log_start
