"""Incident snapshots: one `eosctl.capture.Capture` frozen into a DuckDB file, and read back.

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
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import duckdb

from eosctl import __version__
from eosctl.capture import Capture, candidates
from eosctl.errors import EosctlError
from eosctl.findings import AuditReport
from eosctl.lag import LagSnapshot, PartitionLag
from eosctl.ledger import Ledger, LedgerFlag, PartitionLedger
from eosctl.model import TP, Kind, PartitionLog
from eosctl.opentxn import OpenTxn
from eosctl.producers import ProducerRow
from eosctl.sink.duckdb import connect_readonly, read_header
from eosctl.txns import Hanging, HangingReport, TxnInfo

FORMAT_VERSION = 1
STORAGE_VERSION = "v1.0.0"


Row = TxnInfo | ProducerRow | PartitionLag
JSON = dict[str, object]


def _codecs() -> dict[str, tuple[Callable[[Row], JSON], Callable[[JSON], Row]]]:
    """Per section: the live dataclass to a JSON-able dict, and back (tuples come back as lists)."""
    return {
        "transactions": (dataclasses.asdict, lambda d: TxnInfo(
            **{**d, "partitions": tuple(tuple(tp) for tp in d["partitions"])})),
        "producers": (dataclasses.asdict, lambda d: ProducerRow(**{**d, "epochs": tuple(d["epochs"])})),
        "lag": (dataclasses.asdict, lambda d: PartitionLag(
            **{**d, "open_txn": OpenTxn(**d["open_txn"]) if d["open_txn"] else None})),
    }


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
               ("last_stable_offset", "BIGINT"), ("checked_to", "BIGINT"), ("missing_offsets", "BIGINT")],
    "ledger_flags": [("topic", "VARCHAR"), ("partition", "INTEGER"), ("kind", "VARCHAR"),
                     ("first_offset", "BIGINT"), ("last_offset", "BIGINT"), ("count", "BIGINT"),
                     ("message", "VARCHAR")],
    "lag_groups": [("group_id", "VARCHAR"), ("state", "VARCHAR"), ("taken_ms", "BIGINT")],
    "hanging_check": [("max_age_s", "DOUBLE"), ("checked_at_ms", "BIGINT"), ("partitions_checked", "INTEGER"),
                      ("describe_producers", "VARCHAR"), ("producers_returned", "INTEGER")],
    "hanging_candidates": [("topic", "VARCHAR"), ("partition", "INTEGER"), ("producer_id", "BIGINT"),
                           ("producer_epoch", "INTEGER"), ("first_offset", "BIGINT"), ("age_s", "DOUBLE"),
                           ("rules", "VARCHAR[]"), ("lso", "BIGINT"), ("hw", "BIGINT"), ("blocked", "BIGINT"),
                           ("transactional_id", "VARCHAR"), ("coordinator_state", "VARCHAR"),
                           ("over_max_age", "BOOLEAN")],
    "audit": [("verdict", "VARCHAR"), ("fail_on", "VARCHAR[]"), ("findings", "BIGINT"),
              ("failing_findings", "BIGINT"), ("sink", "VARCHAR"), ("group_id", "VARCHAR"),
              ("elapsed_seconds", "DOUBLE"), ("origin", "VARCHAR"), ("data", "VARCHAR")],
    "audit_findings": [("topic", "VARCHAR"), ("partition", "INTEGER"), ("kind", "VARCHAR"),
                       ("first_offset", "BIGINT"), ("last_offset", "BIGINT"), ("count", "BIGINT"),
                       ("key", "VARCHAR"), ("detail", "VARCHAR")],
    "sections": [("name", "VARCHAR"), ("status", "VARCHAR"), ("rows", "BIGINT")],
}


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

    Any failure to write (disk full, permissions) is one EosctlError and leaves no file behind.
    """
    path = Path(path)
    check_writable(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.unlink(missing_ok=True)
    try:
        _write(snap, tmp)
        os.replace(tmp, path)
    except (duckdb.Error, OSError) as e:
        for leftover in (tmp, tmp.with_name(tmp.name + ".wal")):
            leftover.unlink(missing_ok=True)
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise EosctlError(f"cannot write snapshot {path}: {first}") from None


def _write(snap: Capture, tmp: Path) -> None:
    con = duckdb.connect()
    try:
        con.execute(f"ATTACH '{_sql_str(str(tmp))}' AS snap (STORAGE_VERSION '{STORAGE_VERSION}')")
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
        _insert(con, "ledger", [
            (led.pipeline, led.sink, led.group, led.scanned, p.topic, p.partition, p.rows, p.distinct_offsets,
             p.min_offset, p.max_offset, p.duplicate_rows, p.duplicate_offsets, p.stored_offset,
             p.committed_offset, p.log_start_offset, p.high_watermark, p.last_stable_offset, p.checked_to,
             p.missing_offsets) for p in parts])
        _insert(con, "ledger_flags", [(p.topic, p.partition, f.kind, f.first_offset, f.last_offset, f.count,
                                       f.message) for p in parts for f in p.flags])
        codecs = _codecs()
        for name in ("transactions", "producers"):
            _write_generic(con, name, [codecs[name][0](r) for r in getattr(snap, name)])
        lag_rows = snap.lag.partitions if snap.lag is not None else []
        _write_generic(con, "lag", [codecs["lag"][0](r) for r in lag_rows])
        _insert(con, "lag_groups", [(g, state, snap.lag.taken_ms)
                                    for g, state in (snap.lag.group_states if snap.lag else {}).items()])
        _write_hanging(con, snap)
        if snap.audit is not None:
            _write_audit(con, snap)
        sections = [(name, status, _section_rows(snap, name)) for name, status in snap.sections.items()]
        _insert(con, "sections", sections)
        con.execute("USE memory")
        con.execute("DETACH snap")
    finally:
        con.close()


def _write_hanging(con: duckdb.DuckDBPyConnection, snap: Capture) -> None:
    rep = snap.hanging
    _insert(con, "hanging_check", [] if rep is None else [
        (rep.max_age_s, snap.hanging_checked_ms, rep.partitions_checked, rep.describe_producers,
         rep.producers_returned)])
    found = set(rep.hanging) if rep is not None else set()
    _insert(con, "hanging_candidates", [
        (h.topic, h.partition, h.producer_id, h.producer_epoch, h.first_offset, h.age_s, list(h.rules), h.lso,
         h.hw, h.blocked, h.transactional_id, h.coordinator_state, h in found)
        for h in (candidates(snap) if rep is not None else [])])
    con.execute("CREATE VIEW hanging AS SELECT * EXCLUDE (over_max_age) FROM hanging_candidates "
                "WHERE over_max_age")


def _write_audit(con: duckdb.DuckDBPyConnection, snap: Capture) -> None:
    a = snap.audit
    _insert(con, "audit", [(a.verdict, list(a.fail_on), len(a.findings), len(a.failing), a.sink, a.group,
                            a.elapsed_seconds, snap.audit_origin or "run", a.to_json(indent=None))])
    _insert(con, "audit_findings", [(f.topic, f.partition, f.kind, f.first_offset, f.last_offset, f.count,
                                     f.key, f.detail) for f in a.findings])


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


def _sql_str(s: str) -> str:
    return s.replace("'", "''")


def _insert(con: duckdb.DuckDBPyConnection, table: str, rows: list[tuple]) -> None:
    schema = TABLES[table]
    cols = ", ".join(f'"{n}" {t}' for n, t in schema)
    con.execute(f'CREATE TABLE "{table}" ({cols})')
    if rows:
        con.executemany(f'INSERT INTO "{table}" VALUES ({", ".join("?" * len(schema))})', rows)


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
    if dicts:
        con.executemany(f'INSERT INTO "{table}" VALUES ({", ".join("?" * (len(scalars) + 1))})',
                        [[_scalar(d.get(k)) for k in scalars] + [json.dumps(d, default=str)] for d in dicts])


def _scalar(v: object) -> bool | int | float | str | None:
    return v if type(v) in _SQL_TYPES or v is None else None


# ---- loading ------------------------------------------------------------------------------------------


def load_snapshot(path: str | Path) -> Capture:
    """Read a snapshot file back into the live dataclasses (read-only; the file is never changed)."""
    how = "write one with `eosctl snapshot --out FILE`"
    if not os.path.isfile(path):
        raise EosctlError(f"{path}: no such snapshot file ({how})")
    if read_header(path) is None:
        raise EosctlError(f"{path} is not an eosctl snapshot file (not a DuckDB database); {how}")
    con = connect_readonly(path, where="snapshot", flag="--snapshot")
    try:
        tables = {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
        if "meta" not in tables or "sections" not in tables:
            raise EosctlError(f"{path} is a DuckDB file but not an eosctl snapshot (no meta table); "
                              "write one with `eosctl snapshot --out FILE`")
        # epoch_us: fetching a TIMESTAMPTZ into Python would need pytz.
        micros, bootstrap, pipeline, group, topics, version, fmt = con.execute(
            "SELECT epoch_us(captured_at), bootstrap, pipeline, group_id, topics, eosctl_version, "
            "format_version FROM meta").fetchone()
        captured_at = datetime.fromtimestamp(micros / 1e6, UTC)
        if fmt > FORMAT_VERSION:
            raise EosctlError(f"{path} is snapshot format {fmt}, newer than this eosctl {__version__} reads "
                              f"({FORMAT_VERSION}); upgrade eosctl")
        snap = Capture(captured_at=captured_at, bootstrap=bootstrap, pipeline=pipeline, group=group,
                        topics=list(topics or []), eosctl_version=version)
        snap.sections = dict(con.execute("SELECT name, status FROM sections").fetchall())
        for (data,) in con.execute("SELECT data FROM partition_logs ORDER BY topic, partition").fetchall():
            log = PartitionLog.from_dict(json.loads(data))
            snap.logs[(log.topic, log.partition)] = log
        rows = con.execute("SELECT * FROM ledger ORDER BY topic, partition").fetchall()
        if snap.sections.get("ledger") == "ok":
            flags: dict[TP, list[LedgerFlag]] = {}
            for t, p, *rest in con.execute("SELECT * FROM ledger_flags").fetchall():
                flags.setdefault((t, p), []).append(LedgerFlag(*rest))
            names = [n for n, _ in TABLES["ledger"]]
            parts = []
            head = None
            for row in rows:
                d = dict(zip(names, row, strict=True))
                head = d
                parts.append(PartitionLedger(**{k: d[k] for k in names[4:]},
                                             flags=flags.get((d["topic"], d["partition"]), [])))
            meta = head or {"pipeline": pipeline, "sink": "", "group_id": group, "scanned": False}
            snap.ledger = Ledger(meta["pipeline"], meta["sink"], meta["group_id"], meta["scanned"], parts)
        codecs = _codecs()
        for name in ("transactions", "producers", "lag"):
            if snap.sections.get(name) == "ok":
                data = [json.loads(d) for (d,) in con.execute(f'SELECT data FROM "{name}"').fetchall()]
                setattr(snap, name, [codecs[name][1](d) for d in data])
        if snap.sections.get("lag") == "ok":
            groups = con.execute("SELECT group_id, state, taken_ms FROM lag_groups").fetchall()
            taken = groups[0][2] if groups else int(snap.captured_at.timestamp() * 1000)
            snap.lag = LagSnapshot(taken, snap.lag, {g: state for g, state, _ in groups})
        if snap.sections.get("hanging") == "ok" and "hanging_check" in tables:
            _load_hanging(con, snap)
        if snap.sections.get("audit") == "ok" and "audit" in tables:
            data, snap.audit_origin = con.execute("SELECT data, origin FROM audit").fetchone()
            snap.audit = AuditReport.from_dict(json.loads(data))
    finally:
        con.close()
    return snap


def _load_hanging(con: duckdb.DuckDBPyConnection, snap: Capture) -> None:
    check = con.execute("SELECT max_age_s, checked_at_ms, partitions_checked, describe_producers, "
                        "producers_returned FROM hanging_check").fetchone()
    if check is None:
        return
    max_age_s, snap.hanging_checked_ms, checked, describe, returned = check
    found = []
    for row in con.execute(
            "SELECT topic, partition, producer_id, producer_epoch, first_offset, age_s, rules, lso, hw, "
            "transactional_id, coordinator_state, over_max_age FROM hanging_candidates "
            "ORDER BY topic, partition, first_offset, producer_id").fetchall():
        *head, rules, lso, hw, txid, state, over = row
        h = Hanging(*head, tuple(rules or ()), lso, hw, txid, state)
        snap.hanging_candidates.append(h)
        if over:
            found.append(h)
    snap.hanging = HangingReport(max_age_s, checked, found, returned, describe)
