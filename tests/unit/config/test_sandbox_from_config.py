"""The sandbox is found from the config that names it (issue 32, item 10): `sandbox pipeline` records its
state directory in the config (sandbox_home), so commands find it from any directory; a config that names
none says where it looked and how to start it there."""

from __future__ import annotations

import json
import os
from pathlib import Path

from click.testing import CliRunner

from eosctl.cli import main
from eosctl.config.target import resolve
from eosctl.sandbox.pipeline.configfile import point_at_sandbox


def fake_sandbox(home: Path, port: int) -> None:
    """A state file as `sandbox up` leaves it, for a live process (this test's own; the test takes it for
    the broker)."""
    home.mkdir(parents=True)
    data = str(Path(__file__).resolve())
    (home / "sandbox.json").write_text(json.dumps({"pid": os.getpid(), "port": port, "data_dir": data,
                                                   "log_file": "x", "started_at": 0.0}))


def config_of(workdir: Path, port: int, home: Path | None) -> Path:
    workdir.mkdir(parents=True, exist_ok=True)
    config = workdir / "eosctl.toml"
    config.write_text(f'[clusters.sandbox]\nbootstrap_servers = "127.0.0.1:{port}"\n'
                      '[pipelines.p]\nsource_topics = ["t"]\n')
    return point_at_sandbox(config, f"127.0.0.1:{port}", home)


def test_a_config_written_for_the_sandbox_finds_it_from_any_directory(tmp_path: Path, monkeypatch) -> None:
    home = tmp_path / "started-here" / ".eosctl"
    fake_sandbox(home, 45123)
    monkeypatch.setattr("eosctl.config.sandboxstate._is_our_broker", lambda state: True)
    config = config_of(tmp_path / "started-here" / ".eosctl" / "ux1", 45123, home)
    assert f'sandbox_home = "{home.resolve()}"' in config.read_text()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    monkeypatch.delenv("EOSCTL_HOME", raising=False)
    assert resolve(str(config), "p", None).cluster.bootstrap_servers == "127.0.0.1:45123"


def test_a_sandbox_not_found_says_where_it_looked(tmp_path: Path, monkeypatch) -> None:
    config = config_of(tmp_path / "w", 45124, None)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("EOSCTL_HOME", raising=False)
    result = CliRunner().invoke(main, ["lag", "-c", str(config), "-p", "p"])
    assert result.exit_code == 2
    looked = tmp_path.resolve() / ".eosctl"
    assert result.output.strip().endswith(
        f"no sandbox runs from {looked} (no live broker in {looked / 'sandbox.json'}); start it there "
        f"with `EOSCTL_HOME={looked} eosctl sandbox up`, or set clusters.sandbox.sandbox_home to the "
        "directory of the one you started"), result.output
