"""Bad input through the CLI, as a user hits it: one line on stderr, exit 2, nothing started or created.

Issue 10, items 3 (special and huge files), 5 (names over the OS limit), 6 (${VAR} values never echoed),
8 (validate before side effects), 9 (one-line usage errors) and 10 (section names, two sinks). No broker.
"""

from __future__ import annotations

import os
import subprocess
import sys
from functools import partial
from pathlib import Path

import pytest

from eosctl.base.files import shown
from tests.support.helpers import eosctl

REPO = Path(__file__).resolve().parents[2]
LONG = "x" * 300  # over NAME_MAX (255) on every Linux file system


run = partial(eosctl, columns=None, check=False)


def one_error_line(result) -> str:
    """The only stderr line of a failed command, which must be exit 2 and start with 'eosctl: error:'."""
    assert result.exit_code == 2, (result.exit_code, result.output)
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("eosctl: error: ")
    return lines[0]


@pytest.fixture
def fifo(tmp_path: Path) -> str:
    path = tmp_path / "pipe"
    os.mkfifo(path)
    return str(path)


# ---- item 3: special files and sizes ----------------------------------------------------------------


@pytest.mark.timeout(60)
def test_config_from_dev_zero_is_refused_at_once():
    # Before the fix this read /dev/zero until the kernel killed it: a subprocess, so a regression is a
    # timeout here and not the end of the test run.
    proc = subprocess.run([sys.executable, "-m", "eosctl", "lag", "-c", "/dev/zero"], capture_output=True,
                          text=True, timeout=30, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 2
    assert proc.stderr == ("eosctl: error: `python -m eosctl lag`: invalid value for '--config' / '-c': "
                           "/dev/zero is a character device, not a regular file; pass an eosctl TOML config "
                           "file (see `python -m eosctl lag --help`)\n")


@pytest.mark.timeout(60)
def test_every_file_option_refuses_a_fifo_without_opening_it(fifo, tmp_path):
    # open() of a FIFO blocks until a writer comes: before the fix each of these hung.
    cases = [
        (["lag", "-c", fifo], "'--config' / '-c'"),
        (["tui", "-c", fifo], "'-c' / '--config'"),
        (["tui", "--snapshot", fifo], "'--snapshot'"),
        (["ledger", "--bootstrap", "127.0.0.1:1", "-t", "t", "--sink-duckdb", fifo], "'--sink-duckdb'"),
        (["snapshot", "--bootstrap", "127.0.0.1:1", "-t", "t", "--out", str(tmp_path / "s.duckdb"),
          "--audit-report", fifo], "'--audit-report'"),
        (["audit", "--bootstrap", "127.0.0.1:1", "-t", "t", "--sink-duckdb", fifo], "'--sink-duckdb'"),
        (["ledger", "--bootstrap", "127.0.0.1:1", "-t", "t", "--sink-parquet", fifo], "'--sink-parquet'"),
        (["ledger", "--bootstrap", "127.0.0.1:1", "-t", "t", "--sink-parquet", str(Path(fifo).parent / "p*")],
         "'--sink-parquet'"),
    ]
    for args, option in cases:
        line = one_error_line(run(*args))
        assert f"{option}: {shown(fifo)} is a named pipe (FIFO), not a regular file" in line, line


@pytest.mark.timeout(60)
@pytest.mark.parametrize("key", ["duckdb", "parquet"])
def test_a_sink_in_the_config_that_is_a_fifo_is_refused_without_opening_it(fifo, tmp_path, key):
    config = tmp_path / "c.toml"
    config.write_text(f'[clusters.c]\nbootstrap_servers = "127.0.0.1:1"\n\n[pipelines.p]\n'
                      f'source_topics = ["t"]\n\n[pipelines.p.sink]\n{key} = "{fifo}"\n')
    line = one_error_line(run("ledger", "-c", str(config)))
    flag = "--sink-duckdb" if key == "duckdb" else "--sink-parquet"
    assert line == (f"eosctl: error: {shown(fifo)} is a named pipe (FIFO), not a regular file; check "
                    f"[pipelines.p.sink].{key} or {flag}")


def test_env_config_is_checked_like_the_option(fifo):
    line = one_error_line(run("txns", "list", env={"EOSCTL_CONFIG": fifo}))
    assert f"{shown(fifo)} is a named pipe (FIFO), not a regular file" in line


def test_a_directory_and_an_oversized_config_are_refused(tmp_path):
    line = one_error_line(run("lag", "-c", str(tmp_path)))
    assert f"{shown(str(tmp_path))} is a directory, not a regular file" in line
    big = tmp_path / "big.toml"
    with open(big, "wb") as f:
        f.truncate(5 * 1024 * 1024)  # sparse: costs no disk
    line = one_error_line(run("lag", "-c", str(big)))
    assert f"{shown(str(big))} is 5 MB, more than the 4 MB such a file can be" in line


def test_load_config_itself_refuses_special_files(fifo):
    from eosctl.base.errors import ConfigError
    from eosctl.config.file import load_config

    with pytest.raises(ConfigError, match="named pipe"):
        load_config(fifo)
    with pytest.raises(ConfigError, match="character device"):
        load_config("/dev/zero")


def test_output_files_refuse_directories_and_devices(tmp_path):
    line = one_error_line(run("snapshot", "--bootstrap", "127.0.0.1:1", "-t", "t", "--out", "/dev/null"))
    assert "'--out' / '-o': /dev/null is a character device, not a regular file" in line
    line = one_error_line(run("snapshot", "--bootstrap", "127.0.0.1:1", "-t", "t", "--out", str(tmp_path)))
    assert f"{shown(str(tmp_path))} is a directory, not a regular file" in line


# ---- item 5: names over the OS limit ----------------------------------------------------------------


@pytest.mark.parametrize("args", [
    ["lag", "-c", LONG],
    ["snapshot", "--bootstrap", "127.0.0.1:1", "-t", "t", "--out", LONG],
    ["tui", "--snapshot", LONG],
    ["audit", "--bootstrap", "127.0.0.1:1", "-t", "t", "--sink-duckdb", "s.duckdb", "--out", LONG],
    ["sandbox", "pipeline", "--workdir", LONG],
])
def test_a_name_over_the_os_limit_is_one_line(args):
    line = one_error_line(run(*args))
    assert "(300 characters): file name too long for the file system" in line
    assert LONG not in line  # shortened, so the line stays readable


# ---- item 9: usage errors are one line --------------------------------------------------------------


@pytest.mark.parametrize(("args", "expected"), [
    (["lag", "--foo"],
     "`main lag`: no such option '--foo'; did you mean '--format'? (see `main lag --help`)"),
    (["nope"], "`main`: no such command 'nope' (see `main --help`)"),
    (["--nope"], "`main`: no such option '--nope' (see `main --help`)"),
    (["sandbox", "nope"], "`main sandbox`: no such command 'nope' (see `main sandbox --help`)"),
    (["snapshot", "-t", "x"], "`main snapshot`: missing option '--out' / '-o' (see `main snapshot --help`)"),
    (["log", "--bootstrap", "127.0.0.1:1", "-t", "t", "-P", "0", "--records", "--no-batches"],
     "`main log`: invalid value for --records: --records shows the records of the batch table's offsets: "
     "drop --no-batches (see `main log --help`)"),
    (["demo", "--records", "x"],
     "`main demo`: invalid value for '--records': 'x' is not a valid integer range (see `main demo --help`)"),
    (["sandbox", "up", "--port", "x"],
     "`main sandbox up`: invalid value for '--port': 'x' is not a valid integer range "
     "(see `main sandbox up --help`)"),
    (["audit", "--master", "a", "--remote", "b"],
     "`main audit`: pass either --master or --remote, not both (see `main audit --help`)"),
    (["lag", "extra"], "`main lag`: got unexpected extra argument (extra) (see `main lag --help`)"),
])
def test_usage_errors_are_one_line(args, expected):
    assert one_error_line(run(*args)) == f"eosctl: error: {expected}"


def test_help_is_still_clicks_own():
    result = run("lag", "--help")
    assert result.exit_code == 0 and result.stderr == ""
    assert result.stdout.startswith("Usage: main lag [OPTIONS]\n\n  Consumer lag the way a read_committed")


@pytest.mark.parametrize("group", [[], ["txns"], ["sandbox"]])
def test_a_bare_group_still_shows_its_help(group):
    result = run(*group)
    assert result.output.startswith(f"Usage: {' '.join(['main', *group])} [OPTIONS] COMMAND [ARGS]...\n")
    assert "\nCommands:\n" in result.output and "eosctl: error" not in result.output


# ---- item 6: ${VAR} values are never echoed ---------------------------------------------------------

ENV_CONFIG = """\
[clusters.c]
bootstrap_servers = "${BS}"
security_protocol = "${SP}"
[pipelines.p]
cluster = "${CL}"
source_topics = ["t"]
"""
SECRET = "s3cr3t-value"


@pytest.mark.parametrize(("env", "expected"), [
    ({"BS": "127.0.0.1:1", "SP": SECRET, "CL": "c"},
     "clusters.c.security_protocol must be one of PLAINTEXT, SASL_PLAINTEXT, SASL_SSL, SSL, got the value of "
     "${SP} (not shown)"),
    ({"BS": SECRET, "SP": "PLAINTEXT", "CL": "c"},
     "clusters.c.bootstrap_servers, the value of ${BS} (not shown), is not valid; expected "
     "HOST:PORT[,HOST:PORT...], e.g. localhost:9092"),
    ({"BS": f"b:{SECRET}", "SP": "PLAINTEXT", "CL": "c"},
     "clusters.c.bootstrap_servers, the value of ${BS} (not shown), is not valid; expected "
     "HOST:PORT[,HOST:PORT...], e.g. localhost:9092"),
    ({"BS": "127.0.0.1:1", "SP": "PLAINTEXT", "CL": SECRET},
     "pipelines.p.cluster is the value of ${CL} (not shown), but no such [clusters.NAME] is defined "
     "(known: c)"),
])
def test_substituted_values_are_never_echoed(tmp_path, env, expected):
    config = tmp_path / "c.toml"
    config.write_text(ENV_CONFIG)
    line = one_error_line(run("lag", "-c", str(config), env=env))
    assert line == f"eosctl: error: {config}: {expected}"
    assert SECRET not in line


def test_literal_values_are_still_shown(tmp_path):
    config = tmp_path / "c.toml"
    config.write_text(ENV_CONFIG.replace("${SP}", "PLAINTEXTT"))
    line = one_error_line(run("lag", "-c", str(config), env={"BS": "127.0.0.1:1", "CL": "c"}))
    assert line.endswith("clusters.c.security_protocol must be one of PLAINTEXT, SASL_PLAINTEXT, SASL_SSL, "
                         "SSL, got 'PLAINTEXTT'")


# ---- item 8: validate before side effects -----------------------------------------------------------


def test_pipeline_prefix_that_escapes_creates_nothing(tmp_path, monkeypatch):
    from eosctl.config import sandboxstate
    from eosctl.sandbox import noida

    home = tmp_path / "home" / ".eosctl"
    # A "running" sandbox nobody listens on: before the fix, the run made ../../escape, then failed.
    state = noida.SandboxState(pid=1, port=1, data_dir="/d", log_file="/l", started_at=0.0)
    monkeypatch.setattr(sandboxstate, "status", lambda home: state)
    result = run("sandbox", "pipeline", "--prefix", "../../escape", env={"EOSCTL_HOME": str(home)})
    line = one_error_line(result)
    assert "invalid value for '--prefix': '../../escape' cannot name topics and a directory" in line
    assert not (tmp_path / "escape").exists() and not home.exists()


@pytest.mark.parametrize("prefix", [".", "..", ".hidden", "a/b", "", "é", "x" * 241])
def test_pipeline_prefixes_kafka_or_the_file_system_would_refuse(prefix):
    line = one_error_line(run("sandbox", "pipeline", "--prefix", prefix))
    assert "invalid value for '--prefix'" in line


@pytest.mark.parametrize(("args", "problem"), [
    (["--records", "-5"], "invalid value for '--records': -5 is not in the range x>=1"),
    (["--records", "0"], "invalid value for '--records': 0 is not in the range x>=1"),
    (["--fault", "nope"], "invalid value for '--fault': 'nope' is not one of"),
])
def test_demo_validates_before_starting_the_broker(monkeypatch, args, problem):
    from eosctl.sandbox import noida

    started = []
    monkeypatch.setattr(noida, "up", lambda *a, **kw: started.append(a) or (_ for _ in ()).throw(
        AssertionError("the broker must not start")))
    line = one_error_line(run("demo", *args))
    assert problem in line
    assert started == []


# ---- item 10: two sinks -----------------------------------------------------------------------------


@pytest.mark.parametrize("command", [["ledger"], ["snapshot", "--out", "s.duckdb"], ["audit"]])
def test_two_sinks_are_refused_the_same_way_everywhere(command, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    line = one_error_line(run(*command, "--bootstrap", "127.0.0.1:1", "-t", "t", "--sink-duckdb", "a.duckdb",
                              "--sink-parquet", "b/*.parquet"))
    assert line == (f"eosctl: error: `main {command[0]}`: pass either --sink-duckdb or --sink-parquet, not "
                    f"both (see `main {command[0]} --help`)")
    assert list(tmp_path.iterdir()) == []


def _httpfs_installed() -> bool:
    import duckdb

    rows = duckdb.connect().execute(
        "SELECT installed FROM duckdb_extensions() WHERE extension_name = 'httpfs'").fetchall()
    return bool(rows and rows[0][0])


@pytest.mark.skipif(_httpfs_installed(), reason="httpfs is installed here: DuckDB would try S3 instead")
@pytest.mark.parametrize("command", ["ledger", "audit"])
def test_a_remote_parquet_sink_names_the_missing_extension_in_full(command):
    # Before: the hint stopped at "...install the required extension 'httpfs:" (DuckDB breaks its line).
    # --engine: without it the audit's size check asks the (unreachable) broker before the sink is read, and
    # the engine is never chosen on a failed read.
    engine = ["--engine", "local"] if command == "audit" else []
    line = one_error_line(run(command, "--bootstrap", "127.0.0.1:1", "-t", "t",
                              "--sink-parquet", "s3://bucket/x/*.parquet", *engine))
    assert line == ("eosctl: error: cannot read the columns of read_parquet('s3://bucket/x/*.parquet'): "
                    "reading it needs DuckDB's httpfs extension, which eosctl never downloads by itself: "
                    "install it once (python -c \"import duckdb; duckdb.install_extension('httpfs')\") or "
                    "audit a local copy of the files")
