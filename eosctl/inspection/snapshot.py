"""Incident snapshots: one `eosctl.inspection.capture.Capture` frozen into a DuckDB file, and read back.

`write_snapshot()` stores a Capture; `load_snapshot()` gives back the same Capture (the same dataclasses the
live code returns), so the TUI opens a snapshot exactly like a live cluster. The file is written with
DuckDB storage version v1.0.0 so that older DuckDB releases can open an incident report too. Its tables
are documented in docs/snapshot.md (checked against `TABLES` below by a test).

Older files without the hanging tables load with `hanging` None ("not checked"); the format version
stays 1 because every addition is a new table that older readers ignore.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import duckdb

from eosctl import __version__
from eosctl.base.errors import EosctlError
from eosctl.base.files import replacing, shown
from eosctl.base.filevalidation import WrongType, check
from eosctl.base.gcpause import paused
from eosctl.cluster.model import TP, Kind, PartitionLog
from eosctl.inspection.capture import Capture, candidates
from eosctl.inspection.lag import LagSnapshot, PartitionLag
from eosctl.inspection.ledger import Ledger, LedgerFlag, PartitionLedger
from eosctl.report.compactjson import report_json  # a.to_json(indent=None), without a dict per finding
from eosctl.report.file import report_from_data
from eosctl.report.findings import AuditReport
from eosctl.report.rootcauses import root_rule
from eosctl.sink.duckdb import connect_readonly, read_header
from eosctl.sink.sql import literal
from eosctl.txn.opentxn import PRODUCER_CLOCK, OpenTxn
from eosctl.txn.pendingoffsets import Holder, PendingCommit
from eosctl.txn.producers import ProducerRow
from eosctl.txn.transactions import Hanging, HangingReport, TxnInfo

FORMAT_VERSION = 1
STORAGE_VERSION = "v1.0.0"


Row = TxnInfo | ProducerRow | PartitionLag
# A row as JSON: what json.loads gives back is unchecked, so its fields are Any until load_snapshot's
# check() has compared the dataclasses built from it with their annotations.
JSON = dict[str, Any]
_Row = TypeVar("_Row", TxnInfo, ProducerRow, PartitionLag)


def _encoders() -> dict[str, Callable[[Row], JSON]]:
    """Per section: the live dataclass to a JSON-able dict (_txn, _producer, _lag_row read it back)."""
    return {"transactions": dataclasses.asdict, "producers": dataclasses.asdict, "lag": _lag_dict}


def _txn(d: JSON) -> TxnInfo:
    return TxnInfo(**{**d, "partitions": tuple(tuple(tp) for tp in d["partitions"])})


def _producer(d: JSON) -> ProducerRow:
    return ProducerRow(**{**d, "epochs": tuple(d["epochs"])})  # tuples come back as lists


def _lag_row(d: JSON) -> PartitionLag:
    return PartitionLag(**{**d, "open_txn": OpenTxn(**d["open_txn"]) if d["open_txn"] else None,
                           "pending": _pending(d.get("pending"))})


def _lag_dict(row: Row) -> JSON:
    d = dataclasses.asdict(row)
    if d.get("pending"):  # a frozenset has no JSON: its partitions as a sorted list
        d["pending"]["partitions"] = sorted(d["pending"]["partitions"])
    return d


def _pending(d: JSON | None) -> PendingCommit | None:
    """A lag row's pending commit, from its JSON (None in files from before it was read)."""
    if not d:
        return None
    return PendingCommit(**{**d, "partitions": frozenset(tuple(tp) for tp in d["partitions"]),
                            "holders": tuple(Holder(**h) for h in d["holders"])})


# ---- writing ------------------------------------------------------------------------------------------

TABLES = {
    "partition_logs": [("topic", "VARCHAR"), ("partition", "INTEGER"), ("log_start_offset", "BIGINT"),
                       ("high_watermark", "BIGINT"), ("last_stable_offset", "BIGINT"),
                       ("scanned_from", "BIGINT"), ("scanned_to", "BIGINT"), ("data_records", "BIGINT"),
                       ("marker_records", "BIGINT"), ("aborted_records", "BIGINT"),
                       ("open_records", "BIGINT"),
                       ("hole_records", "BIGINT"), ("transactions", "BIGINT"), ("producers", "BIGINT"),
                       ("warnings", "VARCHAR[]"), ("data", "VARCHAR")],
    "log_ranges": [("topic", "VARCHAR"), ("partition", "INTEGER"), ("first", "BIGINT"), ("last", "BIGINT"),
                   ("kind", "VARCHAR"), ("producer_id", "BIGINT"), ("producer_epoch", "INTEGER")],
    "log_transactions": [("topic", "VARCHAR"), ("partition", "INTEGER"), ("producer_id", "BIGINT"),
                         ("producer_epoch", "INTEGER"), ("first_offset", "BIGINT"), ("last_offset", "BIGINT"),
                         ("outcome", "VARCHAR"), ("marker_offset", "BIGINT"), ("data_records", "BIGINT")],
    "log_producers": [("topic", "VARCHAR"), ("partition", "INTEGER"), ("producer_id", "BIGINT"),
                      ("epochs", "INTEGER[]"), ("last_sequence", "BIGINT"), ("last_offset", "BIGINT"),
                      ("last_timestamp", "BIGINT"), ("batches", "BIGINT"), ("records", "BIGINT"),
                      ("open_txn_first_offset", "BIGINT"), ("epoch_bumps", "INTEGER"),
                      ("zombie_writes", "INTEGER"), ("sequence_anomalies", "INTEGER")],
    "ledger": [("pipeline", "VARCHAR"), ("sink", "VARCHAR"), ("group_id", "VARCHAR"), ("scanned", "BOOLEAN"),
               ("topic", "VARCHAR"), ("partition", "INTEGER"), ("rows", "BIGINT"),
               ("distinct_offsets", "BIGINT"), ("min_offset", "BIGINT"), ("max_offset", "BIGINT"),
               ("duplicate_rows", "BIGINT"), ("duplicate_offsets", "BIGINT"), ("stored_offset", "BIGINT"),
               ("committed_offset", "BIGINT"), ("log_start_offset", "BIGINT"), ("high_watermark", "BIGINT"),
               ("last_stable_offset", "BIGINT"), ("checked_to", "BIGINT"), ("missing_offsets", "BIGINT"),
               ("commit_pending", "BOOLEAN"), ("pending_commit", "VARCHAR")],
    "ledger_flags": [("topic", "VARCHAR"), ("partition", "INTEGER"), ("kind", "VARCHAR"),
                     ("first_offset", "BIGINT"), ("last_offset", "BIGINT"), ("count", "BIGINT"),
                     ("message", "VARCHAR")],
    "lag_groups": [("group_id", "VARCHAR"), ("state", "VARCHAR"), ("taken_ms", "BIGINT"),
                   ("group_type", "VARCHAR")],
    "hanging_check": [("max_age_s", "DOUBLE"), ("checked_at_ms", "BIGINT"), ("partitions_checked", "INTEGER"),
                      ("describe_producers", "VARCHAR"), ("producers_returned", "INTEGER")],
    "hanging_candidates": [("topic", "VARCHAR"), ("partition", "INTEGER"), ("producer_id", "BIGINT"),
                           ("producer_epoch", "INTEGER"), ("first_offset", "BIGINT"), ("age_s", "DOUBLE"),
                           ("rules", "VARCHAR[]"), ("lso", "BIGINT"), ("hw", "BIGINT"), ("blocked", "BIGINT"),
                           ("transactional_id", "VARCHAR"), ("coordinator_state", "VARCHAR"),
                           ("over_max_age", "BOOLEAN"), ("age_source", "VARCHAR"), ("groups", "VARCHAR[]"),
                           ("two_phase", "BOOLEAN")],
    "audit": [("verdict", "VARCHAR"), ("fail_on", "VARCHAR[]"), ("findings", "BIGINT"),
              ("failing_findings", "BIGINT"), ("sink", "VARCHAR"), ("group_id", "VARCHAR"),
              ("elapsed_seconds", "DOUBLE"), ("origin", "VARCHAR"), ("data", "VARCHAR")],
    "audit_findings": [("topic", "VARCHAR"), ("partition", "INTEGER"), ("kind", "VARCHAR"),
                       ("first_offset", "BIGINT"), ("last_offset", "BIGINT"), ("count", "BIGINT"),
                       ("key", "VARCHAR"), ("detail", "VARCHAR"), ("root_cause", "VARCHAR"),
                       ("cause", "VARCHAR")],
    "log_records": [("topic", "VARCHAR"), ("partition", "INTEGER"), ("offset", "BIGINT"), ("kind", "VARCHAR"),
                    ("timestamp", "BIGINT"), ("compression", "VARCHAR"), ("key", "VARCHAR"),
                    ("value", "VARCHAR"), ("headers", "VARCHAR"), ("key_decoded", "VARCHAR"),
                    ("value_decoded", "VARCHAR")],
    "sections": [("name", "VARCHAR"), ("status", "VARCHAR"), ("rows", "BIGINT")],
}
# The record documents' fields (eosctl.inspection.records) a log_records row stores as JSON text.
_RECORD_JSON = ("headers", "key_decoded", "value_decoded")


def check_writable(path: str | Path) -> None:
    """EosctlError (one line) unless a snapshot can be written at ``path``; checked before the capture,
    which can take minutes, rather than failing at its end."""
    path = Path(path)
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.exists():
        raise EosctlError(f"cannot write {path}: directory {parent} does not exist; create it or choose "
                          "another --out")
    if not parent.is_dir():
        raise EosctlError(f"cannot write {path}: {parent} is not a directory; choose another --out")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise EosctlError(f"cannot write {path}: no permission to create files in {parent}; choose another "
                          "--out")
    if path.is_dir():
        raise EosctlError(f"cannot write {path}: it is a directory; choose another --out")


def write_snapshot(snap: Capture, path: str | Path) -> None:
    """Write the snapshot to a new DuckDB file (atomically: a crash leaves no half-written report).

    Any failure to write (disk full, permissions) is one EosctlError; it, Ctrl-C and SIGTERM leave no file
    behind.
    """
    path = Path(path)
    check_writable(path)
    try:
        with replacing(str(path), also=(".wal",)) as tmp:
            _write(snap, Path(tmp))
    except (duckdb.Error, OSError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise EosctlError(f"cannot write snapshot {path}: {first}") from None


def _write(snap: Capture, tmp: Path) -> None:
    con = duckdb.connect()
    try:
        con.execute(f"ATTACH {literal(str(tmp))} AS snap (STORAGE_VERSION '{STORAGE_VERSION}')")
        con.execute("USE snap")
        con.execute("CREATE TABLE meta (captured_at TIMESTAMPTZ, bootstrap VARCHAR, pipeline VARCHAR, "
                    "group_id VARCHAR, topics VARCHAR[], eosctl_version VARCHAR, format_version INTEGER)")
        con.execute("INSERT INTO meta VALUES (?, ?, ?, ?, ?, ?, ?)",
                    [snap.captured_at, snap.bootstrap, snap.pipeline, snap.group, snap.topics,
                     snap.eosctl_version, FORMAT_VERSION])
        logs = [snap.logs[tp] for tp in sorted(snap.logs)]
        _insert(con, "partition_logs", [
            (lg.topic, lg.partition, lg.log_start_offset, lg.high_watermark, lg.last_stable_offset,
             lg.scanned_from, lg.scanned_to, lg.count(Kind.DATA), lg.count(Kind.MARKER),
             lg.count(Kind.ABORTED),
             lg.count(Kind.OPEN), lg.count(Kind.HOLE), len(lg.transactions), len(lg.producers),
             list(lg.warnings), json.dumps({**lg.to_dict(), "batches": None}))
            for lg in logs])
        _insert(con, "log_ranges", [(lg.topic, lg.partition, r.first, r.last, r.kind.value, r.producer_id,
                                     r.producer_epoch) for lg in logs for r in lg.ranges])
        _insert(con, "log_transactions", [
            (lg.topic, lg.partition, t.producer_id, t.producer_epoch, t.first_offset, t.last_offset,
             t.outcome, t.marker_offset, t.data_records) for lg in logs for t in lg.transactions])
        _insert(con, "log_producers", [
            (lg.topic, lg.partition, p.producer_id, list(p.epochs), p.last_sequence, p.last_offset,
             p.last_timestamp, p.batches, p.records, p.open_txn_first_offset, p.bumps_total,
             p.zombie_total, p.anomaly_total) for lg in logs for p in lg.producers.values()])
        led = snap.ledger
        parts = led.partitions if led is not None else []
        _insert(con, "ledger", [] if led is None else _ledger_rows(led))
        _insert(con, "ledger_flags", [(p.topic, p.partition, f.kind, f.first_offset, f.last_offset, f.count,
                                       f.message) for p in parts for f in p.flags])
        _insert(con, "log_records", [
            (tp[0], tp[1], *(json.dumps(r[n]) if n in _RECORD_JSON and r[n] is not None else r[n]
                             for n, _ in TABLES["log_records"][2:]))
            for tp in sorted(snap.records) for r in snap.records[tp]])
        encoders = _encoders()
        for name in ("transactions", "producers"):
            _write_generic(con, name, [encoders[name](r) for r in getattr(snap, name)])
        lag = snap.lag
        _write_generic(con, "lag", [encoders["lag"](r) for r in (lag.partitions if lag is not None else [])])
        _insert(con, "lag_groups", [] if lag is None else [
            (g, state, lag.taken_ms, lag.group_types.get(g)) for g, state in lag.group_states.items()])
        _write_hanging(con, snap)
        if snap.audit is not None:
            with paused():  # a row per finding, no cycles among them (eosctl.base.gcpause)
                _write_audit(con, snap.audit, snap.audit_origin)
        sections = [(name, status, _section_rows(snap, name)) for name, status in snap.sections.items()]
        _insert(con, "sections", sections)
        con.execute("USE memory")
        con.execute("DETACH snap")
    finally:
        con.close()


def _ledger_rows(led: Ledger) -> list[tuple]:
    pending = None if led.pending_commit is None else json.dumps(led.pending_commit)
    return [(led.pipeline, led.sink, led.group, led.scanned, p.topic, p.partition, p.rows, p.distinct_offsets,
             p.min_offset, p.max_offset, p.duplicate_rows, p.duplicate_offsets, p.stored_offset,
             p.committed_offset, p.log_start_offset, p.high_watermark, p.last_stable_offset, p.checked_to,
             p.missing_offsets, p.commit_pending, pending) for p in led.partitions]


def _write_hanging(con: duckdb.DuckDBPyConnection, snap: Capture) -> None:
    rep = snap.hanging
    _insert(con, "hanging_check", [] if rep is None else [
        (rep.max_age_s, snap.hanging_checked_ms, rep.partitions_checked, rep.describe_producers,
         rep.producers_returned)])
    found = set(rep.hanging) if rep is not None else set()
    _insert(con, "hanging_candidates", [
        (h.topic, h.partition, h.producer_id, h.producer_epoch, h.first_offset, h.age_s, list(h.rules), h.lso,
         h.hw, h.blocked, h.transactional_id, h.coordinator_state, h in found, h.age_source, list(h.groups),
         h.two_phase)
        for h in (candidates(snap) if rep is not None else [])])
    con.execute("CREATE VIEW hanging AS SELECT * EXCLUDE (over_max_age) FROM hanging_candidates "
                "WHERE over_max_age")


def _write_audit(con: duckdb.DuckDBPyConnection, a: AuditReport, origin: str | None) -> None:
    _insert(con, "audit", [(a.verdict, list(a.fail_on), len(a.findings), len(a.failing), a.sink, a.group,
                            a.elapsed_seconds, origin or "run", report_json(a))])
    # Column by column: a tuple per finding, then one list per column of them, cost as much again.
    fs = a.findings
    _insert_columns(con, "audit_findings", [
        [f.topic for f in fs], [f.partition for f in fs], [f.kind for f in fs], [f.first_offset for f in fs],
        [f.last_offset for f in fs], [f.count for f in fs], [f.key for f in fs], [f.detail for f in fs],
        [root_rule(f) for f in fs], [None if f.cause is None else f.cause.summary for f in fs]])


def _section_rows(snap: Capture, name: str) -> int:
    if name == "logs":
        return len(snap.logs)
    if name == "ledger":
        return 0 if snap.ledger is None else len(snap.ledger.partitions)
    if name == "lag":
        return 0 if snap.lag is None else len(snap.lag.partitions)
    if name == "hanging":
        return 0 if snap.hanging is None else len(candidates(snap))
    if name == "audit":
        return 0 if snap.audit is None else len(snap.audit.findings)
    return len(getattr(snap, name, []) or [])


def _insert(con: duckdb.DuckDBPyConnection, table: str, rows: list[tuple]) -> None:
    _insert_columns(con, table, [[r[i] for r in rows] for i in range(len(TABLES[table]))])


def _insert_columns(con: duckdb.DuckDBPyConnection, table: str, columns: list[list]) -> None:
    """_insert, given the rows' columns."""
    cols = ", ".join(f'"{n}" {t}' for n, t in TABLES[table])
    con.execute(f'CREATE TABLE "{table}" ({cols})')
    _bulk(con, table, columns)


def _bulk(con: duckdb.DuckDBPyConnection, table: str, columns: list[list]) -> None:
    """Insert the rows (given column by column) through one Arrow table: executemany costs ~8 ms a row
    into an attached file (100k audit findings took minutes); DuckDB casts each column to the table's
    type."""
    if not columns or not columns[0]:
        return
    import pyarrow as pa  # lazy: see docs/imports.md

    try:
        data = pa.table({f"c{i}": pa.array(col) for i, col in enumerate(columns)})
    except (pa.ArrowInvalid, pa.ArrowTypeError):  # a column of mixed Python types: row by row
        con.executemany(f'INSERT INTO "{table}" VALUES ({", ".join("?" * len(columns))})',
                        list(zip(*columns, strict=True)))
        return
    con.register("eosctl_rows", data)
    try:
        con.execute(f'INSERT INTO "{table}" SELECT * FROM eosctl_rows')
    finally:
        con.unregister("eosctl_rows")


_SQL_TYPES = {bool: "BOOLEAN", int: "BIGINT", float: "DOUBLE", str: "VARCHAR"}


def _write_generic(con: duckdb.DuckDBPyConnection, table: str, dicts: list[JSON]) -> None:
    """One column per scalar field of the rows' dataclass, plus `data` (the whole row as JSON)."""
    scalars: dict[str, str] = {}
    for d in dicts:
        for k, v in d.items():
            if type(v) in _SQL_TYPES and k not in scalars and k != "data":
                scalars[k] = _SQL_TYPES[type(v)]
    cols = [*(f'"{k}" {t}' for k, t in scalars.items()), "data VARCHAR"]
    con.execute(f'CREATE TABLE "{table}" ({", ".join(cols)})')
    _bulk(con, table, [*([_scalar(d.get(k)) for d in dicts] for k in scalars),
                       [json.dumps(d, default=str) for d in dicts]])


def _scalar(v: object) -> bool | int | float | str | None:
    # Exactly these types (type(), not isinstance: an enum member is no column of its own); isinstance
    # only tells the type checker so.
    return v if type(v) in _SQL_TYPES and isinstance(v, bool | int | float | str) else None


# ---- loading ------------------------------------------------------------------------------------------


# The tables each section needs when its status is "ok" (meta and sections: always). Files from before the
# hanging check have no hanging tables: they load with hanging None, "not checked".
SECTION_TABLES = {
    "logs": ("partition_logs",), "ledger": ("ledger", "ledger_flags"), "transactions": ("transactions",),
    "producers": ("producers",), "lag": ("lag", "lag_groups"), "audit": ("audit",),
}
_DAMAGE = (duckdb.Error, ValueError, TypeError, KeyError, AttributeError, IndexError, OverflowError,
           RecursionError)


def load_snapshot(path: str | Path, notes: list[str] | None = None) -> Capture:
    """Read a snapshot file back into the live dataclasses (read-only; the file is never changed).

    Everything read is checked first: a table or column missing, a value of the wrong type, JSON that
    does not parse or does not fit its dataclass is one EosctlError naming the table (and field). The
    stored audit's verdict is recomputed from its findings (see reportfile.report_from_data); a
    disagreement is appended to ``notes``.
    """
    how = "write one with `eosctl snapshot --out FILE`"
    name = shown(str(path))
    if not os.path.isfile(path):
        raise EosctlError(f"{name}: no such snapshot file ({how})")
    if read_header(path) is None:
        raise EosctlError(f"{name} is not an eosctl snapshot file (not a DuckDB database); {how}")
    con = connect_readonly(path, where="snapshot", flag="--snapshot")
    try:
        columns: dict[str, set[str]] = {}
        for table, column in con.execute("SELECT table_name, column_name FROM information_schema.columns "
                                         "WHERE table_schema = 'main'").fetchall():
            columns.setdefault(table, set()).add(column)
        if "meta" not in columns or "sections" not in columns:
            raise EosctlError(f"{name} is a DuckDB file but not an eosctl snapshot (no meta table); {how}")
        snap = _load(con, columns, name, notes)
        audit, snap.audit = snap.audit, None  # checked already (report_from_data): not twice at 100k
        check(snap, "snapshot")
        snap.audit = audit
    except WrongType as e:
        raise EosctlError(f"{name} is a damaged snapshot: {e}; take a new one with `eosctl snapshot`"
                          ) from None
    finally:
        con.close()
    return snap


@contextmanager
def _reading(name: str, table: str) -> Iterator[None]:
    """Whatever a damaged table raises while it is read, as one EosctlError naming the table."""
    try:
        yield
    except _DAMAGE as e:
        if isinstance(e, EosctlError):
            raise
        why = "nested too deeply" if isinstance(e, RecursionError) else (
            str(e).strip().splitlines()[0][:200] if str(e).strip() else type(e).__name__)
        raise EosctlError(f"{name} is a damaged snapshot: table {table}: {why}; take a new one with "
                          "`eosctl snapshot`") from None


def _load(con: duckdb.DuckDBPyConnection, columns: dict[str, set[str]], name: str,
          notes: list[str] | None) -> Capture:
    with _reading(name, "meta"):
        wanted = ["captured_at", "bootstrap", "pipeline", "group_id", "topics", "eosctl_version",
                  "format_version"]
        _need(columns, "meta", wanted)
        # epoch_us: fetching a TIMESTAMPTZ into Python would need pytz.
        row = con.execute(f"SELECT epoch_us(captured_at), {', '.join(wanted[1:])} FROM meta").fetchone()
        if row is None:
            raise ValueError("no row")
        micros, bootstrap, pipeline, group, topics, version, fmt = row
        captured_at = datetime.fromtimestamp(micros / 1e6, UTC)
        if not isinstance(topics, list | None):
            raise ValueError(f"topics: expected a list, got {type(topics).__name__}")
        if fmt > FORMAT_VERSION:
            raise EosctlError(f"{name} is snapshot format {fmt}, newer than this eosctl {__version__} reads "
                              f"({FORMAT_VERSION}); upgrade eosctl")
        snap = Capture(captured_at=captured_at, bootstrap=bootstrap, pipeline=pipeline, group=group,
                       topics=list(topics or []), eosctl_version=version)
    with _reading(name, "sections"):
        _need(columns, "sections", ["name", "status"])
        snap.sections = dict(con.execute("SELECT name, status FROM sections").fetchall())
        for section, status in snap.sections.items():
            for table in SECTION_TABLES.get(section, ()) if status == "ok" else ():
                if table not in columns:
                    raise ValueError(f"section {section} is ok but its table {table} is missing")
    if snap.sections.get("logs") == "ok":
        with _reading(name, "partition_logs"):
            _need(columns, "partition_logs", ["topic", "partition", "data"])
            query = "SELECT data FROM partition_logs ORDER BY topic, partition"
            for (data,) in con.execute(query).fetchall():
                log = PartitionLog.from_dict(json.loads(data))
                snap.logs[(log.topic, log.partition)] = log
    if snap.sections.get("ledger") == "ok":
        with _reading(name, "ledger"):
            # commit_pending and pending_commit came later: older files have the rest.
            _need(columns, "ledger", [n for n, _ in TABLES["ledger"]][:-2])
            names = [n for n, _ in TABLES["ledger"] if n in columns["ledger"]]
            _need(columns, "ledger_flags", [n for n, _ in TABLES["ledger_flags"]])
            flags: dict[TP, list[LedgerFlag]] = {}
            flag_names = ", ".join(f'"{n}"' for n, _ in TABLES["ledger_flags"])
            for t, p, *rest in con.execute(f"SELECT {flag_names} FROM ledger_flags").fetchall():
                flags.setdefault((t, p), []).append(LedgerFlag(*rest))
            parts = []
            head = None
            cols = ", ".join(f'"{n}"' for n in names)
            for row in con.execute(f"SELECT {cols} FROM ledger ORDER BY topic, partition").fetchall():
                d = dict(zip(names, row, strict=True))
                head = d
                held = d.pop("pending_commit", None)
                parts.append(PartitionLedger(**{k: d[k] for k in names[4:] if k != "pending_commit"},
                                             flags=flags.get((d["topic"], d["partition"]), [])))
                parts[-1].commit_pending = bool(parts[-1].commit_pending)
                d["pending_commit"] = json.loads(held) if held else None
            meta = head or {"pipeline": pipeline, "sink": "", "group_id": group, "scanned": False}
            snap.ledger = Ledger(meta["pipeline"], meta["sink"], meta["group_id"], meta["scanned"], parts,
                                 pending_commit=meta.get("pending_commit"))
    if snap.sections.get("transactions") == "ok":
        snap.transactions = _rows(con, columns, name, "transactions", _txn)
    if snap.sections.get("producers") == "ok":
        snap.producers = _rows(con, columns, name, "producers", _producer)
    if snap.sections.get("lag") == "ok":
        lag_rows = _rows(con, columns, name, "lag", _lag_row)
        with _reading(name, "lag_groups"):
            _need(columns, "lag_groups", ["group_id", "state", "taken_ms"])
            # group_type came later: older files have none.
            kind = "group_type" if "group_type" in columns["lag_groups"] else "NULL"
            groups = con.execute(f"SELECT group_id, state, taken_ms, {kind} FROM lag_groups").fetchall()
            taken = groups[0][2] if groups else int(snap.captured_at.timestamp() * 1000)
            snap.lag = LagSnapshot(taken, lag_rows, {g: state for g, state, _, _ in groups},
                                   {g: t for g, _, _, t in groups if t})
    if snap.sections.get("hanging") == "ok" and "hanging_check" in columns:
        with _reading(name, "hanging_candidates"):
            _need(columns, "hanging_check", [n for n, _ in TABLES["hanging_check"]])
            # age_source, groups and two_phase came later: older files have the rest.
            _need(columns, "hanging_candidates", [n for n, _ in TABLES["hanging_candidates"]][:-3])
            _load_hanging(con, snap)
    if "log_records" in columns:  # files from before `snapshot --records` have none
        with _reading(name, "log_records"):
            names = [n for n, _ in TABLES["log_records"]]
            _need(columns, "log_records", names)
            cols = ", ".join(f'"{n}"' for n in names)
            for row in con.execute(f'SELECT {cols} FROM log_records ORDER BY topic, partition, "offset"'
                                   ).fetchall():
                d = dict(zip(names, row, strict=True))
                for n in _RECORD_JSON:
                    d[n] = json.loads(d[n]) if d[n] is not None else None
                topic, partition = d.pop("topic"), d.pop("partition")
                if not isinstance(d["headers"], list):
                    raise ValueError("headers: expected a JSON list")
                snap.records.setdefault((topic, partition), []).append(d)
    if snap.sections.get("audit") == "ok":
        with _reading(name, "audit"):
            _need(columns, "audit", ["data", "origin"])
            row = con.execute("SELECT data, origin FROM audit").fetchone()
            if row is None:
                raise ValueError("no row")
            data, snap.audit_origin = row
            snap.audit = report_from_data(json.loads(data), notes)
    return snap


def _rows(con: duckdb.DuckDBPyConnection, columns: dict[str, set[str]], name: str, section: str,
          decode: Callable[[JSON], _Row]) -> list[_Row]:
    """A generic section's rows (_write_generic), back as its dataclass."""
    with _reading(name, section):
        _need(columns, section, ["data"])
        data = [json.loads(d) for (d,) in con.execute(f'SELECT data FROM "{section}"').fetchall()]
        return [decode(d) for d in data]


def _need(columns: dict[str, set[str]], table: str, names: list[str]) -> None:
    if table not in columns:
        raise ValueError("the table is missing")
    missing = [n for n in names if n not in columns[table]]
    if missing:
        raise ValueError(f"no column {missing[0]}")


def _load_hanging(con: duckdb.DuckDBPyConnection, snap: Capture) -> None:
    check = con.execute("SELECT max_age_s, checked_at_ms, partitions_checked, describe_producers, "
                        "producers_returned FROM hanging_check").fetchone()
    if check is None:
        return
    max_age_s, snap.hanging_checked_ms, checked, describe, returned = check
    found = []
    # Files written before age_source existed: their ages came from the records' timestamps.
    columns = {c for (c,) in con.execute("SELECT column_name FROM information_schema.columns "
                                         "WHERE table_name = 'hanging_candidates'").fetchall()}
    source = "age_source" if "age_source" in columns else f"'{PRODUCER_CLOCK}'"
    groups = "groups" if "groups" in columns else "NULL"
    two_phase = "two_phase" if "two_phase" in columns else "false"
    for row in con.execute(
            "SELECT topic, partition, producer_id, producer_epoch, first_offset, age_s, rules, lso, hw, "
            f"transactional_id, coordinator_state, over_max_age, {source}, {groups}, {two_phase} "
            "FROM hanging_candidates "
            "ORDER BY topic, partition, first_offset, producer_id").fetchall():
        (topic, partition, pid, epoch, first, age, rules, lso, hw, txid, state, over, age_source, named,
         prepared) = row
        for what, value in (("rules", rules), ("groups", named)):
            if not isinstance(value, list | None):
                raise ValueError(f"{what}: expected a list, got {type(value).__name__}")
        h = Hanging(topic, partition, pid, epoch, first, age, tuple(rules or ()), lso, hw, txid, state,
                    age_source, tuple(named or ()), bool(prepared))
        snap.hanging_candidates.append(h)
        if over:
            found.append(h)
    blocking = [h for h in snap.hanging_candidates if h not in found and "lso" in h.rules
                and h.lso == h.first_offset]
    snap.hanging = HangingReport(max_age_s, checked, found, returned, describe, blocking=blocking)
