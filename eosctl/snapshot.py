"""Incident snapshots: everything eosctl sees about a pipeline, frozen into one DuckDB file.

`capture()` reads (never writes) Kafka and the sink; `write_snapshot()` stores it; `load_snapshot()` gives
back the same dataclasses the live code returns (PartitionLog, Ledger, and the txns / producers / lag
rows), so the TUI opens a snapshot exactly like a live cluster. The file is written with DuckDB storage
version v1.0.0 so that older DuckDB releases can open an incident report too.

Tables (every offset column follows Kafka: *_offset / first / last inclusive; high_watermark, LSO,
scanned_to, next offsets exclusive):

  meta            one row: captured_at TIMESTAMPTZ, bootstrap, pipeline, group_id, topics (VARCHAR[]),
                  eosctl_version, format_version INTEGER
  sections        name (logs, transactions, producers, lag, ledger), status ('ok' or the one-line reason
                  the section is empty, e.g. a broker without ListTransactions), rows
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
  (transactions / producers / lag get one column per scalar field the rows actually carry: a column
  whose value is null in every row is absent; `data` always holds the complete row)
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
    # Section name -> "ok", or the one-line reason it is empty (an older broker, no sink, ...).
    sections: dict[str, str] = field(default_factory=dict)


def capture(target: Any, sink: Sink | None = None, where: str = "sink", scan: bool = True,
            progress: Callable[[int, int], None] | None = None) -> Snapshot:
    """Everything about the target's pipeline, read now. A failing section is recorded, not fatal."""
    from eosctl.logscan import scan_partitions
    from eosctl.wire import WireClient

    pipe = target.pipeline
    output = [pipe.output_topic] if pipe and pipe.output_topic else []
    topics = list(dict.fromkeys([*target.topics, *output]))
    snap = Snapshot(captured_at=datetime.now(UTC), bootstrap=target.cluster.bootstrap_servers,
                    pipeline=pipe.name if pipe else None, group=target.group, topics=topics)
    with WireClient(target.cluster) as client:  # unreachable broker: one line, exit 2, no file
        known = client.metadata(topics) if topics else {}
        tps = [(t, p) for t, parts in known.items() for p in sorted(parts)]
        snap.logs = scan_partitions(client, tps, progress=progress) if tps else {}
        snap.sections["logs"] = "ok" if topics else "not captured: no topics (pass --topic or a pipeline)"
        prefix = pipe.transactional_id_prefix if pipe else None
        for name, fn in (("transactions", lambda: _transactions(target.cluster, prefix)),
                         ("producers", lambda: _producers(target.cluster, tps, snap.logs)),
                         ("lag", lambda: _lag(client, target.cluster, target.group, topics))):
            try:
                setattr(snap, name, fn())
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


def _transactions(cluster: Any, prefix: str | None) -> list[Any]:
    from eosctl import txns

    admin = txns.admin_client(cluster)
    try:
        rows = txns.list_transactions(admin)
    finally:
        admin.close()
    return [t for t in rows if not prefix or t.transactional_id.startswith(prefix)]


def _producers(cluster: Any, tps: list[TP], logs: dict[TP, PartitionLog]) -> list[Any]:
    """DescribeProducers where the broker answers, else the producer tables of the scans we have."""
    from eosctl import producers, txns

    admin = txns.admin_client(cluster)
    try:
        answer, _ = txns.describe_producers(admin, tps)
    finally:
        admin.close()
    rows = [producers.from_describe(tp, p) for tp in tps for p in answer.get(tp, [])]
    return rows or [r for tp in tps if tp in logs for r in producers.from_log(logs[tp])]


def _lag(client: Any, cluster: Any, group: str | None, topics: list[str]) -> Any:
    from eosctl import lag

    return lag.poll(client, lag.confluent_admin(cluster), groups=[group] if group else None,
                    topics=topics or None)


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
    "sections": [("name", "VARCHAR"), ("status", "VARCHAR"), ("rows", "BIGINT")],
}


def write_snapshot(snap: Snapshot, path: str | Path) -> None:
    """Write the snapshot to a new DuckDB file (atomically: a crash leaves no half-written report)."""
    import duckdb

    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.unlink(missing_ok=True)
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
        sections = [(name, status, _section_rows(snap, name)) for name, status in snap.sections.items()]
        _insert(con, "sections", sections)
        con.execute("USE memory")
        con.execute("DETACH snap")
    finally:
        con.close()
    os.replace(tmp, path)


def _section_rows(snap: Snapshot, name: str) -> int:
    if name == "logs":
        return len(snap.logs)
    if name == "ledger":
        return 0 if snap.ledger is None else len(snap.ledger.partitions)
    if name == "lag":
        return 0 if snap.lag is None else len(snap.lag.partitions)
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
    from eosctl.sinkdb import connect_readonly

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
    finally:
        con.close()
    return snap
