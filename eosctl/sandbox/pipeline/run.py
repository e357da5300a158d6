"""Run the whole pipeline once, stage after stage, and write the manifest and an eosctl config.

Stages run sequentially in one process (source fully, then process until caught up, then sink until
caught up) so that what lands where is deterministic and known without reading the log back.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path

from eosctl.base.errors import EosctlError
from eosctl.config.model import Cluster
from eosctl.sandbox.pipeline import faults as F
from eosctl.sandbox.pipeline import manifest as M
from eosctl.sandbox.pipeline.broker import Broker
from eosctl.sandbox.pipeline.configfile import write_config
from eosctl.sandbox.pipeline.expected import expected_findings, expected_hop_findings
from eosctl.sandbox.pipeline.process import run_process
from eosctl.sandbox.pipeline.sink_writer import (
    OFFSETS_TABLE,
    TABLE,
    DeltaPlace,
    IcebergPlace,
    PgPlace,
    run_sink,
)
from eosctl.sandbox.pipeline.source import make_order, run_source
from eosctl.sandbox.pipeline.topics import Names, reset
from eosctl.sandbox.pipeline.truth import COMMITTED, GroundTruth
from eosctl.sandbox.pipeline.verify import check_processed, check_sink

SINK_FILE = "sink.duckdb"
PG_NAME_MAX = 63  # PostgreSQL's NAMEDATALEN - 1
DELTA_DIR = "sink_delta"
ICEBERG_DIR = "sink_iceberg"


def run_pipeline(cluster: Cluster, prefix: str, workdir: Path, faults: Sequence[str] = (), records: int = 300,
                 partitions: int = 3, progress: Callable[[str], None] | None = None,
                 postgres: str | None = None, delta: bool = False, iceberg: bool = False) -> dict:
    """Run source -> process -> sink with the given faults; return the manifest (also in workdir).

    ``postgres``: a database URI; the sink goes there, into schema PREFIX (recreated), instead of
    sink.duckdb. ``delta``: the sink is a Delta table, sink_delta/ in the work directory (its stored
    offsets are the commits' application transactions: no offsets table). ``iceberg``: the sink is an
    Iceberg table in a SQL catalog on a SQLite file, sink_iceberg/ in the work directory (its stored
    offsets are in each snapshot's summary: no offsets table)."""
    from eosctl.sink.base import redact_uri  # lazy: see docs/imports.md

    faults = F.validate(faults)
    if records < 1 or partitions < 1:
        raise EosctlError("records and partitions must be at least 1")
    if postgres is not None and len(prefix.encode()) > PG_NAME_MAX:
        raise EosctlError(f"a PostgreSQL sink's schema is named after the prefix, which must then be at most "
                          f"{PG_NAME_MAX} bytes; choose a shorter --prefix")
    place = PgPlace(postgres, prefix) if postgres is not None else None
    say = progress or (lambda _msg: None)
    names = Names(prefix)
    workdir = Path(workdir).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    db = workdir / SINK_FILE
    for stale in (db, db.with_name(db.name + ".wal"), workdir / M.FILE):
        stale.unlink(missing_ok=True)  # a fresh run: the old sink would resume from offsets of old topics

    t0 = time.monotonic()
    broker = Broker(cluster)
    truth = GroundTruth()
    try:
        reset(cluster, names, partitions, broker)
        say(f"topics {names.source_topic} and {names.output_topic} ready ({partitions} partitions)")
        run_source(cluster, names, records, broker, truth, say)
        retried: list[str] = []
        if "upstream-retry" in faults:
            recs = F.upstream_retry(cluster, names.source_topic, make_order(records), truth)
            retried = [recs[0].key]
            say(f"upstream-retry: {recs[0].key} written twice to {names.source_topic}[{recs[0].partition}] "
                f"at offsets {recs[0].offset} and {recs[1].offset}")
        processed = run_process(cluster, names, broker, truth, faults, say)
        check_processed(truth, names.source_topic, names.output_topic, processed.planted,
                        "stage-read-uncommitted" in faults)
        for f in processed.fencing:
            say(f"zombie: {f['transactional_id']} epoch {f['old_epoch']} -> {f['new_epoch']}, "
                f"the old producer got {f['zombie_error'] or 'no error (not fenced!)'}")
        targets = F.choose_sink_targets(truth, names.output_topic, faults, partitions, set(retried))
        where = place or (DeltaPlace(workdir / DELTA_DIR, partitions) if delta else
                          IcebergPlace(workdir / ICEBERG_DIR) if iceberg else db)
        sink_result = run_sink(cluster, names, broker, where, targets, "aborted-leak" in faults, say)
        check_sink(where, truth, names.output_topic, targets, "aborted-leak" in faults)
        hanging = []
        if "hanging" in faults:
            hanging.append(F.hanging(cluster, names.hanging_txid, names.output_topic, 0, broker, truth))
            say(f"hanging: {names.hanging_txid} left a transaction open on {names.output_topic}[0] "
                f"from offset {hanging[0]['first_offset']}")
    finally:
        broker.close()

    schema = f"{place.quoted}." if place else ""
    ice = IcebergPlace(workdir / ICEBERG_DIR) if iceberg else None
    sink = {"duckdb": str(db) if place is None and not delta and not iceberg else None,
            "postgres": redact_uri(place.uri) if place else None,  # a password only from the environment
            "delta": str(workdir / DELTA_DIR) if delta else None,
            "iceberg": f"{ice.catalog}.{ice.name}" if ice else None,
            "catalog_uri": ice.uri if ice else None, "warehouse": ice.warehouse if ice else None,
            "table": schema + TABLE, "offsets_table": None if delta or iceberg else schema + OFFSETS_TABLE,
            "topic_column": "src_topic",
            "partition_column": "src_partition", "offset_column": "src_offset", "key_column": "order_id",
            "order_column": "sink_batch", "write_time_column": "written_at"}
    txids = {"source": names.source_txid, "processor": names.processor_txid}
    if "hanging" in faults:
        txids["hanging"] = names.hanging_txid
    sink_expected = expected_findings(truth, names.output_topic, targets, "aborted-leak" in faults)
    manifest = M.build(
        prefix=prefix, bootstrap=cluster.bootstrap_servers, faults=list(faults),
        source_topic=names.source_topic, output_topic=names.output_topic, audited_topics=[names.output_topic],
        partitions=partitions, groups={"processor": names.processor_group, "sink": names.sink_group},
        transactional_ids=txids, sink=sink,
        expected_findings=sink_expected,
        aborted_ranges=truth.aborted_ranges(), markers=truth.marker_dicts(), hanging=hanging,
        fencing=processed.fencing, zombie_writes=processed.zombie_writes,
        hops=[{"name": "process", "input_topic": names.source_topic, "output_topic": names.output_topic,
               "group": names.processor_group, "lineage": "headers", "planted": processed.planted,
               "expected_findings": expected_hop_findings(truth, names.source_topic, names.output_topic)},
              {"name": "sink", "input_topic": names.output_topic, "sink": "duckdb", "group": names.sink_group,
               "expected_findings": sink_expected}],
        source_records=len(truth.of(names.source_topic, COMMITTED)),
        committed_output_records=len(truth.of(names.output_topic, COMMITTED)),
        sink_rows=sink_result.rows,
    )
    M.write(manifest, workdir)
    write_config(cluster, names, sink, workdir, sink_password=place is not None and place.has_password)
    say(f"done in {time.monotonic() - t0:.1f}s: manifest {workdir / M.FILE}")
    return manifest
