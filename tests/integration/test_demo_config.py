"""The demo's config names the sandbox, not today's port: its suggested commands survive a restart."""

from __future__ import annotations

import socket

import pytest
from click.testing import CliRunner

from eosctl.cli import main
from eosctl.config import sandboxstate
from eosctl.sandbox import noida

pytestmark = pytest.mark.integration


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_demo_config_says_sandbox_and_keeps_working_after_the_port_changes(tmp_path, monkeypatch):
    monkeypatch.setenv("EOSCTL_HOME", str(tmp_path))
    config = tmp_path / "demo" / "eosctl.toml"
    runner = CliRunner()
    try:
        demo = runner.invoke(main, ["demo", "--records", "60", "--no-audit"])
        assert demo.exit_code == 0, demo.output
        first = sandboxstate.status(tmp_path).bootstrap
        text = config.read_text()
        assert 'bootstrap_servers = "sandbox"' in text and first not in text
        page = tmp_path / "demo" / "report.html"
        assert f"eosctl audit -c {config} --format html --out {page}" in demo.stdout

        noida.down(tmp_path)
        port = free_port()
        noida.up(tmp_path, port=port)
        assert sandboxstate.status(tmp_path).bootstrap.endswith(f":{port}") and first != f"127.0.0.1:{port}"
        # As the demo prints it: the ledger is the sink hop's (the config's default is the whole pipeline).
        assert f"eosctl ledger -c {config} -p demo" in demo.stdout
        ledger = runner.invoke(main, ["ledger", "-c", str(config), "-p", "demo", "--format", "json"])
        assert ledger.exit_code in (0, 1), ledger.stderr
        assert '"demo.enriched"' in ledger.stdout
    finally:
        noida.down(tmp_path)
