"""The TOML config file read and validated into eosctl.config.model's dataclasses: every problem is one
ConfigError line naming the file and the dotted key; a ${ENV_VAR} is substituted and remembered so that no
printed line shows its value (eosctl.config.redaction)."""

from __future__ import annotations

import builtins
import os
import re
import tomllib
from dataclasses import replace
from pathlib import Path
from typing import Any

from eosctl.base.errors import ConfigError
from eosctl.base.files import CONFIG_MAX_BYTES, input_problem, shown
from eosctl.config import redaction
from eosctl.config.model import (
    SANDBOX,
    Aggregate,
    Cluster,
    Config,
    Pipeline,
    Sink,
    Spark,
    duration_s,
    value_columns_problem,
)
from eosctl.config.policy import Level, parse_level
from eosctl.config.route import parse_route
from eosctl.config.values import (
    BOOTSTRAP_FORM,
    bootstrap_problem,
    check_lineage,
    duration_seconds,
    memory_problem,
    normalize_bootstrap,
    spark_master_problem,
)

_ENV = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
# Keys whose values are secrets: an error message never prints them.
SECRET_KEYS = {"sasl_password", "ssl_key_password", "password", "schema_registry_password",
               "schema_registry_ssl_key_password"}
SECURITY_PROTOCOLS = {"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"}


def _interpolate(value: str, where: str, path: Path, env: dict[str, str]) -> str:
    def sub(m: re.Match[str]) -> str:
        name = m.group(1)
        if name not in env:
            raise ConfigError(f"{path}: {where} refers to ${{{name}}}, which is not set; export {name} first")
        redaction.remember(env[name], name)
        return env[name]

    return _ENV.sub(sub, value)


class _Reader:
    """Typed access to one TOML table, naming the file and dotted key in every error."""

    def __init__(self, path: Path, where: str, table: Any, env: dict[str, str]):
        if not isinstance(table, dict):
            raise ConfigError(f"{path}: {where} must be a table, got {_kind(table)}")
        self.path, self.where, self.table, self.env = path, where, table, env
        self.used: set[str] = set()
        # key -> the ${NAME}s its value came from: such a value is never echoed, whatever the key.
        self.from_env: dict[str, list[str]] = {}

    def shown(self, key: str, value: object) -> str:
        """The value for an error message: its repr, or where it came from if it came from ${NAME}."""
        names = self.from_env.get(key)
        if names:
            return "the value of " + " and ".join(f"${{{n}}}" for n in names) + " (not shown)"
        return "<secret>" if key in SECRET_KEYS else repr(value)

    def _key(self, key: str) -> str:
        return f"{self.where}.{key}" if self.where else key

    def str(self, key: str, default: Any = ..., *, choices: set[str] | None = None) -> Any:
        self.used.add(key)
        if key not in self.table:
            if default is ...:
                raise ConfigError(f"{self.path}: missing key {self._key(key)} (expected a string)")
            return default
        value = self.table[key]
        if not isinstance(value, str):
            shown = "<secret>" if key in SECRET_KEYS else repr(value)
            raise ConfigError(f"{self.path}: {self._key(key)} must be a string, got {_kind(value)} {shown}")
        names = _ENV.findall(value)
        if names:
            self.from_env[key] = names
        value = _interpolate(value, self._key(key), self.path, self.env)
        if choices is not None and value not in choices:
            raise ConfigError(f"{self.path}: {self._key(key)} must be one of {', '.join(sorted(choices))}, "
                              f"got {self.shown(key, value)}")
        return value

    # The methods below are named for the types they read, so in this class `str` is the method above:
    # their annotations name the type as builtins.str.
    def bool(self, key: builtins.str, default: bool) -> bool:
        self.used.add(key)
        value = self.table.get(key, default)
        if not isinstance(value, bool):
            raise ConfigError(f"{self.path}: {self._key(key)} must be true or false, got {_kind(value)} "
                              f"{value!r}")
        return value

    def int(self, key: builtins.str, default: int) -> int:
        self.used.add(key)
        value = self.table.get(key, default)
        if not isinstance(value, int) or isinstance(value, bool):
            raise ConfigError(
                f"{self.path}: {self._key(key)} must be an integer, got {_kind(value)} {value!r}"
            )
        return value

    def str_list(self, key: builtins.str) -> tuple[builtins.str, ...]:
        self.used.add(key)
        if key not in self.table:
            raise ConfigError(f"{self.path}: missing key {self._key(key)} (expected a list of strings)")
        value = self.table[key]
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
            raise ConfigError(
                f"{self.path}: {self._key(key)} must be a non-empty list of strings, "
                f"got {_kind(value)} {value!r}"
            )
        return tuple(_interpolate(v, self._key(key), self.path, self.env) for v in value)

    def sub(self, key: builtins.str) -> _Reader | None:
        self.used.add(key)
        if key not in self.table:
            return None
        return _Reader(self.path, self._key(key), self.table[key], self.env)

    def done(self) -> None:
        unknown = sorted(set(self.table) - self.used)
        if unknown:
            raise ConfigError(f"{self.path}: unknown key {self._key(unknown[0])} (check the spelling)")


def _kind(value: object) -> str:
    return {dict: "a table", list: "a list", str: "a string", int: "an integer", bool: "a boolean",
            float: "a number"}.get(type(value), type(value).__name__)


def load_config(path: str | Path, env: dict[str, str] | None = None) -> Config:
    """Read and validate a config file; every problem is one ConfigError line naming file and key."""
    path = Path(path)
    env = dict(os.environ) if env is None else env
    # stat before open: /dev/zero would be read forever and a FIFO would block open() itself.
    problem = input_problem(str(path), CONFIG_MAX_BYTES, must_exist=False)
    if problem:
        raise ConfigError(f"{problem}: cannot read config file; pass an eosctl TOML config with "
                          "--config PATH")
    try:
        # utf-8-sig: a byte-order mark (Windows editors write one) is not "Invalid statement" at 1:1.
        raw = tomllib.loads(path.read_text(encoding="utf-8-sig"))
    except RecursionError:  # tomllib recurses once per nesting level: 50k `[` or `{` in a 100 KB file
        raise ConfigError(f"{shown(str(path))}: not valid TOML: arrays or tables nested too deeply") from None
    except FileNotFoundError:
        raise ConfigError(f"{path}: config file not found (pass --config PATH)") from None
    except (OSError, UnicodeDecodeError) as e:  # a permission, a directory, /proc/self/mem (EIO)
        raise ConfigError(f"{path}: cannot read config file ({e.__class__.__name__})") from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path}: not valid TOML: {e}") from None
    return parse_config(raw, path, env)


def parse_config(raw: dict[str, Any], path: Path, env: dict[str, str]) -> Config:
    """A config from a parsed TOML document, section by section in the order their problems are told:
    clusters, pipelines, spark, audit, the default pipeline, then keys nobody reads."""
    redaction.forget_all()
    root = _Reader(path, "", raw, env)
    clusters = _clusters(root, path)
    pipelines = _pipelines(root, path, clusters)
    spark = _spark(root.sub("spark"), path)
    audit_engine, content_check, waivers, levels = _audit(root.sub("audit"), path)
    default = _default_pipeline(root, path, pipelines)
    root.done()
    return Config(path=path, clusters=clusters, pipelines=pipelines, spark=spark, audit_engine=audit_engine,
                  audit_content_check=content_check, default_pipeline=default, audit_waivers=waivers,
                  audit_levels=levels)


def _clusters(root: _Reader, path: Path) -> dict[str, Cluster]:
    """[clusters.NAME]: at least one."""
    ctables = root.sub("clusters")
    if ctables is None or not ctables.table:
        raise ConfigError(
            f"{path}: missing table [clusters.NAME] (at least one cluster with bootstrap_servers)"
        )
    clusters: dict[str, Cluster] = {}
    for name in ctables.table:
        c = ctables.sub(name)
        assert c is not None
        clusters[name] = _cluster(c, name, path)
    return clusters


def _cluster(c: _Reader, name: str, path: Path) -> Cluster:
    """One [clusters.NAME]: where its brokers are and how to reach them."""
    servers = c.str("bootstrap_servers")
    if "bootstrap_servers" in c.from_env and servers != "sandbox" and bootstrap_problem(servers):
        # The problem text quotes the entries: say only that it is wrong, and where it came from.
        raise ConfigError(f"{path}: clusters.{name}.bootstrap_servers, "
                          f"{c.shown('bootstrap_servers', servers)}, is not valid; {BOOTSTRAP_FORM}")
    for key in ("ssl_ca_location", "ssl_certificate_location", "ssl_key_location"):
        _check_pem(c, key, path)
    cluster = Cluster(
        name=name,
        bootstrap_servers=_bootstrap(servers, f"clusters.{name}", path),
        security_protocol=c.str("security_protocol", "PLAINTEXT", choices=SECURITY_PROTOCOLS),
        sasl_mechanism=c.str("sasl_mechanism", None),
        sasl_username=c.str("sasl_username", None),
        sasl_password=c.str("sasl_password", None),
        ssl_ca_location=local_path(c.str("ssl_ca_location", None), path),
        ssl_certificate_location=local_path(c.str("ssl_certificate_location", None), path),
        ssl_key_location=local_path(c.str("ssl_key_location", None), path),
        ssl_key_password=c.str("ssl_key_password", None),
        sandbox_home=local_path(c.str("sandbox_home", None), path),
        timeout=_duration(c.str("timeout", None), f"clusters.{name}.timeout", path),
        **_schema_registry(c, name, path),
    )
    c.done()
    return cluster


def _duration(value: str | None, key: str, path: Path) -> str | None:
    """A duration as --timeout takes it ("90s", "2m", "500ms", seconds without a unit), more than 0."""
    if value is not None and duration_s(value) is None:
        raise ConfigError(f"{path}: {key} must be a duration of more than 0 such as \"30s\" or \"2m\", "
                          f"got {value!r}")
    return value


# --- issue 50: the cluster's Schema Registry -------------------------------------------------------------

def _schema_registry(c: _Reader, name: str, path: Path) -> dict[str, Any]:
    """[clusters.NAME] schema_registry_*: where the registry is and how to reach it (TLS and basic auth in
    the style of the cluster's own keys)."""
    url = c.str("schema_registry_url", None)
    keys = ("schema_registry_username", "schema_registry_password", "schema_registry_ssl_ca_location",
            "schema_registry_ssl_certificate_location", "schema_registry_ssl_key_location",
            "schema_registry_ssl_key_password")
    if url is None:
        given = next((k for k in keys if k in c.table), None)
        if given is not None:
            raise ConfigError(f"{path}: clusters.{name}.{given} is set but "
                              f"clusters.{name}.schema_registry_url is not; add the registry's URL "
                              "(http://HOST:PORT or https://...)")
        return {}
    if not re.fullmatch(r"https?://[^\s/]+(/\S*)?", url):
        raise ConfigError(f"{path}: clusters.{name}.schema_registry_url must be an http:// or https:// URL, "
                          f"got {c.shown('schema_registry_url', url)}")
    if c.table.get("schema_registry_password") is not None and "schema_registry_username" not in c.table:
        raise ConfigError(f"{path}: clusters.{name}.schema_registry_password is set without "
                          f"clusters.{name}.schema_registry_username; basic auth needs both")
    for key in keys[2:5]:
        _check_pem(c, key, path)
    return {
        "schema_registry_url": url.rstrip("/"),
        "schema_registry_username": c.str("schema_registry_username", None),
        "schema_registry_password": c.str("schema_registry_password", None),
        "schema_registry_ssl_ca_location": local_path(c.str("schema_registry_ssl_ca_location", None), path),
        "schema_registry_ssl_certificate_location": local_path(
            c.str("schema_registry_ssl_certificate_location", None), path),
        "schema_registry_ssl_key_location": local_path(c.str("schema_registry_ssl_key_location", None), path),
        "schema_registry_ssl_key_password": c.str("schema_registry_ssl_key_password", None),
    }


def _pipelines(root: _Reader, path: Path, clusters: dict[str, Cluster]) -> dict[str, Pipeline]:
    """[pipelines.NAME], each read, then their hops checked against each other."""
    pipelines: dict[str, Pipeline] = {}
    ptables = root.sub("pipelines")
    for name in (ptables.table if ptables else {}):
        assert ptables is not None  # a name comes only from its table
        p = ptables.sub(name)
        assert p is not None
        pipelines[name] = _pipeline(p, name, path, clusters)
    _check_hops(pipelines, path)
    return pipelines


def _pipeline(p: _Reader, name: str, path: Path, clusters: dict[str, Cluster]) -> Pipeline:
    """One [pipelines.NAME]: its cluster (the only one when there is one), topics, group, sink, hops."""
    cluster = p.str("cluster", next(iter(clusters)) if len(clusters) == 1 else ...)
    if cluster not in clusters:
        raise ConfigError(
            f"{path}: pipelines.{name}.cluster is {p.shown('cluster', cluster)}, but no such "
            f"[clusters.NAME] is defined (known: {', '.join(sorted(clusters))})"
        )
    s = p.sub("sink")
    sink = _sink(s, name, path, clusters) if s is not None else None
    sinks = _sinks(p.sub("sinks"), name, path, clusters)
    if sinks and sink is not None:
        raise ConfigError(f"{path}: pipelines.{name} has [pipelines.{name}.sink] and "
                          f"[pipelines.{name}.sinks.*]; keep one (sink is the one-sink shorthand)")
    pipeline = Pipeline(
        name=name,
        cluster=cluster,
        # A pipeline audited hop by hop reads through its hops: it needs no topics of its own.
        source_topics=(p.str_list("source_topics") if "source_topics" in p.table or "hops" not in p.table
                       else ()),
        group=p.str("group", None),
        transactional_id_prefix=p.str("transactional_id_prefix", None),
        output_topic=p.str("output_topic", None),
        sink=sink or (sinks[0] if sinks else None),
        hops=p.str_list("hops") if "hops" in p.table else (),
        sinks=sinks if sinks else ((sink,) if sink is not None else ()),
    )
    p.done()
    _check_replica(pipeline, path)
    return pipeline


def _sinks(ss: _Reader | None, pipeline: str, path: Path, clusters: dict[str, Cluster]) -> tuple[Sink, ...]:
    """[pipelines.NAME.sinks.LABEL], in the file's order: each a sink of the pipeline (not a Kafka topic)."""
    if ss is None:
        return ()
    out = []
    for label in ss.table:
        sub = ss.sub(label)
        assert sub is not None
        sink = _sink(sub, pipeline, path, clusters, key=f"sinks.{label}")
        if sink.kafka_topic is not None:
            raise ConfigError(f"{path}: pipelines.{pipeline}.sinks.{label} is a kafka_topic: a Kafka stage "
                              "is a pipeline's one sink ([pipelines.NAME.sink])")
        out.append(sink)
    ss.done()
    if not out:
        raise ConfigError(f"{path}: pipelines.{pipeline}.sinks has no [pipelines.{pipeline}.sinks.LABEL]")
    return tuple(out)


def _sink(s: _Reader, pipeline: str, path: Path, clusters: dict[str, Cluster], key: str = "sink") -> Sink:
    """[pipelines.NAME.sink] (or ``key``, [pipelines.NAME.sinks.LABEL]): exactly one kind, its columns, a
    hop's lineage; paths made local."""
    sink = Sink(
        label=key.removeprefix("sinks."),
        duckdb=s.str("duckdb", None),
        parquet=s.str("parquet", None),
        postgres=s.str("postgres", None),
        delta=s.str("delta", None),
        iceberg=s.str("iceberg", None),
        catalog_uri=s.str("catalog_uri", None),
        warehouse=s.str("warehouse", None),
        table=s.str("table", "sink"),
        topic_column=s.str("topic_column", "src_topic"),
        partition_column=s.str("partition_column", "src_partition"),
        offset_column=s.str("offset_column", "src_offset"),
        key_column=s.str("key_column", None),
        value_column=s.str("value_column", None),
        value_hash_column=s.str("value_hash_column", None),
        order_column=s.str("order_column", None),
        write_time_column=s.str("write_time_column", None),
        offsets_table=s.str("offsets_table", None),
        spark_checkpoint=s.str("spark_checkpoint", None),
        kafka_topic=s.str("kafka_topic", None),
        lineage=s.str("lineage", "headers"),
        lineage_headers=_three(s.str_list("lineage_headers") if "lineage_headers" in s.table
                               else Sink.lineage_headers, path, pipeline),
        cluster=s.str("cluster", None),
        retention=s.str("retention", None),
        dlq_topic=s.str("dlq_topic", None),
        route=s.str("route", None),
        **_state_sink(s, path, f"pipelines.{pipeline}.{key}"),
        **_decoded_content(s, pipeline, path),
    )
    s.done()
    if sink.retention is not None and not duration_seconds(sink.retention):
        raise ConfigError(f"{path}: pipelines.{pipeline}.{key}.retention is "
                          f"{s.shown('retention', sink.retention)}; expected a duration over 0 such as 7d")
    if sink.route is not None:
        try:
            parse_route(sink.route)
        except ValueError as e:
            raise ConfigError(f"{path}: pipelines.{pipeline}.{key}.route is {s.shown('route', sink.route)}; "
                              f"{e}") from None
    kinds = ("duckdb", "parquet", "postgres", "delta", "iceberg", "kafka_topic")
    named = [k for k in kinds if getattr(sink, k) is not None]
    if len(named) != 1:
        raise ConfigError(f"{path}: pipelines.{pipeline}.{key} needs exactly one of duckdb, parquet, "
                          f"postgres, delta, iceberg or kafka_topic")
    _check_value_columns(sink, path, pipeline)
    _check_hop_sink(sink, path, pipeline, clusters)
    # Relative sink paths (a Parquet glob too) are relative to the config file, not to wherever
    # eosctl runs; `~` is the user's home, as in a shell.
    return replace(sink, duckdb=local_path(sink.duckdb, path), parquet=local_path(sink.parquet, path),
                   delta=local_path(sink.delta, path),
                   spark_checkpoint=local_path(sink.spark_checkpoint, path))


# ---- state sinks (issue 51): mode, key_fields, value_fields, delete_values, aggregate -------------------
SINK_MODES = ("offsets", "upsert", "aggregate")
AGGREGATE_FNS = ("count", "sum", "min", "max")


def _state_sink(s: _Reader, path: Path, where: str) -> dict[str, Any]:
    """The keys of a sink that keeps state per key (eosctl.rules.upsert), checked against each other;
    ``where``: the sink's table ("pipelines.NAME.sink", or "pipelines.NAME.sinks.LABEL")."""
    mode = s.str("mode", "offsets", choices=set(SINK_MODES))
    out: dict[str, Any] = {"mode": mode,
                           "key_fields": _field_map(s, "key_fields", path),
                           "value_fields": _field_map(s, "value_fields", path),
                           "delete_values": (s.str_list("delete_values") if "delete_values" in s.table
                                             else None),
                           "version_column": s.str("version_column", None)}
    agg = s.sub("aggregate")
    if agg is not None:
        fn = agg.str("fn", choices=set(AGGREGATE_FNS))
        field = agg.str("field", None)
        column = agg.str("column")
        window_column, size, advance = agg.str("window_column", None), agg.str("window", None), \
            agg.str("advance", None)
        size_ms, advance_ms = _window(path, where, "window", size), _window(path, where, "advance", advance)
        if (window_column is None) != (size_ms is None) or (advance_ms is not None and size_ms is None):
            raise ConfigError(f"{path}: {where}.aggregate: a windowed table names both window_column (the "
                              f"column holding each row's window start) and window (its size, e.g. "
                              f"\"1m\")")
        if advance_ms is not None and size_ms is not None and advance_ms > size_ms:
            raise ConfigError(f"{path}: {where}.aggregate.advance ({advance}) is longer than window "
                              f"({size}): hopping windows advance by at most their size")
        out["aggregate"] = Aggregate(fn=fn, column=column, field=field, window_column=window_column,
                                     window_ms=size_ms, advance_ms=advance_ms or size_ms)
        agg.done()
        if fn != "count" and not (field or "").startswith("value"):
            raise ConfigError(f"{path}: {where}.aggregate.field must name the value's JSON field the {fn} "
                              f"folds (\"value.PATH\"), got {field!r}")
    state_keys = [k for k in ("key_fields", "value_fields", "delete_values", "aggregate", "version_column")
                  if k in s.table]
    if mode == "offsets" and state_keys:
        raise ConfigError(f"{path}: {where}.{state_keys[0]} is for a state sink; set {where}.mode = "
                          f"\"upsert\" or \"aggregate\", or remove it")
    if mode == "aggregate" and agg is None:
        raise ConfigError(f"{path}: {where}.mode = \"aggregate\" needs {where}.aggregate = {{fn = "
                          f"\"count\", column = \"COLUMN\"}} (fn: {', '.join(AGGREGATE_FNS)})")
    if mode == "upsert" and agg is not None:
        raise ConfigError(f"{path}: {where}.aggregate is for mode = \"aggregate\"; remove it or change mode")
    if mode != "offsets" and not out["key_fields"] and "key_column" not in s.table:
        raise ConfigError(f"{path}: {where}.mode = {mode!r} needs the table's key: key_column (it holds the "
                          f"record's key) or key_fields = {{COLUMN = \"value.PATH\"}}")
    return out


def _window(path: Path, where: str, key: str, text: str | None) -> int | None:
    """An aggregate window's size or advance in whole milliseconds (at least 1)."""
    if text is None:
        return None
    seconds = duration_seconds(text)
    if seconds is None or round(seconds * 1000) < 1:
        raise ConfigError(f"{path}: {where}.aggregate.{key} = {text!r}: expected a duration such as 500ms, "
                          f"30s, 1m, 1h or 1d")
    return round(seconds * 1000)


def _field_map(s: _Reader, key: str, path: Path) -> tuple[tuple[str, str], ...] | None:
    """A table COLUMN = "SOURCE" (SOURCE: "key", "key.PATH", "value" or "value.PATH"), in file order."""
    table = s.sub(key)
    if table is None:
        return None
    allowed = ("key", "value") if key == "key_fields" else ("value",)
    out = []
    for column in table.table:
        source = table.str(column)
        head = source.split(".", 1)[0]
        if head not in allowed or source.endswith("."):
            raise ConfigError(f"{path}: {table._key(column)} is {source!r}; name "
                              f"{' or '.join(repr(a) for a in allowed)}, or a JSON field of it "
                              f"(\"{allowed[-1]}.PATH\")")
        out.append((column, source))
    table.done()
    if not out:
        raise ConfigError(f"{path}: {s._key(key)} is empty; name at least one COLUMN = \"SOURCE\"")
    return tuple(out)


# --- issue 50: the content check on decoded records ------------------------------------------------------

FIELD_PATH = re.compile(r"(key|value)(\.[^.\s]+)+|[^.\s]+(\.[^.\s]+)*")


def _decoded_content(s: _Reader, pipeline: str, path: Path) -> dict[str, Any]:
    """[pipelines.NAME.sink] fields, float_tolerance, timestamp_precision (eosctl.rules.fields)."""
    where = f"pipelines.{pipeline}.sink"
    out: dict[str, Any] = {}
    fields = s.sub("fields")
    if fields is not None:
        pairs = []
        for column in fields.table:
            target = fields.str(column)
            if not FIELD_PATH.fullmatch(target):
                raise ConfigError(f"{path}: {where}.fields.{column} must name a field as value.PATH or "
                                  f"key.PATH (dots between names), got {target!r}")
            pairs.append((column, target if target.split(".")[0] in ("key", "value") else f"value.{target}"))
        out["fields"] = tuple(pairs)
    s.used.add("float_tolerance")
    if "float_tolerance" in s.table:
        tol = s.table["float_tolerance"]
        if isinstance(tol, bool) or not isinstance(tol, int | float) or not 0 <= tol < 1:
            raise ConfigError(f"{path}: {where}.float_tolerance must be a number from 0 up to 1 (a relative "
                              f"tolerance, e.g. 1e-6), got {_kind(tol)} {tol!r}")
        out["float_tolerance"] = float(tol)
    out["timestamp_precision"] = s.str("timestamp_precision", None, choices={"s", "ms", "us"})
    return out


def _check_hops(pipelines: dict[str, Pipeline], path: Path) -> None:
    """A pipeline's hops are other pipelines, each named once, none with hops of its own."""
    for name, pipe in pipelines.items():
        unknown = [h for h in pipe.hops if h not in pipelines]
        if unknown:
            raise ConfigError(f"{path}: pipelines.{name}.hops names {unknown[0]!r}, which is not a "
                              f"[pipelines.NAME] (known: {', '.join(sorted(pipelines))})")
        if name in pipe.hops:
            raise ConfigError(f"{path}: pipelines.{name}.hops names the pipeline itself; list the pipelines "
                              "it is made of")
        repeated = next((h for i, h in enumerate(pipe.hops) if h in pipe.hops[:i]), None)
        if repeated is not None:
            raise ConfigError(f"{path}: pipelines.{name}.hops names {repeated!r} twice; list each hop once")
        if any(pipelines[h].hops for h in pipe.hops if h != name):
            raise ConfigError(f"{path}: pipelines.{name}.hops names a pipeline that has hops of its own; "
                              f"list every hop in one pipeline")


def _spark(sp: _Reader | None, path: Path) -> Spark:
    """[spark]: the defaults when absent."""
    if sp is None:
        return Spark()
    spark = Spark(
        master=sp.str("master", "local[*]"),
        remote=sp.str("remote", None),
        driver_memory=sp.str("driver_memory", "2g"),
        shuffle_partitions=sp.int("shuffle_partitions", 4),
    )
    sp.done()
    # Checked here, not by Spark: a JVM that refuses them prints a page of its own output first.
    for key, problem in (("master", spark_master_problem(spark.master)),
                         ("driver_memory", memory_problem(spark.driver_memory))):
        if problem:
            raise ConfigError(f"{path}: spark.{key} is {sp.shown(key, getattr(spark, key))}: {problem}")
    if spark.shuffle_partitions < 1:
        raise ConfigError(f"{path}: spark.shuffle_partitions must be at least 1, got "
                          f"{spark.shuffle_partitions}")
    return spark


def _audit(au: _Reader | None, path: Path) -> tuple[str | None, bool, str | None, tuple[Level, ...]]:
    """[audit]: the engine (None: the command's default), whether the content check runs, the waiver file
    and the levels per kind ([audit.levels]: their kinds are checked by the audit, which knows them)."""
    if au is None:
        return None, True, None, ()
    engine = au.str("engine", None, choices={"spark", "local"})
    content_check = au.bool("content_check", True)
    waivers = local_path(au.str("waivers", None), path)
    lv = au.sub("levels")
    levels = []
    for kind, value in (lv.table.items() if lv is not None else ()):
        try:
            levels.append(parse_level(kind, value, f"{path}: audit.levels.{kind}"))
        except ValueError as e:
            raise ConfigError(str(e)) from None
    au.done()
    return engine, content_check, waivers, tuple(levels)


def _default_pipeline(root: _Reader, path: Path, pipelines: dict[str, Pipeline]) -> str | None:
    """default_pipeline: one of the [pipelines.NAME], when given."""
    default = root.str("default_pipeline", None)
    if default is not None and default not in pipelines:
        known = ", ".join(sorted(pipelines)) or "none"
        raise ConfigError(f"{path}: default_pipeline is {root.shown('default_pipeline', default)}, but no "
                          f"such [pipelines.NAME] is defined (known: {known})")
    return default


def _three(names: tuple[str, ...], path: Path, pipeline: str) -> tuple[str, str, str]:
    if len(names) != 3:
        raise ConfigError(f"{path}: pipelines.{pipeline}.sink.lineage_headers needs three header names "
                          f"(topic, partition, offset), got {len(names)}")
    return (names[0], names[1], names[2])



def _check_value_columns(sink: Sink, path: Path, pipeline: str) -> None:
    problem = value_columns_problem(sink)
    if problem:
        raise ConfigError(f"{path}: pipelines.{pipeline}.sink: {problem}")


def _check_replica(pipe: Pipeline, path: Path) -> None:
    """A MirrorMaker 2 replica (`lineage = "replica"`) copies one source topic, partition by partition."""
    sink = pipe.sink
    if sink is None or sink.kafka_topic is None or sink.lineage != "replica":
        return
    if len(pipe.source_topics) != 1:
        raise ConfigError(f"{path}: pipelines.{pipe.name} is a replica (sink.lineage = \"replica\") of "
                          f"{len(pipe.source_topics)} source topics; name the one topic MirrorMaker 2 copies "
                          f"to {sink.kafka_topic!r} (a pipeline per replica topic)")


def _check_hop_sink(sink: Sink, path: Path, pipeline: str, clusters: dict[str, Cluster]) -> None:
    if sink.kafka_topic is None:
        return
    problem = check_lineage(sink.lineage)
    if problem:
        raise ConfigError(f"{path}: pipelines.{pipeline}.sink.lineage {sink.lineage!r}: {problem}")
    if sink.cluster is not None and sink.cluster not in clusters:
        raise ConfigError(f"{path}: pipelines.{pipeline}.sink.cluster {sink.cluster!r} is not a "
                          f"[clusters.NAME] (known: {', '.join(sorted(clusters))})")



def _bootstrap(value: str, where: str, path: Path) -> str:
    """The value, checked; ``"sandbox"`` stays as it is (eosctl.config.target resolves it for the chosen
    cluster only, so a config naming a sandbox cluster still loads while the sandbox is down)."""
    if value == SANDBOX:
        return value
    problem = bootstrap_problem(value)
    if problem:
        raise ConfigError(f"{path}: {where}.bootstrap_servers {value!r}: {problem}; {BOOTSTRAP_FORM}")
    return normalize_bootstrap(value)


# A CA bundle, a certificate or a key: a few KB; a file far larger is not one.
PEM_MAX_BYTES = 1024 * 1024


def _check_pem(c: _Reader, key: str, path: Path) -> None:
    """A certificate or key file is checked for its kind before a Kafka client opens it: a FIFO blocked
    the client's open() (and SIGTERM with it), /dev/zero was read until the handshake gave up."""
    value = c.table.get(key)
    if not isinstance(value, str):
        return
    where = local_path(_interpolate(value, c._key(key), path, c.env), path)
    if not where:
        return
    problem = input_problem(where, PEM_MAX_BYTES, must_exist=False)
    if problem:
        names = _ENV.findall(value)
        shown_value = ("the value of " + " and ".join(f"${{{n}}}" for n in names) + " (not shown)" if names
                       else shown(where))
        raise ConfigError(f"{path}: {c._key(key)} ({shown_value}): {problem.replace(where, 'it')}; name a "
                          "PEM file")


def local_path(value: str | None, config: Path) -> str | None:
    """A path the config names, as eosctl opens it: `~` expanded, a relative one against the config's
    directory; a URL (``s3://...``) as it is."""
    if value is None or "://" in value:
        return value
    expanded = os.path.expanduser(value)
    return expanded if Path(expanded).is_absolute() else str(config.parent / expanded)
