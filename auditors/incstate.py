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
"""

from __future__ import annotations

import copyreg
import dataclasses
import functools
import io
import json
import pickle
from dataclasses import dataclass, field
from typing import Any

from eosctl.base.errors import EosctlError
from eosctl.base.files import shown
from eosctl.cluster import model

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
