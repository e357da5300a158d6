from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from eosctl.base.errors import ConfigError
from eosctl.config.file import load_config

REPO = Path(__file__).resolve().parents[3]

GOOD = """
[clusters.prod]
bootstrap_servers = "b1:9093,b2:9093"
security_protocol = "SASL_SSL"
sasl_mechanism = "PLAIN"
sasl_username = "svc"
sasl_password = "${KPASS}"

[pipelines.pay]
source_topics = ["pay.enriched"]
group = "pay-sink"

[pipelines.pay.sink]
duckdb = "sink.duckdb"
table = "rows"
key_column = "payment_id"
"""


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "eosctl.toml"
    p.write_text(text)
    return p


def test_good_config_interpolates_secrets_and_resolves_sink_relative_to_file(tmp_path):
    cfg = load_config(write(tmp_path, GOOD), env={"KPASS": "s3cret"})
    pipe = cfg.pipeline("pay")
    cluster = cfg.cluster_of(pipe)
    assert cluster.bootstrap_servers == "b1:9093,b2:9093"
    assert cluster.confluent()["sasl.password"] == "s3cret"
    assert "s3cret" not in repr(cluster)
    assert pipe.source_topics == ("pay.enriched",)
    assert pipe.sink.duckdb == str(tmp_path / "sink.duckdb")
    assert pipe.sink.offset_column == "src_offset"
    assert cfg.pipeline(None) is pipe  # the only pipeline is the default


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (GOOD.replace('bootstrap_servers = "b1:9093,b2:9093"\n', ""),
         "missing key clusters.prod.bootstrap_servers (expected a string)"),
        (GOOD.replace('source_topics = ["pay.enriched"]', "source_topics = 3"),
         "pipelines.pay.source_topics must be a non-empty list of strings, got an integer 3"),
        (GOOD.replace('"SASL_SSL"', '"SASL_TLS"'),
         "clusters.prod.security_protocol must be one of PLAINTEXT, SASL_PLAINTEXT, SASL_SSL, SSL, "
         "got 'SASL_TLS'"),
        (GOOD.replace('group = "pay-sink"', 'gruop = "pay-sink"'),
         "unknown key pipelines.pay.gruop (check the spelling)"),
        (GOOD + "\n[spark]\nshuffle_partitions = \"four\"\n",
         "spark.shuffle_partitions must be an integer, got a string 'four'"),
        (GOOD + 'value_column = "v"\nvalue_hash_column = "v_md5"\n',
         "pipelines.pay.sink: value_column and value_hash_column are both set; set one"),
        (GOOD.replace('key_column = "payment_id"', 'value_hash_column = "v_md5"'),
         "pipelines.pay.sink: value_hash_column needs key_column"),
        ("[clusters.a\n", "not valid TOML"),
        ("", "missing table [clusters.NAME]"),
    ],
)
def test_bad_config_names_file_and_key(tmp_path, text, message):
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as e:
        load_config(path, env={"KPASS": "x"})
    assert str(e.value).startswith(f"{path}: ")
    assert message in str(e.value)


def test_missing_env_var_is_named_and_secret_never_shown(tmp_path):
    path = write(tmp_path, GOOD)
    with pytest.raises(ConfigError) as e:
        load_config(path, env={})
    assert str(e.value) == (
        f"{path}: clusters.prod.sasl_password refers to ${{KPASS}}, which is not set; export KPASS first"
    )
    bad = write(tmp_path, GOOD.replace('"${KPASS}"', "12345"))
    with pytest.raises(ConfigError) as e:
        load_config(bad, env={})
    assert "12345" not in str(e.value)
    assert "clusters.prod.sasl_password must be a string" in str(e.value)


def test_unreadable_and_missing_files(tmp_path):
    with pytest.raises(ConfigError, match="config file not found"):
        load_config(tmp_path / "nope.toml")
    with pytest.raises(ConfigError, match="cannot read config file"):
        load_config(tmp_path)  # a directory
    binary = tmp_path / "bin.toml"
    binary.write_bytes(b"\xff\xfe\x00bad")
    with pytest.raises(ConfigError, match="cannot read config file"):
        load_config(binary)


def test_unknown_pipeline_lists_known_ones(tmp_path):
    cfg = load_config(write(tmp_path, GOOD), env={"KPASS": "x"})
    with pytest.raises(ConfigError, match=r"no pipeline named 'nope' \(known: pay\)"):
        cfg.pipeline("nope")


def test_sample_configs_parse(monkeypatch):
    cfg = load_config(REPO / "sample_configs/production.example.toml", env={"KAFKA_USERNAME": "u",
                                                                           "KAFKA_PASSWORD": "p"})
    assert cfg.spark.master.startswith("spark://")
    assert cfg.pipeline("payments").sink.key_column == "payment_id"


def test_cli_reports_bad_config_in_one_line_with_exit_2(tmp_path):
    from eosctl.cli import main

    path = write(tmp_path, GOOD.replace("source_topics = [\"pay.enriched\"]", "source_topics = []"))
    result = CliRunner().invoke(main, ["lag", "--config", str(path), "--pipeline", "pay"], env={"KPASS": "x"})
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert lines == [f"eosctl: error: {path}: pipelines.pay.source_topics must be a non-empty list of "
                     "strings, "
                     "got a list []"]


FORM = "expected HOST:PORT[,HOST:PORT...], e.g. localhost:9092"
BAD_BOOTSTRAPS = [
    ("a:b:c", "more than one ':' (write an IPv6 address as [ADDRESS]:PORT)"),
    ("127.0.0.1:", "no port"),
    ("notahost", "no port"),
    (":9092", "no host"),
    ("broker:kafka", "port 'kafka' is not a number"),
    ("broker:70000", "port 70000 is out of range (1-65535)"),
    ("b1:9092,", "an empty entry"),
    ("b1:9092,b2", "entry 'b2': no port"),
]


@pytest.mark.parametrize(("bootstrap", "problem"), BAD_BOOTSTRAPS)
def test_bootstrap_that_is_not_host_port_is_one_line(tmp_path, bootstrap, problem):
    from eosctl.config.target import resolve

    with pytest.raises(ConfigError) as e:
        resolve(None, None, bootstrap)
    assert str(e.value) == f"--bootstrap {bootstrap!r}: {problem}; {FORM}"
    path = write(tmp_path, GOOD.replace("b1:9093,b2:9093", bootstrap))
    with pytest.raises(ConfigError) as e:
        load_config(path, env={"KPASS": "x"})
    assert str(e.value) == f"{path}: clusters.prod.bootstrap_servers {bootstrap!r}: {problem}; {FORM}"


def test_good_bootstraps_pass_and_lose_their_spaces(tmp_path):
    from eosctl.config.target import resolve

    assert resolve(None, None, "[::1]:9092").cluster.bootstrap_servers == "[::1]:9092"
    assert resolve(None, None, "b1:9092, b2:9093").cluster.bootstrap_servers == "b1:9092,b2:9093"
    spaced = GOOD.replace("b1:9093,b2:9093", " b1:9093 ,b2:9093")
    cfg = load_config(write(tmp_path, spaced), env={"KPASS": "x"})
    assert cfg.clusters["prod"].bootstrap_servers == "b1:9093,b2:9093"


@pytest.mark.parametrize("bootstrap", ["a:b:c", "127.0.0.1:", "notahost"])
def test_cli_bad_bootstrap_exits_2_without_traceback(bootstrap):
    from eosctl.cli import main

    commands = (["lag"], ["txns", "list"], ["log", "-t", "t", "--partition", "0"], ["tui", "-t", "t"])
    for command in commands:
        result = CliRunner().invoke(main, [*command, "--bootstrap", bootstrap])
        assert result.exit_code == 2, (command, result.output)
        problem = dict(BAD_BOOTSTRAPS)[bootstrap]
        assert result.stderr == f"eosctl: error: --bootstrap {bootstrap!r}: {problem}; {FORM}\n"


TWO_CLUSTERS = """
[clusters.local]
bootstrap_servers = "sandbox"

[clusters.prod]
bootstrap_servers = "b1:9093"

[pipelines.onprod]
cluster = "prod"
source_topics = ["pay.enriched"]

[pipelines.onsandbox]
cluster = "local"
source_topics = ["demo.enriched"]
"""


def test_a_config_naming_the_sandbox_loads_while_the_sandbox_is_down(tmp_path, monkeypatch):
    """The literal "sandbox" is resolved for the chosen cluster only, when a command resolves its target."""
    from eosctl.config.target import resolve

    monkeypatch.setenv("EOSCTL_HOME", str(tmp_path / "no-sandbox-here"))
    path = write(tmp_path, TWO_CLUSTERS)
    assert load_config(path).clusters["local"].bootstrap_servers == "sandbox"
    assert resolve(str(path), "onprod", None).cluster.bootstrap_servers == "b1:9093"
    with pytest.raises(ConfigError, match=r'clusters.local.bootstrap_servers is "sandbox", but no sandbox '
                                          r"runs from .*no-sandbox-here .*; start it there with "
                                          r"`EOSCTL_HOME=.*no-sandbox-here eosctl sandbox up`"):
        resolve(str(path), "onsandbox", None)


def test_a_sandbox_cluster_resolves_to_the_running_sandbox(tmp_path, monkeypatch):
    from eosctl.config import sandboxstate
    from eosctl.config.target import resolve
    from eosctl.sandbox import noida

    monkeypatch.setenv("EOSCTL_HOME", str(tmp_path))
    monkeypatch.setattr(sandboxstate, "status", lambda home: noida.SandboxState(
        pid=1, port=19092, data_dir=str(tmp_path), log_file="", started_at=0.0))
    target = resolve(str(write(tmp_path, TWO_CLUSTERS)), "onsandbox", None)
    assert target.cluster.bootstrap_servers == "127.0.0.1:19092"
    assert target.cluster.name == "local"


def test_a_value_column_on_a_sink_it_cannot_be_read_from_is_one_line(tmp_path):
    """The content check reads value columns from DuckDB-read sinks only: a PostgreSQL sink naming one is
    refused before anything is read, in one line, exit 2."""
    from eosctl.cli import main

    path = write(tmp_path, '[clusters.c]\nbootstrap_servers = "127.0.0.1:1"\n[pipelines.p]\n'
                           'source_topics = ["t"]\n[pipelines.p.sink]\npostgres = "postgresql://u@127.0.0.1:1/db"\n'
                           'key_column = "k"\nvalue_column = "v"\n')
    r = CliRunner().invoke(main, ["audit", "-c", str(path), "-p", "p"])
    assert r.exit_code == 2
    assert len(r.stderr.strip().splitlines()) == 1
    assert "value_column is read from DuckDB, Parquet, Delta and Iceberg sinks, not from a postgres sink" \
        in r.stderr
