"""A value substituted for ${NAME} in a config is never printed at run time either (issue 34, item 6):
redaction follows the value (eosctl.config.redaction.redact), whatever message carries it. Through the CLI, no
broker (the sink is read before Kafka; the cluster is a port nothing listens on)."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from tests.support.helpers import eosctl

SECRET = "s3cr3t-value"


def run_config(tmp_path: Path, text: str, *args: str, env: dict[str, str]) -> str:
    config = tmp_path / "c.toml"
    config.write_text(text)
    result = eosctl(args[0], "-c", str(config), *args[1:], env=env, columns=None, check=False)
    assert result.exit_code == 2, result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("eosctl: error: "), result.stderr
    assert SECRET not in result.output
    return lines[0].removeprefix("eosctl: error: ").replace(str(config), "C")


HEAD = '[clusters.c]\nbootstrap_servers = "127.0.0.1:1"\n'
PIPE = '[pipelines.p]\nsource_topics = ["t"]\n'


@pytest.fixture
def sink(tmp_path: Path) -> Path:
    path = tmp_path / "sink.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE rows (src_topic VARCHAR, src_partition INT, src_offset BIGINT)")
    con.close()
    return path


def test_a_substituted_broker_address_is_not_in_cannot_reach_kafka(tmp_path):
    line = run_config(tmp_path, '[clusters.c]\nbootstrap_servers = "${BS}"\n' + PIPE, "lag", "-p", "p",
                      env={"BS": "127.0.0.1:1"})
    assert line.startswith("cannot reach Kafka at [the value of ${BS}]: ")


def test_a_substituted_hop_name_is_not_echoed(tmp_path):
    line = run_config(tmp_path, HEAD + PIPE + '[pipelines.h]\nhops = ["p", "${H}"]\n',
                      "audit", "-p", "h", env={"H": SECRET})
    assert line == ("C: pipelines.h.hops names '[the value of ${H}]', which is not a [pipelines.NAME] "
                    "(known: h, p)")


def test_a_substituted_lineage_and_sink_cluster_are_not_echoed(tmp_path):
    kafka = HEAD + '[pipelines.k]\nsource_topics = ["t"]\n[pipelines.k.sink]\nkafka_topic = "out"\n'
    line = run_config(tmp_path, kafka + 'lineage = "${L}"\n', "audit", "-p", "k", env={"L": SECRET})
    assert line == ("C: pipelines.k.sink.lineage '[the value of ${L}]': expected one of headers, value:PATH, "
                    "key, value, replica (e.g. value:source)")
    line = run_config(tmp_path, kafka + 'cluster = "${K}"\n', "audit", "-p", "k", env={"K": SECRET})
    assert line == "C: pipelines.k.sink.cluster '[the value of ${K}]' is not a [clusters.NAME] (known: c)"


def test_substituted_duckdb_path_table_and_column_are_not_echoed(tmp_path, sink):
    pipe = HEAD + '[pipelines.p]\nsource_topics = ["t"]\n[pipelines.p.sink]\nduckdb = "${DB}"\n'
    missing = str(tmp_path / f"{SECRET}.duckdb")
    line = run_config(tmp_path, pipe, "audit", "-p", "p", "--engine", "local", env={"DB": missing})
    assert line == "sink file [the value of ${DB}] not found; check [sink].duckdb or --sink-duckdb"
    line = run_config(tmp_path, pipe + 'table = "${T}"\n', "audit", "-p", "p", "--engine", "local",
                      env={"DB": str(sink), "T": SECRET})
    assert "[the value of ${T}]" in line and "[the value of ${DB}]" in line
    line = run_config(tmp_path, pipe + 'table = "rows"\noffset_column = "${COL}"\n', "audit", "-p", "p",
                      "--engine", "local", env={"DB": str(sink), "COL": SECRET})
    assert "lacks column [the value of ${COL}] (offset_column)" in line


def test_a_substituted_postgres_user_is_not_in_cannot_connect(tmp_path):
    line = run_config(tmp_path, HEAD + PIPE + '[pipelines.p.sink]\npostgres = "postgresql://${U}@127.0.0.1:1/db"\n',
                      "audit", "-p", "p", "--engine", "local", env={"U": SECRET})
    assert line.startswith("cannot connect to PostgreSQL at postgresql://[the value of ${U}]@127.0.0.1:1/db")


def test_a_short_value_is_hidden_only_where_it_stands_alone():
    from eosctl.config.redaction import _SUBSTITUTED, redact

    _SUBSTITUTED["ab"] = "X"
    try:
        assert redact("table ab in cab") == "table [the value of ${X}] in cab"
    finally:
        del _SUBSTITUTED["ab"]
