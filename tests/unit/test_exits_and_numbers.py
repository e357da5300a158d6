"""Write errors on stdout, numbers with non-ASCII digits, and the last tracebacks of issue 34 (items 11, 14,
15): each is one line on stderr and exit 2, through the CLI. No broker."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from eosctl.cli import main
from tests.support.helpers import eosctl_process

REPO = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(REPO)}
HEAD = '[clusters.a]\nbootstrap_servers = "127.0.0.1:1"\n[pipelines.p]\nsource_topics = ["t"]\n'


def eosctl(*args: str, stdout=subprocess.PIPE) -> subprocess.CompletedProcess:
    return eosctl_process(*args, stdout=stdout, cwd=REPO, timeout=60)


def one_line(stderr: str) -> str:
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("eosctl: error: "), stderr
    return lines[0]


# ---- item 11: stdout to a full disk --------------------------------------------------------------------


@pytest.mark.parametrize("args", [["--help"], ["lag", "--help"], ["txns", "list", "--help"],
                                  ["completion", "bash"]])
def test_stdout_on_a_full_disk_is_one_line_and_exit_2(args):
    with open("/dev/full", "w") as full:
        proc = eosctl(*args, stdout=full)
    assert proc.returncode == 2, proc.stderr
    assert one_line(proc.stderr) == ("eosctl: error: cannot write the output: No space left on device; free "
                                     "some space or write somewhere else (--out FILE)")


# ---- item 14: digits isdigit() accepts and int() refuses ------------------------------------------------


def test_a_superscript_port_in_listen_is_one_line():
    result = CliRunner().invoke(main, ["exporter", "--listen", "127.0.0.1:\u00b2"])
    assert result.exit_code == 2
    assert "'127.0.0.1:\u00b2' is not HOST:PORT" in one_line(result.stderr)


def test_a_superscript_port_in_bootstrap_is_one_line():
    result = CliRunner().invoke(main, ["lag", "--bootstrap", "h:\u00b2"])
    assert result.exit_code == 2
    assert one_line(result.stderr) == ("eosctl: error: --bootstrap 'h:\u00b2': port '\u00b2' is not a "
                                       "number; expected HOST:PORT[,HOST:PORT...], e.g. localhost:9092")


def test_a_superscript_port_in_the_config_is_one_line(tmp_path):
    config = tmp_path / "c.toml"
    config.write_text('[clusters.a]\nbootstrap_servers = "h:\u00b3"\n[pipelines.p]\nsource_topics = ["t"]\n')
    result = CliRunner().invoke(main, ["lag", "-c", str(config)])
    assert result.exit_code == 2
    assert "port '\u00b3' is not a number" in one_line(result.stderr)


def test_a_superscript_port_in_a_postgres_sink_is_one_line(tmp_path):
    config = tmp_path / "c.toml"
    config.write_text(f'{HEAD}'
                      '[pipelines.p.sink]\npostgres = "postgresql://u@h:\u00b2/db"\n')
    result = CliRunner().invoke(main, ["audit", "-c", str(config), "--engine", "local"])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    one_line(result.stderr)


def test_a_duration_with_other_digits_is_refused():
    result = CliRunner().invoke(main, ["txns", "hanging", "--bootstrap", "h:1", "--max-age", "\u0663m"])
    assert result.exit_code == 2
    assert "is not a duration" in one_line(result.stderr)


# ---- item 15: the remaining tracebacks -------------------------------------------------------------------


@pytest.mark.parametrize("value", ["inf", "nan", "1e400"])
def test_lag_watch_takes_finite_seconds_only(value):
    result = CliRunner().invoke(main, ["lag", "--bootstrap", "h:1", "--watch", value])
    assert result.exit_code == 2
    assert "invalid value for '--watch'" in one_line(result.stderr)


@pytest.mark.parametrize(("line", "message"), [
    ("shuffle_partitions = 0", "spark.shuffle_partitions must be at least 1, got 0"),
    ('driver_memory = "1z"', "spark.driver_memory is '1z': expected a size such as 512m or 2g"),
    ('master = "local[0]"', "spark.master is 'local[0]': expected local[N] (N at least 1), local[*], "
                            "spark://HOST:PORT, yarn or k8s://URL"),
])
def test_spark_settings_spark_would_refuse_are_one_config_line(tmp_path, line, message):
    config = tmp_path / "c.toml"
    config.write_text(f'{HEAD}'
                      f'[pipelines.p.sink]\nduckdb = "s.duckdb"\n[spark]\n{line}\n')
    result = CliRunner().invoke(main, ["audit", "-c", str(config), "--engine", "spark"])
    assert result.exit_code == 2
    assert one_line(result.stderr) == f"eosctl: error: {config}: {message}"


@pytest.mark.parametrize(("flag", "value"), [("--driver-memory", "1z"), ("--master", "local[0]")])
def test_spark_flags_spark_would_refuse_are_one_line(tmp_path, flag, value):
    config = tmp_path / "c.toml"
    config.write_text(f'{HEAD}'
                      '[pipelines.p.sink]\nduckdb = "s.duckdb"\n')
    result = CliRunner().invoke(main, ["audit", "-c", str(config), flag, value])
    assert result.exit_code == 2
    assert one_line(result.stderr).startswith(f"eosctl: error: {flag} '{value}': expected")


@pytest.mark.parametrize("cword", [None, "x", "\u00b2"])
def test_shell_completion_without_its_variables_is_one_line(cword):
    env = {**ENV, "_EOSCTL_COMPLETE": "bash_complete", "COMP_WORDS": "eosctl "}
    env.pop("COMP_CWORD", None)
    if cword is not None:
        env["COMP_CWORD"] = cword
    proc = subprocess.run([sys.executable, "-c", "from eosctl.cli import main; main(prog_name='eosctl')"],
                          capture_output=True, text=True, timeout=60, cwd=REPO, env=env)
    assert proc.returncode == 2, proc.stderr
    assert one_line(proc.stderr).startswith("eosctl: error: shell completion called without its variables")


# ---- item 9: a certificate file is checked for its kind before a client opens it -------------------------


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_an_ssl_file_that_is_a_fifo_or_device_is_one_line(tmp_path, kind):
    target = "/dev/zero"
    if kind == "fifo":
        target = str(tmp_path / "ca.pem")
        os.mkfifo(target)
    config = tmp_path / "c.toml"
    config.write_text('[clusters.a]\nbootstrap_servers = "127.0.0.1:1"\nsecurity_protocol = "SSL"\n'
                      f'ssl_ca_location = "{target}"\n[pipelines.p]\nsource_topics = ["t"]\n')
    # A subprocess: before the fix the client's open() of the FIFO blocked for ever.
    proc = eosctl("lag", "-c", str(config))
    assert proc.returncode == 2, proc.stderr
    what = "a named pipe (FIFO)" if kind == "fifo" else "a character device"
    assert one_line(proc.stderr) == (f"eosctl: error: {config}: clusters.a.ssl_ca_location ({target}): it is "
                                     f"{what}, not a regular file; name a PEM file")
