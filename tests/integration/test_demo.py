"""`eosctl demo`, the README's first command: its own sandbox, the faulty pipeline, and an audit that must
find exactly what the manifest planted; then every command it suggests, run as printed."""

from __future__ import annotations

import asyncio
import io
import json
import shlex
from pathlib import Path
from types import SimpleNamespace

import pytest
from click.testing import CliRunner
from rich.console import Console

from eosctl.cli import main
from eosctl.commands.demo_cmd import _agrees, _key
from eosctl.config import sandboxstate
from eosctl.report.findings import Finding
from eosctl.sandbox import noida
from eosctl.sandbox.pipeline.manifest import planted as planted_findings
from tests.support.tui import tui_audit

pytestmark = pytest.mark.integration


def test_demo_ends_with_an_audit_that_finds_exactly_the_planted_defects(tmp_path, monkeypatch):
    # The demo audits as `eosctl audit -c` does: its few hundred offsets pick the local engine, no Spark.
    monkeypatch.setenv("EOSCTL_HOME", str(tmp_path))
    try:
        result = CliRunner().invoke(main, ["demo", "--records", "120"])
        assert result.exit_code == 0, result.output + result.stderr
        manifest = json.loads((tmp_path / "demo" / "manifest.json").read_text())
        planted = [f for hop in manifest["hops"] for f in hop["expected_findings"]]  # both hops
        assert {f["fault"] for f in planted} == {"duplicate-replay", "skip", "aborted-leak", "upstream-retry"}
        assert {f["topic"] for f in planted} == {"demo.orders", "demo.enriched"}
        said = f"the audit found exactly the {len(planted)} planted defects, and nothing else"
        assert said in result.stderr
        assert "FAIL  6 partitions" in result.stdout  # the audit's verdict line, both hops, findings shown
        assert "hops, in order" in result.stdout and "demo.process" in result.stdout
        run_the_printed_commands(result.stdout, tmp_path, manifest)
    finally:
        noida.down(tmp_path)


def run_the_printed_commands(stdout: str, home: Path, manifest: dict) -> None:
    """Every "next, try" command, as a shell reads the printed line (a note after it is a comment), does
    what it says (issue 49): the TUI's through Textual's pilot, `a` on its Audit tab auditing both hops to
    the planted defects; `sandbox down` last, stopping the demo's broker."""
    config, workdir = home / "demo" / "eosctl.toml", home / "demo"
    printed = [shlex.split(line, comments=True) for line in stdout.split("next, try:\n", 1)[1].splitlines()
               if line.startswith("  eosctl ")]
    commands = [" ".join(args[1:3]) for args in printed]
    assert commands == ["txns hanging", "lag -c", "log -c", "ledger -c", "audit -c", "audit -c", "tui -c",
                        "sandbox down"], printed
    assert all(str(config) in args for args in printed[:-1])
    planted = {_key(f) for f in planted_findings(manifest)}
    for args in printed:
        if args[1] == "tui":
            overview, report = asyncio.run(tui_audit(args[1:]))
            assert [row[0] for row in overview] == ["demo.pipeline"]
            assert [h.name for h in report.hops] == ["demo.process", "demo"]
            assert {_key(f.to_dict()) for f in report.findings} == planted
            continue
        result = CliRunner().invoke(main, args[1:], env={"COLUMNS": "250"})
        what = (args, result.exit_code, result.output[-3000:])
        if args[1:3] == ["txns", "hanging"]:  # the demo's hanging transaction: older than 10 s, or not yet
            assert result.exit_code in (0, 1) and "demo." in result.stdout, what
        elif args[1] in ("lag", "log"):
            assert result.exit_code == 0 and "demo.enriched" in result.stdout, what
        elif args[1] == "ledger":  # the planted skip: a gap the sink's offsets passed
            assert result.exit_code == 1 and "gap" in result.stdout, what
        elif args[1] == "audit" and "--out" not in args:
            assert result.exit_code == 1 and "FAIL  6 partitions" in result.stdout, what
        elif args[1] == "audit":
            assert result.exit_code == 1, what
            page = (workdir / "report.html").read_text()
            assert page.startswith("<!DOCTYPE html>") and "demo.enriched" in page
            again = CliRunner().invoke(main, args[1:])  # replaces the demo's own page
            assert again.exit_code == 1, again.output
        else:
            assert args[1:] == ["sandbox", "down"] and result.exit_code == 0, what
            assert sandboxstate.status(home) is None


def test_a_disagreement_with_the_manifest_is_named_and_fails():
    gap = {"kind": "gap", "topic": "demo.enriched", "partition": 1, "first_offset": 11, "last_offset": 13,
           "count": 3}
    dup = {"kind": "duplicate", "topic": "demo.enriched", "partition": 0, "first_offset": 22,
           "last_offset": 24, "count": 3}
    report = SimpleNamespace(findings=[Finding(**dup)])
    out = io.StringIO()
    assert not _agrees(report, {"expected_findings": [gap, dup]}, Console(file=out, width=200))
    assert "planted but not found: gap demo.enriched[1] offsets 11..13 (3)" in out.getvalue()
    assert "found but not planted" not in out.getvalue()
    assert _agrees(SimpleNamespace(findings=[Finding(**dup), Finding(**gap)]),
                   {"expected_findings": [gap, dup]}, Console(file=io.StringIO()))
