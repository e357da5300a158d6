"""`eosctl sandbox pipeline` on a cluster that is not the sandbox: it lists what it will delete and
recreate, and goes on only with --yes or a yes at the prompt (no broker: run_pipeline is replaced)."""

from __future__ import annotations

import pytest

from eosctl.commands import pipeline_cmd
from eosctl.config import sandboxstate
from eosctl.sandbox import noida
from eosctl.sandbox import pipeline as sandbox_pipeline
from tests.support.helpers import eosctl

MANIFEST = {"sink": {"duckdb": "/w/sink.duckdb", "table": "orders_sink"}, "sink_rows": 0}
LISTING = [
    "10.0.0.7:9092 is not the sandbox; this run changes it:",
    "  delete and recreate topics  shop.orders, shop.enriched (3 partitions each)",
    "  delete consumer groups      shop.processor, shop.sink",
    "  fence transactional ids     shop.source, shop.processor, shop.hanging (aborts their open "
    "transactions)",
    "  write                       300 orders to shop.orders, processed into shop.enriched",
]


@pytest.fixture
def runs(monkeypatch: pytest.MonkeyPatch) -> list:
    """Every run_pipeline call (cluster bootstrap, prefix); the sandbox runs on 127.0.0.1:4242."""
    calls: list = []

    def fake_run(cluster, prefix, workdir, **kw):
        calls.append((cluster.bootstrap_servers, prefix))
        # what the real run writes for the cluster it ran on (eosctl.sandbox.pipeline.configfile.write_config)
        pinned = f'bootstrap_servers = "{cluster.bootstrap_servers}"'
        (workdir / "eosctl.toml").write_text(f"[clusters.c]\n{pinned}\n")
        return MANIFEST

    monkeypatch.setattr(sandbox_pipeline, "run_pipeline", fake_run)
    state = noida.SandboxState(pid=1, port=4242, data_dir="/d", log_file="/l", started_at=0.0)
    monkeypatch.setattr(sandboxstate, "status", lambda home: state)
    return calls


def invoke(tmp_path, *args: str, input: str | None = None):
    return eosctl("sandbox", "pipeline", "--prefix", "shop", "--workdir", str(tmp_path), *args, input=input,
                  columns=None, check=False)


def test_another_cluster_without_yes_lists_the_changes_and_exits_2(runs, tmp_path):
    result = invoke(tmp_path, "--bootstrap", "10.0.0.7:9092")
    assert result.exit_code == 2
    assert result.stderr.splitlines() == LISTING + [
        "eosctl: error: 10.0.0.7:9092 is not the sandbox and this run deletes and recreates topics and "
        "groups there; pass --yes to go ahead (nothing changed)"]
    assert runs == []


def test_another_cluster_with_yes_runs(runs, tmp_path):
    result = invoke(tmp_path, "--bootstrap", "10.0.0.7:9092", "--yes")
    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines()[:5] == LISTING
    assert runs == [("10.0.0.7:9092", "shop")]


def test_a_terminal_asks_and_no_changes_nothing(runs, tmp_path, monkeypatch):
    monkeypatch.setattr(pipeline_cmd, "_interactive", lambda: True)
    result = invoke(tmp_path, "--bootstrap", "10.0.0.7:9092", input="n\n")
    assert result.exit_code == 2
    assert "go ahead? [y/N]: n" in result.stderr
    assert result.stderr.splitlines()[-1] == "eosctl: error: nothing changed (answered no)"
    assert runs == []
    result = invoke(tmp_path, "--bootstrap", "10.0.0.7:9092", input="y\n")
    assert result.exit_code == 0, result.output
    assert runs == [("10.0.0.7:9092", "shop")]


@pytest.mark.parametrize("bootstrap", ["127.0.0.1:4242", "localhost:4242", None])
def test_the_sandbox_needs_no_confirmation(runs, tmp_path, bootstrap):
    result = invoke(tmp_path, *(["--bootstrap", bootstrap] if bootstrap else []))
    assert result.exit_code == 0, result.output
    assert "not the sandbox" not in result.stderr
    assert runs == [(bootstrap or "127.0.0.1:4242", "shop")]


@pytest.mark.parametrize("bootstrap, written", [(None, "sandbox"), ("localhost:4242", "sandbox"),
                                                ("10.0.0.7:9092", "10.0.0.7:9092")])
def test_the_config_names_the_sandbox_not_its_port(runs, tmp_path, bootstrap, written):
    """So its commands keep working after `eosctl sandbox down` / `up` picks another port."""
    result = invoke(tmp_path, *(["--bootstrap", bootstrap, "--yes"] if bootstrap else []))
    assert result.exit_code == 0, result.output
    assert (tmp_path / "eosctl.toml").read_text().splitlines()[1] == f'bootstrap_servers = "{written}"'


def test_another_port_on_the_sandbox_host_is_another_cluster(runs, tmp_path):
    result = invoke(tmp_path, "--bootstrap", "127.0.0.1:9092")
    assert result.exit_code == 2
    assert runs == []


def test_a_malformed_bootstrap_is_one_line(runs, tmp_path):
    result = invoke(tmp_path, "--bootstrap", "a:b:c", "--yes")
    assert result.exit_code == 2
    assert result.stderr == ("eosctl: error: --bootstrap 'a:b:c': more than one ':' (write an IPv6 address "
                             "as [ADDRESS]:PORT); expected HOST:PORT[,HOST:PORT...], e.g. localhost:9092\n")
    assert runs == []
