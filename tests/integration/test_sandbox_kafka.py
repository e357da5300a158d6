"""`eosctl sandbox up --broker kafka`: Apache Kafka from Maven Central jars as the user's sandbox, recorded
like the embedded one (status, down, `bootstrap_servers = "sandbox"`), one line where Java or the jars are
missing, and `eosctl demo --broker kafka` finding exactly its planted defects on it."""

from __future__ import annotations

import json
from functools import partial

import pytest
from click.testing import CliRunner

from eosctl.cli import main
from eosctl.config import sandboxstate
from eosctl.sandbox import maven, noida
from tests.support import helpers

pytestmark = pytest.mark.integration


eosctl = partial(helpers.eosctl, columns=None)


def test_sandbox_up_kafka_status_and_down(tmp_path, monkeypatch):
    monkeypatch.setenv("EOSCTL_HOME", str(tmp_path))
    try:
        up = eosctl("sandbox", "up", "--broker", "kafka")
        assert up.exit_code == 0, up.output
        state = sandboxstate.status(tmp_path)
        assert state is not None and (state.broker, state.version) == ("kafka", "4.4.0")
        assert up.stdout == (f"sandbox started: Apache Kafka 4.4.0, bootstrap {state.bootstrap} "
                             f"(pid {state.pid}, data {tmp_path / 'kafka'})\n")
        status = eosctl("sandbox", "status")
        assert status.exit_code == 0 and status.stdout.startswith(
            f"sandbox running: Apache Kafka 4.4.0, bootstrap {state.bootstrap}")
        # A command given no cluster reaches the running sandbox (the demo's config names it as
        # bootstrap_servers = "sandbox": test_demo_on_apache_kafka...).
        listed = eosctl("txns", "list", "--format", "json")
        assert listed.exit_code == 0, listed.output
        assert json.loads(listed.stdout) == {"transactions": []}
        again = eosctl("sandbox", "up")
        assert again.exit_code == 2
        assert again.stderr == ("eosctl: error: the Apache Kafka 4.4.0 sandbox already runs at "
                                f"{state.bootstrap}; run `eosctl sandbox down` first to start noida-db "
                                "instead\n")
        down = eosctl("sandbox", "down")
        assert down.exit_code == 0 and down.stdout.startswith(f"sandbox stopped (pid {state.pid})")
        assert sandboxstate.status(tmp_path) is None
        assert eosctl("sandbox", "status").exit_code == 1
    finally:
        noida.down(tmp_path)


def test_without_java_it_says_so_in_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("EOSCTL_HOME", str(tmp_path))
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    result = eosctl("sandbox", "up", "--broker", "kafka")
    assert result.exit_code == 2
    assert result.stderr == ("eosctl: error: Java 17 or newer is needed for Apache Kafka and is not on PATH; "
                             "install it (Debian: apt-get install openjdk-17-jre-headless)\n")
    assert sandboxstate.status(tmp_path) is None


def test_without_the_jars_or_maven_it_says_so_in_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("EOSCTL_HOME", str(tmp_path))
    monkeypatch.setenv("EOSCTL_JAR_CACHE", str(tmp_path / "no-jars"))
    real_which = maven.shutil.which
    monkeypatch.setattr(maven.shutil, "which", lambda name: None if name == "mvn" else real_which(name))
    result = eosctl("sandbox", "up", "--broker", "kafka")
    assert result.exit_code == 2
    assert result.stderr == (f"eosctl: error: the kafka 4.4.0 jars are not cached in {tmp_path / 'no-jars'}"
                             "/kafka-4.4.0 and Maven (mvn) is not on PATH to fetch them; install Maven "
                             "(Debian: apt-get install maven)\n")
    assert sandboxstate.status(tmp_path) is None


@pytest.mark.spark
def test_demo_on_apache_kafka_finds_exactly_the_planted_defects(tmp_path, monkeypatch, spark):
    monkeypatch.setenv("EOSCTL_HOME", str(tmp_path))
    try:
        result = CliRunner().invoke(main, ["demo", "--broker", "kafka", "--records", "120"])
    finally:
        noida.down(tmp_path)
    assert result.exit_code == 0, result.output + result.stderr
    assert "sandbox (Apache Kafka 4.4.0) started at" in result.stderr
    manifest = json.loads((tmp_path / "demo" / "manifest.json").read_text())
    planted = [f for hop in manifest["hops"] for f in hop["expected_findings"]]
    assert {f["fault"] for f in planted} == {"duplicate-replay", "skip", "aborted-leak", "upstream-retry"}
    assert f"the audit found exactly the {len(planted)} planted defects, and nothing else" in result.stderr
    assert len(manifest["hanging"]) == 1 and len(manifest["fencing"]) == 1
