"""`eosctl exporter` refuses what it cannot serve with one line and exit 2, before serving anything."""

from __future__ import annotations

import socket

import pytest

from tests.support.helpers import eosctl

REFUSED = "127.0.0.1:1"


def run(*args: str) -> tuple[int, str]:
    result = eosctl("exporter", *args, prog_name="eosctl", env={"EOSCTL_CONFIG": None}, columns=None)
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    return result.exit_code, lines[0]


def test_port_in_use_is_one_line_before_the_cluster_is_asked():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code, line = run("--bootstrap", REFUSED, "--listen", f"127.0.0.1:{port}")
    assert (code, line) == (2, f"eosctl: error: --listen 127.0.0.1:{port}: address already in use; pick "
                               "another with --listen HOST:PORT")


@pytest.mark.parametrize("listen", ["9308", "localhost:", ":9308", "127.0.0.1:65536", "127.0.0.1:x"])
def test_bad_listen_address(listen: str):
    code, line = run("--bootstrap", REFUSED, "--listen", listen)
    assert code == 2
    assert line.startswith(f"eosctl: error: `eosctl exporter`: invalid value for '--listen': '{listen}' is "
                           "not HOST:PORT (e.g. 127.0.0.1:9308")


def test_once_needs_a_textfile_and_a_textfile_needs_once(tmp_path):
    for args in (["--once"], ["--textfile", str(tmp_path / "x.prom")]):
        code, line = run("--bootstrap", REFUSED, *args)
        assert (code, line) == (2, "eosctl: error: `eosctl exporter`: --once and --textfile go together: "
                                   "--once --textfile FILE (see `eosctl exporter --help`)")
    assert list(tmp_path.iterdir()) == []


def test_bad_config_and_unknown_pipeline(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("x =\n")
    assert run("-c", str(bad)) == (2, f"eosctl: error: {bad}: not valid TOML: Invalid value (at line 1, "
                                      "column 4)")
    good = tmp_path / "eosctl.toml"
    good.write_text(f'[clusters.c]\nbootstrap_servers = "{REFUSED}"\n\n'
                    '[pipelines.p]\nsource_topics = ["t"]\n')
    assert run("-c", str(good), "-p", "nope") == (2, f"eosctl: error: {good}: no pipeline named 'nope' "
                                                     "(known: p)")


def test_a_cluster_that_never_answered_is_an_error_for_once(tmp_path):
    # Serving, it is an outage from the start instead (eosctl_up 0 with the reason, then recovery:
    # tests/integration/test_network_faults.py).
    code, line = run("--bootstrap", REFUSED, "--once", "--textfile", str(tmp_path / "x.prom"),
                     "--audit-every", "0")
    assert (code, line) == (2, f"eosctl: error: cannot reach Kafka at {REFUSED}: connection refused; check "
                               "--bootstrap / that the broker is up")
