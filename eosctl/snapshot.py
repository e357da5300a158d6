"""Incident snapshots: everything eosctl sees about a pipeline, frozen into one DuckDB file.

`capture()` reads (never writes) Kafka and the sink; `write_snapshot()` stores it; `load_snapshot()` gives
back the same dataclasses the live code returns (PartitionLog, Ledger, and the txns / producers / lag
rows), so the TUI opens a snapshot exactly like a live cluster. The file is written with DuckDB storage
version v1.0.0 so that older DuckDB releases can open an incident report too.

Tables (every offset column follows Kafka: *_offset / first / last inclusive; high_watermark, LSO,
scanned_to, next offsets exclusive):

  meta            one row: captured_at TIMESTAMPTZ, bootstrap, pipeline, group_id, topics (VARCHAR[]),
                  eosctl_version, format_version INTEGER
  sections        name (logs, transactions, producers, lag, hanging, ledger, and audit when one was
                  stored), status ('ok' or the one-line reason the section is empty, e.g. a broker without
                  ListTransactions), rows
  partition_logs  topic, partition, log_start_offset, high_watermark, last_stable_offset, scanned_from,
                  scanned_to, data_records, marker_records, aborted_records, open_records, hole_records,
                  transactions, producers, warnings (VARCHAR[]), data (PartitionLog.to_dict() as JSON text)
  log_ranges      topic, partition, first, last, kind (DATA|MARKER|ABORTED|OPEN|HOLE), producer_id,
                  producer_epoch
  log_transactions topic, partition, producer_id, producer_epoch, first_offset, last_offset, outcome
                  (COMMIT|ABORT|OPEN), marker_offset, data_records
  log_producers   topic, partition, producer_id, epochs (INTEGER[]), last_sequence, last_offset,
                  last_timestamp, batches, records, open_txn_first_offset, epoch_bumps, zombie_writes,
                  sequence_anomalies (counts)
  ledger          the ledger's per-partition columns (see eosctl.commands.ledger_cmd) minus flags, plus
                  pipeline, sink, group_id, scanned
  ledger_flags    topic, partition, kind, first_offset, last_offset, count, message
  transactions    eosctl.txns.TxnInfo: transactional_id, producer_id, producer_epoch, state, timeout_ms,
                  start_time_ms, coordinator_id, data (JSON, partitions included); filtered to the
                  pipeline's transactional_id_prefix
  producers       eosctl.producers.ProducerRow: topic, partition, producer_id, producer_epoch,
                  last_sequence, last_timestamp_ms, current_txn_start_offset, coordinator_epoch,
                  fencing_events, zombie_writes, data (JSON, epochs included)
  lag             eosctl.lag.PartitionLag: group, topic, partition, committed, log_start, lso, hw,
                  records_behind, records_behind_exact, oldest_unconsumed_ms, error, data (JSON,
                  open_txn included)
  lag_groups      group_id, state, taken_ms (the lag poll's time)
  hanging_check   one row: max_age_s DOUBLE (the --max-age the report used), checked_at_ms BIGINT (the
                  "now" every age_s is measured from), partitions_checked, describe_producers ('ok',
                  'unsupported' or the error), producers_returned
  hanging_candidates  eosctl.txns.Hanging for every transaction either hanging rule matches at ANY age
                  (the open transaction at each partition's LSO, and producers whose open transaction
                  their coordinator does not own): topic, partition, producer_id, producer_epoch,
                  first_offset, age_s DOUBLE, rules (VARCHAR[]), lso, hw, blocked, transactional_id,
                  coordinator_state, over_max_age BOOLEAN (age_s >= max_age_s)
  hanging         VIEW: the candidates with over_max_age, i.e. what `eosctl txns hanging --max-age`
                  would have reported at capture time
  audit           (only when an audit was stored) one row: verdict, fail_on (VARCHAR[]), findings,
                  failing_findings, sink, group_id, elapsed_seconds, origin ('run' or the report file
                  it was read from), data (eosctl.findings.AuditReport.to_json())
  audit_findings  kind, topic, partition, first_offset, last_offset, count, key, detail
  (transactions / producers / lag get one column per scalar field the rows actually carry: a column
  whose value is null in every row is absent; `data` always holds the complete row)

Why hanging candidates and not just the report: a snapshot is taken during an incident, when the
transaction that matters may be minutes old, younger than Kafka's 15-minute timeout. So capture runs the
rules with max-age 0 (every LSO-holding or coordinator-orphaned open transaction, with its age) and
records which of them pass the requested --max-age; `load_snapshot` returns that report as
`Snapshot.hanging` (an eosctl.txns.HangingReport, as `txns hanging` returns) and `hanging_at()` re-applies
another max-age offline. One difference from a live run at that max-age: `rules` lists every rule the
transaction matches regardless of age (its age_s is the older of the two, as live).

Older files without the hanging tables load with `hanging` None ("not checked"); the format version
stays 1 because every addition is a new table that older readers ignore.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from eosctl import __version__
from eosctl.config import Sink
from eosctl.errors import EosctlError, SinkError
from eosctl.model import Kind, PartitionLog
from eosctl.progress import Progress
from eosctl.txns import DEFAULT_MAX_AGE_S

FORMAT_VERSION = 1
STORAGE_VERSION = "v1.0.0"
TP = tuple[str, int]


@dataclass
class Snapshot:
    captured_at: datetime
    bootstrap: str
    pipeline: str | None
    group: str | None
    topics: list[str]
    eosctl_version: str = __version__
    logs: dict[TP, PartitionLog] = field(default_factory=dict)
    ledger: Any | None = None  # eosctl.ledger.Ledger
    transactions: list[Any] = field(default_factory=list)  # eosctl.txns.TxnInfo
    producers: list[Any] = field(default_factory=list)  # eosctl.producers.ProducerRow
    lag: Any | None = None  # eosctl.lag.LagSnapshot
    # The hanging rules at the requested max-age (eosctl.txns.HangingReport), every candidate at any age
    # (eosctl.txns.Hanging) and the time their ages are measured from; None / [] when not checked.
    hanging: Any | None = None
    hanging_candidates: list[Any] = field(default_factory=list)
    hanging_checked_ms: int | None = None
    audit: Any | None = None  # eosctl.findings.AuditReport, when one was stored with the snapshot
    audit_origin: str | None = None  # "run", or the JSON report file it was read from
    # Section name -> "ok", or the one-line reason it is empty (an older broker, no sink, ...).
    sections: dict[str, str] = field(default_factory=dict)


def capture(target: Any, sink: Sink | None = None, where: str = "sink", scan: bool = True,
            progress: Progress | None = None,
            max_age_s: float = DEFAULT_MAX_AGE_S) -> Snapshot:
    """Everything about the target's pipeline, read now. A failing section is recorded, not fatal.

    ``max_age_s`` is the hanging rule's threshold for `Snapshot.hanging`; younger open transactions are
    kept as candidates either way (see the module docs).
    """
    from eosctl.clients import Admins
    from eosctl.logscan import scan_partitions
    from eosctl.wire import WireClient

    pipe = target.pipeline
    output = [pipe.output_topic] if pipe and pipe.output_topic else []
    topics = list(dict.fromkeys([*target.topics, *output]))
    snap = Snapshot(captured_at=datetime.now(UTC), bootstrap=target.cluster.bootstrap_servers,
                    pipeline=pipe.name if pipe else None, group=target.group, topics=topics)
    # unreachable broker: one line, exit 2, no file
    with WireClient(target.cluster) as client, Admins(target.cluster) as admins:
        known = client.metadata(topics) if topics else {}
        tps = [(t, p) for t, parts in known.items() for p in sorted(parts)]
        snap.logs = scan_partitions(client, tps, progress=progress) if tps else {}
        snap.sections["logs"] = "ok" if topics else "not captured: no topics (pass --topic or a pipeline)"
        prefix = pipe.transactional_id_prefix if pipe else None
        for name, fn in (("transactions", lambda: _transactions(admins, prefix)),
                         ("producers", lambda: _producers(client, admins, tps, snap.logs)),
                         ("lag", lambda: _lag(client, admins, target.group, topics)),
                         ("hanging", lambda: _hanging(client, admins, list(known), max_age_s))):
            try:
                value = fn()
                if name == "hanging":
                    snap.hanging, snap.hanging_candidates, snap.hanging_checked_ms = value
                else:
                    setattr(snap, name, value)
                snap.sections[name] = "ok"
            except EosctlError as e:  # e.g. a broker without ListTransactions: keep the rest
                snap.sections[name] = f"not captured: {e}"
    if sink is None:
        snap.sections["ledger"] = "not captured: the pipeline has no sink"
    else:
        from eosctl.ledger import collect

        try:
            snap.ledger = collect(target.cluster, sink, target.topics, target.group, pipeline=snap.pipeline,
                                  where=where, scan=scan, logs=snap.logs)
            snap.sections["ledger"] = "ok"
        except SinkError as e:  # a locked sink must not cost the operator the rest of the snapshot
            snap.sections["ledger"] = f"not captured: {e}"
    return snap


def _transactions(admins: Any, prefix: str | None) -> list[Any]:
    from eosctl import txns

    rows = txns.list_transactions(admins.kafka)
    return [t for t in rows if not prefix or t.transactional_id.startswith(prefix)]


def _producers(client: Any, admins: Any, tps: list[TP], logs: dict[TP, PartitionLog]) -> list[Any]:
    """DescribeProducers where the broker answers, else the producer tables of the scans we have."""
    from eosctl import producers

    return producers.find(client, admins.kafka, tps, logs=logs).rows if tps else []


def _lag(client: Any, admins: Any, group: str | None, topics: list[str]) -> Any:
    from eosctl import lag

    return lag.poll(client, admins.confluent, groups=[group] if group else None, topics=topics or None)


def _hanging(client: Any, admins: Any, topics: list[str], max_age_s: float) -> tuple[Any, list[Any], int]:
    """(report at max_age_s, every candidate at any age, the time ages are measured from)."""
    import time

    from eosctl import txns

    if not topics:
        raise EosctlError("no topics to check (pass --topic or a pipeline)")
    now_ms = int(time.time() * 1000)
    every = txns.find_hanging(client, admins.kafka, topics, max_age_s=0.0, now_ms=now_ms)
    return over_max_age(every, max_age_s), every.hanging, now_ms


def over_max_age(report: Any, max_age_s: float) -> Any:
    """The report keeping only the findings at least ``max_age_s`` old (the rules' age threshold)."""
    return dataclasses.replace(report, max_age_s=max_age_s,
                               hanging=[h for h in report.hanging if _old_enough(h, max_age_s)])


def _old_enough(h: Any, max_age_s: float) -> bool:
    return h.age_s is not None and h.age_s >= max_age_s


def hanging_at(snap: Snapshot, max_age_s: float) -> Any:
    """The snapshot's hanging report re-applied with another max-age (None if hanging wasn't checked)."""
    if snap.hanging is None:
        return None
    every = dataclasses.replace(snap.hanging, hanging=_candidates(snap))
    return over_max_age(every, max_age_s)


def _candidates(snap: Snapshot) -> list[Any]:
    """Every candidate, plus any report finding missing from them (a hand-built Snapshot)."""
    extra = [h for h in (snap.hanging.hanging if snap.hanging else []) if h not in snap.hanging_candidates]
    return sorted([*snap.hanging_candidates, *extra], key=lambda h: (h.topic, h.partition, h.first_offset))


def _codecs() -> dict[str, tuple[Callable[[Any], dict], Callable[[dict], Any]]]:
    """Per section: the live dataclass to a JSON-able dict, and back (tuples come back as lists)."""
    from eosctl.lag import OpenTxn, PartitionLag
    from eosctl.producers import ProducerRow
    from eosctl.txns import TxnInfo

    return {
        "transactions": (dataclasses.asdict, lambda d: TxnInfo(
            **{**d, "partitions": tuple(tuple(tp) for tp in d["partitions"])})),
        "producers": (dataclasses.asdict, lambda d: ProducerRow(**{**d, "epochs": tuple(d["epochs"])})),
        "lag": (dataclasses.asdict, lambda d: PartitionLag(
            **{**d, "open_txn": OpenTxn(**d["open_txn"]) if d["open_txn"] else None})),
    }


# ---- writing ------------------------------------------------------------------------------------------

_FIXED_SCHEMAS = {
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


def write_snapshot(snap: Snapshot, path: str | Path) -> None:
    """Write the snapshot to a new DuckDB file (atomically: a crash leaves no half-written report).

    Any failure to write (disk full, permissions) is one EosctlError and leaves no file behind.
    """
    import duckdb

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


def _write(snap: Snapshot, tmp: Path) -> None:
    import duckdb

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
             p.last_timestamp, p.batches, p.records, p.open_txn_first_offset, len(p.epoch_bumps),
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


def _write_hanging(con: Any, snap: Snapshot) -> None:
    rep = snap.hanging
    _insert(con, "hanging_check", [] if rep is None else [
        (rep.max_age_s, snap.hanging_checked_ms, rep.partitions_checked, rep.describe_producers,
         rep.producers_returned)])
    found = set(rep.hanging) if rep is not None else set()
    _insert(con, "hanging_candidates", [
        (h.topic, h.partition, h.producer_id, h.producer_epoch, h.first_offset, h.age_s, list(h.rules), h.lso,
         h.hw, h.blocked, h.transactional_id, h.coordinator_state, h in found)
        for h in (_candidates(snap) if rep is not None else [])])
    con.execute("CREATE VIEW hanging AS SELECT * EXCLUDE (over_max_age) FROM hanging_candidates "
                "WHERE over_max_age")


def _write_audit(con: Any, snap: Snapshot) -> None:
    a = snap.audit
    _insert(con, "audit", [(a.verdict, list(a.fail_on), len(a.findings), len(a.failing), a.sink, a.group,
                            a.elapsed_seconds, snap.audit_origin or "run", a.to_json(indent=None))])
    _insert(con, "audit_findings", [(f.topic, f.partition, f.kind, f.first_offset, f.last_offset, f.count,
                                     f.key, f.detail) for f in a.findings])


def _section_rows(snap: Snapshot, name: str) -> int:
    if name == "logs":
        return len(snap.logs)
    if name == "ledger":
        return 0 if snap.ledger is None else len(snap.ledger.partitions)
    if name == "lag":
        return 0 if snap.lag is None else len(snap.lag.partitions)
    if name == "hanging":
        return 0 if snap.hanging is None else len(_candidates(snap))
    if name == "audit":
        return 0 if snap.audit is None else len(snap.audit.findings)
    return len(getattr(snap, name, []) or [])


def _sql_str(s: str) -> str:
    return s.replace("'", "''")


def _insert(con: Any, table: str, rows: list[tuple]) -> None:
    schema = _FIXED_SCHEMAS[table]
    cols = ", ".join(f'"{n}" {t}' for n, t in schema)
    con.execute(f'CREATE TABLE "{table}" ({cols})')
    if rows:
        con.executemany(f'INSERT INTO "{table}" VALUES ({", ".join("?" * len(schema))})', rows)


_SQL_TYPES = {bool: "BOOLEAN", int: "BIGINT", float: "DOUBLE", str: "VARCHAR"}


def _write_generic(con: Any, table: str, dicts: list[dict[str, Any]]) -> None:
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


def _scalar(v: Any) -> Any:
    return v if type(v) in _SQL_TYPES or v is None else None


# ---- loading ------------------------------------------------------------------------------------------


def load_snapshot(path: str | Path) -> Snapshot:
    """Read a snapshot file back into the live dataclasses (read-only; the file is never changed)."""
    from eosctl.ledger import Ledger, LedgerFlag, PartitionLedger
    from eosctl.sinkdb import connect_readonly, read_header

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
        snap = Snapshot(captured_at=captured_at, bootstrap=bootstrap, pipeline=pipeline, group=group,
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
            names = [n for n, _ in _FIXED_SCHEMAS["ledger"]]
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
            from eosctl.lag import LagSnapshot

            groups = con.execute("SELECT group_id, state, taken_ms FROM lag_groups").fetchall()
            taken = groups[0][2] if groups else int(snap.captured_at.timestamp() * 1000)
            snap.lag = LagSnapshot(taken, snap.lag, {g: state for g, state, _ in groups})
        if snap.sections.get("hanging") == "ok" and "hanging_check" in tables:
            _load_hanging(con, snap)
        if snap.sections.get("audit") == "ok" and "audit" in tables:
            from eosctl.findings import AuditReport

            data, snap.audit_origin = con.execute("SELECT data, origin FROM audit").fetchone()
            snap.audit = AuditReport.from_dict(json.loads(data))
    finally:
        con.close()
    return snap


def _load_hanging(con: Any, snap: Snapshot) -> None:
    from eosctl.txns import Hanging, HangingReport

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
