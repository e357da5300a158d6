"""What a config holds: its clusters, its pipelines (their sinks and hops), Spark and audit settings.

eosctl.config.file reads and validates them from TOML; a secret in one comes from ${ENV_VAR} and is never
echoed back (eosctl.config.redaction).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eosctl.base.errors import ConfigError
from eosctl.config.policy import Level

# bootstrap_servers = "sandbox": the broker `eosctl sandbox up` started.
SANDBOX = "sandbox"


@dataclass(frozen=True)
class Cluster:
    name: str
    bootstrap_servers: str
    security_protocol: str = "PLAINTEXT"
    sasl_mechanism: str | None = None
    sasl_username: str | None = None
    sasl_password: str | None = field(default=None, repr=False)
    ssl_ca_location: str | None = None
    ssl_certificate_location: str | None = None
    ssl_key_location: str | None = None
    ssl_key_password: str | None = field(default=None, repr=False)
    # With bootstrap_servers = "sandbox": the state directory of the sandbox it means (`eosctl sandbox up`'s
    # $EOSCTL_HOME), so the config finds it from any directory; default $EOSCTL_HOME or ./.eosctl.
    sandbox_home: str | None = None
    # The cluster's Schema Registry (issue 50): framed keys and values are decoded through it
    # (eosctl.cluster.schemas). TLS and basic auth like the brokers', each its own setting: a registry is
    # often behind another CA and other credentials than the brokers.
    schema_registry_url: str | None = None
    schema_registry_username: str | None = None
    schema_registry_password: str | None = field(default=None, repr=False)
    schema_registry_ssl_ca_location: str | None = None
    schema_registry_ssl_certificate_location: str | None = None
    schema_registry_ssl_key_location: str | None = None
    schema_registry_ssl_key_password: str | None = field(default=None, repr=False)
    # How long commands against this cluster wait for Kafka at least when no --timeout is given ("2m"; a
    # slow or distant link needs more than the 30 s default): eosctl.cluster.deadline.prefer.
    timeout: str | None = None

    @property
    def timeout_s(self) -> float | None:
        """``timeout`` in seconds (checked when the config was read)."""
        return None if self.timeout is None else duration_s(self.timeout)

    def confluent(self) -> dict[str, str]:
        """librdkafka (confluent-kafka) settings for this cluster."""
        conf = {"bootstrap.servers": self.bootstrap_servers, "security.protocol": self.security_protocol}
        for key, name in (
            ("sasl.mechanism", self.sasl_mechanism),
            ("sasl.username", self.sasl_username),
            ("sasl.password", self.sasl_password),
            ("ssl.ca.location", self.ssl_ca_location),
            ("ssl.certificate.location", self.ssl_certificate_location),
            ("ssl.key.location", self.ssl_key_location),
            ("ssl.key.password", self.ssl_key_password),
        ):
            if name is not None:
                conf[key] = name
        return conf

    def kafka_python(self) -> dict[str, Any]:
        """kafka-python settings for this cluster."""
        conf: dict[str, Any] = {
            "bootstrap_servers": self.bootstrap_servers.split(","),
            "security_protocol": self.security_protocol,
        }
        for key, value in (
            ("sasl_mechanism", self.sasl_mechanism),
            ("sasl_plain_username", self.sasl_username),
            ("sasl_plain_password", self.sasl_password),
            ("ssl_cafile", self.ssl_ca_location),
            ("ssl_certfile", self.ssl_certificate_location),
            ("ssl_keyfile", self.ssl_key_location),
            ("ssl_password", self.ssl_key_password),
        ):
            if value is not None:
                conf[key] = value
        return conf


@dataclass(frozen=True)
class Sink:
    duckdb: str | None = None
    parquet: str | None = None
    postgres: str | None = None  # postgresql://USER@HOST:PORT/DB (a password only through ${NAME})
    delta: str | None = None  # a Delta Lake table's path or URI
    iceberg: str | None = None  # an Iceberg table: CATALOG.NAMESPACE.TABLE
    catalog_uri: str | None = None  # the Iceberg catalog's uri (else pyiceberg's own configuration)
    warehouse: str | None = None  # the Iceberg catalog's warehouse
    table: str = "sink"
    topic_column: str = "src_topic"
    partition_column: str = "src_partition"
    offset_column: str = "src_offset"
    key_column: str | None = None
    # The content check compares each row's value with its record's too (eosctl.rules.content): a column
    # holding the record's value (text: its UTF-8 bytes; a blob: its bytes), or one holding the lowercase hex
    # MD5 of the value's bytes (SQL's md5(value), Python's hashlib.md5(value).hexdigest()). Both need
    # key_column.
    value_column: str | None = None
    value_hash_column: str | None = None
    # A column the sink writes in write order (an ingestion time or a sequence): a duplicate's cause then says
    # when its first and its repeated writes happened.
    order_column: str | None = None
    # A column holding when the sink wrote each row (an ingestion time): `eosctl explain` shows it beside
    # the record's own timestamp, and the lag between them.
    write_time_column: str | None = None
    # Table where the sink stores the source offsets it committed with its rows (optional).
    offsets_table: str | None = None
    # A Spark Structured Streaming query's checkpoint: its Kafka offsets are the sink's stored offsets.
    spark_checkpoint: str | None = None
    # A Kafka topic as the sink: the output of a consume-transform-produce stage (eosctl.sink.kafka_topic),
    # its lineage ("headers" or "value:PATH") and header names; the cluster it lives on (default: the
    # pipeline's; set by eosctl.config.target, which resolves "sandbox").
    kafka_topic: str | None = None
    lineage: str = "headers"
    lineage_headers: tuple[str, str, str] = ("eos.source.topic", "eos.source.partition", "eos.source.offset")
    cluster: str | None = None
    # issue 50: the content check on records decoded through the cluster's Schema Registry
    # (eosctl.rules.fields): which column holds which field ((column, "value.PATH" or "key.PATH"), ...;
    # None: the columns named like the value's top-level fields), and what may differ.
    fields: tuple[tuple[str, str], ...] | None = None
    float_tolerance: float = 0.0  # relative
    timestamp_precision: str | None = None  # "s", "ms" or "us": both sides truncated to it; None: exact
    kafka_cluster: Cluster | None = None
    # The stage's consumer group, the cluster it commits on and its input topics (the pipeline's): set by
    # eosctl.config.target too.
    stage_group: str | None = None
    stage_cluster: Cluster | None = None
    stage_topics: tuple[str, ...] = ()
    # How long the sink keeps a row (a TTL, a retention job): a duration such as "7d" (eosctl.config.values).
    # The audit expects the committed records older than that to be gone: missing, they are not gaps.
    retention: str | None = None
    # The pipeline's dead-letter topic (Kafka Connect's errors.deadletterqueue.topic.name, Kafka Streams'
    # errors.dead.letter.queue.topic.name): its records name their source record in headers
    # (eosctl.cluster.deadletter); expected = each committed record in the sink or the DLQ, once.
    dlq_topic: str | None = None
    # Which source records this sink should hold (eosctl.config.route): the others are filtered, never gaps,
    # and a row for one of them is misrouted. None: every record.
    route: str | None = None
    # Its name in a pipeline of several sinks ([pipelines.NAME.sinks.LABEL]); "sink" for the one
    # [pipelines.NAME.sink].
    label: str = "sink"
    # Set by eosctl.sink.frozen() only, never by a config: the sink as configured, where this one names
    # a frozen copy of it, and the read point pinned for the command (a copy's time, a snapshot id).
    frozen_from: Sink | None = None
    at: str | None = None
    # Also set by frozen() only: a Delta or Iceberg table whose pinned version is exactly the rows of its
    # data files (local Parquet, no deletes, nothing renamed): those files, for the rows and the offsets
    # table, so every reader scans them with DuckDB and none opens the table's library again.
    files: tuple[str, ...] | None = None
    offsets_files: tuple[str, ...] | None = None
    # ---- state sinks (issue 51): a table that keeps the latest state per key, not offsets ----------------
    # mode: "offsets" (rows carry their record's topic, partition, offset), "upsert" (one row per key, the
    # latest committed record's value; eosctl.rules.upsert) or "aggregate" (one row per key, a fold of its
    # committed records' values).
    mode: str = "offsets"
    # The sink's key columns and what each holds of a record: "key" (the key's bytes as text), "key.PATH"
    # or "value.PATH" (a JSON field). Empty: key_column holds the record's key.
    key_fields: tuple[tuple[str, str], ...] | None = None
    # The sink's value columns and the record value's JSON field each holds ("value.PATH", or "value" for the
    # whole value); an upsert sink may instead name value_column or value_hash_column (the value's bytes, or
    # their md5), or nothing (keys only: stale values are then invisible).
    value_fields: tuple[tuple[str, str], ...] | None = None
    # Record values that mean "delete this key" besides a tombstone (a NULL value): an exact value text, or
    # "value.PATH=TEXT" (a JSON field's value, e.g. Debezium's "value.__deleted=true").
    delete_values: tuple[str, ...] | None = None
    # mode = "aggregate": the fold (fn: count | sum | min | max), the record value's JSON field it folds
    # (not for count) and the sink's column holding it.
    aggregate: Aggregate | None = None
    # mode = "upsert": a column holding the source offset of the record each row was last written from; a
    # row is then judged by that record (an older value is seen without value columns).
    version_column: str | None = None


@dataclass(frozen=True)
class Aggregate:
    fn: str
    column: str
    field: str | None = None
    # A windowed table: the column holding each row's window start (eosctl.rules.timewindows), the
    # windows' size and, for hopping windows, their advance (both in ms; advance = size: tumbling).
    window_column: str | None = None
    window_ms: int | None = None
    advance_ms: int | None = None


@dataclass(frozen=True)
class Pipeline:
    name: str
    cluster: str
    source_topics: tuple[str, ...]
    group: str | None = None
    transactional_id_prefix: str | None = None
    output_topic: str | None = None
    sink: Sink | None = None
    # The pipelines audited, in order, as the hops of this one (`eosctl audit -p NAME` audits each):
    # e.g. ["orders-stage", "orders-sink"]. Empty: the pipeline is one hop.
    hops: tuple[str, ...] = ()
    # Every sink, in the file's order: [pipelines.NAME.sinks.LABEL] tables, or the one [pipelines.NAME.sink]
    # (``sink`` is then it; with several, the first, which commands other than `audit` read).
    sinks: tuple[Sink, ...] = ()


@dataclass(frozen=True)
class Spark:
    master: str = "local[*]"
    remote: str | None = None
    driver_memory: str = "2g"
    shuffle_partitions: int = 4


@dataclass(frozen=True)
class Config:
    path: Path
    clusters: dict[str, Cluster]
    pipelines: dict[str, Pipeline]
    spark: Spark = field(default_factory=Spark)
    audit_engine: str | None = None  # [audit] engine: "spark" | "local"; None: by size (auditors.engine.pick)
    # [audit] content_check: compare each sink row's key (and value) with its record's where the sink names a
    # key column. On unless turned off: at 10M offsets it costs at most 1.5x the keyed audit without it
    # (docs/benchmarks.md, benchmarks/keyed_bench.py).
    audit_content_check: bool = True
    # [audit] waivers: a waiver file (eosctl.config.policy), relative to the config; [audit.levels]: warn or
    # fail per finding kind from a count. Both applied to the final findings (eosctl.report.policy).
    audit_waivers: str | None = None
    audit_levels: tuple[Level, ...] = ()
    default_pipeline: str | None = None  # used when --pipeline is not given and there are several

    def pipeline(self, name: str | None) -> Pipeline:
        if name is None:
            if len(self.pipelines) == 1:
                return next(iter(self.pipelines.values()))
            if self.default_pipeline is not None:
                return self.pipelines[self.default_pipeline]
            if not self.pipelines:
                raise ConfigError(f"{self.path}: no [pipelines.NAME] defined; add one (see "
                                  "sample_configs/demo.toml) or pass --bootstrap and --topic")
            raise ConfigError(
                f"{self.path}: several pipelines ({', '.join(sorted(self.pipelines))}); "
                "choose one with --pipeline (or set default_pipeline at the top of the file)"
            )
        if name not in self.pipelines:
            known = ", ".join(sorted(self.pipelines)) or "none"
            raise ConfigError(f"{self.path}: no pipeline named {name!r} (known: {known})")
        return self.pipelines[name]

    def cluster_of(self, pipeline: Pipeline) -> Cluster:
        return self.clusters[pipeline.cluster]


def value_columns_problem(sink: Sink) -> str | None:
    """What is wrong with the sink's value_column / value_hash_column, in one sentence; None if nothing."""
    if sink.value_column is None and sink.value_hash_column is None:
        return None
    if sink.value_column is not None and sink.value_hash_column is not None:
        return "value_column and value_hash_column are both set; set one (the value, or its md5 hex)"
    name = "value_column" if sink.value_column is not None else "value_hash_column"
    if sink.key_column is None and not sink.key_fields:
        return f"{name} needs key_column (the content check compares a row's value where its key matches)"
    return None


def value_columns_unread(sink: Sink) -> str | None:
    """Why the audit cannot read this sink's value column, in one sentence; None if it can (the audit
    refuses rather than skip a check the config asks for)."""
    name = "value_column" if sink.value_column is not None else "value_hash_column"
    if sink.mode != "offsets":  # a state sink reads its value columns itself (eosctl.sink.state)
        return None
    if (sink.value_column or sink.value_hash_column) and (sink.postgres or sink.kafka_topic):
        kind = "postgres" if sink.postgres is not None else "kafka_topic"
        return (f"{name} is read from DuckDB, Parquet, Delta and Iceberg sinks, not from a {kind} sink; "
                f"remove {name}")
    return None


def value_mode(sink: Sink) -> str | None:
    """How the content check hashes the records' values for this sink (eosctl.cluster.recordkeys.VALUE_MODES):
    "raw" for a value_column, "md5" for a value_hash_column, None for neither."""
    if sink.value_column is not None:
        return "raw"
    return "md5" if sink.value_hash_column is not None else None


_DURATION = re.compile(r"\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*", re.ASCII)
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def duration_s(value: str) -> float | None:
    """A duration as --timeout takes it ("90s", "2m", "500ms", seconds without a unit) in seconds; None when
    it is not one, or not more than 0."""
    m = _DURATION.fullmatch(value)
    seconds = float(m.group(1)) * _UNITS[m.group(2) or "s"] if m else 0.0
    return seconds if seconds > 0 else None
