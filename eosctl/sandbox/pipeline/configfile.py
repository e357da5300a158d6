"""``eosctl.toml`` for a pipeline run, so every eosctl command can inspect and audit it right away."""

from __future__ import annotations

import json
from pathlib import Path

from eosctl.base.files import write_replacing
from eosctl.config.model import SANDBOX, Cluster
from eosctl.sandbox.pipeline.topics import Names

FILE = "eosctl.toml"
# Secrets never go into the file: it refers to environment variables instead (see eosctl/config/file.py).
_SECRET_ENV = {"sasl_password": "EOSCTL_SASL_PASSWORD", "ssl_key_password": "EOSCTL_SSL_KEY_PASSWORD"}
SINK_PASSWORD_ENV = "EOSCTL_SINK_PASSWORD"


def _q(value: str) -> str:
    return json.dumps(value)  # a JSON string is a valid TOML basic string


def write_config(cluster: Cluster, names: Names, sink: dict, workdir: Path,
                 sink_password: bool = False) -> Path:
    """``sink_password``: the PostgreSQL sink needs one, read from $EOSCTL_SINK_PASSWORD."""
    cname = cluster.name or "default"
    lines = [f"# Written by the eosctl reference pipeline (prefix {names.prefix!r}).", "",
             "# The whole pipeline, hop by hop: every command without -p looks at both hops. Each hop is a",
             f"# pipeline of its own below: -p {names.stage_pipeline} (the process stage), "
             f"-p {names.prefix} (the sink).",
             f"default_pipeline = {_q(names.whole_pipeline)}", "",
             f"[clusters.{_q(cname)}]", f"bootstrap_servers = {_q(cluster.bootstrap_servers)}"]
    if cluster.security_protocol != "PLAINTEXT":
        lines.append(f"security_protocol = {_q(cluster.security_protocol)}")
    for key in ("sasl_mechanism", "sasl_username", "ssl_ca_location", "ssl_certificate_location",
                "ssl_key_location"):
        value = getattr(cluster, key)
        if value is not None:
            lines.append(f"{key} = {_q(value)}")
    for key, env in _SECRET_ENV.items():
        if getattr(cluster, key) is not None:
            lines.append(f"{key} = {_q('${' + env + '}')}")
    p = f"pipelines.{_q(names.prefix)}"
    lines += ["", f"[{p}]", f"cluster = {_q(cname)}",
              f"source_topics = [{_q(names.output_topic)}]",
              f"group = {_q(names.sink_group)}",
              f"transactional_id_prefix = {_q(names.prefix + '.')}",
              f"output_topic = {_q(names.output_topic)}",
              "", f"[{p}.sink]"]
    for key in ("duckdb", "postgres", "delta", "iceberg", "catalog_uri", "warehouse", "table", "topic_column",
                "partition_column", "offset_column", "key_column", "order_column", "write_time_column",
                "offsets_table"):
        value = sink.get(key)
        if key == "postgres" and value and sink_password:
            value = value.replace("@", f":${{{SINK_PASSWORD_ENV}}}@", 1)
        if value is not None:
            lines.append(f"{key} = {_q(str(value))}")
    # The process stage as a hop of its own (its output topic is its sink, lineage in headers), and the
    # whole pipeline hop by hop: `eosctl audit -p PREFIX.pipeline`.
    stage, whole = f"pipelines.{_q(names.stage_pipeline)}", f"pipelines.{_q(names.whole_pipeline)}"
    lines += ["", f"[{stage}]", f"cluster = {_q(cname)}", f"source_topics = [{_q(names.source_topic)}]",
              f"group = {_q(names.processor_group)}", f"transactional_id_prefix = {_q(names.prefix + '.')}",
              "", f"[{stage}.sink]", f"kafka_topic = {_q(names.output_topic)}", 'lineage = "headers"',
              'key_column = "key"',
              "", f"[{whole}]", f"cluster = {_q(cname)}",
              f"hops = [{_q(names.stage_pipeline)}, {_q(names.prefix)}]"]
    path = workdir / FILE
    write_replacing(str(path), "\n".join(lines) + "\n")  # a reader never sees half a config
    return path


def point_at_sandbox(config: Path, bootstrap: str, home: Path | None = None) -> Path:
    """A config written for the sandbox says ``bootstrap_servers = "sandbox"`` instead of today's port, so
    the commands using it keep working after `eosctl sandbox down` / `up` picks another port; and names
    the sandbox's state directory (``home``), so they find it from any directory."""
    text = config.read_text(encoding="utf-8")
    pinned = f"bootstrap_servers = {_q(bootstrap)}\n"
    if text.count(pinned) != 1:  # a config this code didn't write: leave it as it is
        return config
    named = f"bootstrap_servers = {_q(SANDBOX)}\n"
    if home is not None:
        named += f"sandbox_home = {_q(str(home.resolve()))}\n"
    write_replacing(str(config), text.replace(pinned, named))
    return config
