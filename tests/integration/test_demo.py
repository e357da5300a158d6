"""`eosctl demo`, the README's first command: its own sandbox, the faulty pipeline, and an audit that must
find exactly what the manifest planted."""

from __future__ import annotations

import io
import json
from types import SimpleNamespace

import pytest
from click.testing import CliRunner
from rich.console import Console

from eosctl.cli import main
from eosctl.commands.demo_cmd import _agrees
from eosctl.report.findings import Finding
from eosctl.sandbox import noida

pytestmark = pytest.mark.integration


@pytest.mark.spark
def test_demo_ends_with_an_audit_that_finds_exactly_the_planted_defects(tmp_path, monkeypatch, spark):
    monkeypatch.setenv("EOSCTL_HOME", str(tmp_path))
    try:
        result = CliRunner().invoke(main, ["demo", "--records", "120"])
    finally:
        noida.down(tmp_path)
    assert result.exit_code == 0, result.output + result.stderr
    manifest = json.loads((tmp_path / "demo" / "manifest.json").read_text())
    planted = [f for hop in manifest["hops"] for f in hop["expected_findings"]]  # both hops
    assert {f["fault"] for f in planted} == {"duplicate-replay", "skip", "aborted-leak", "upstream-retry"}
    assert {f["topic"] for f in planted} == {"demo.orders", "demo.enriched"}
    assert f"the audit found exactly the {len(planted)} planted defects, and nothing else" in result.stderr
    assert "FAIL  6 partitions" in result.stdout  # the audit's own verdict line, both hops, findings shown
    assert "hops, in order" in result.stdout and "demo.process" in result.stdout
    assert f"eosctl tui -c {tmp_path / 'demo' / 'eosctl.toml'}" in result.stdout


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
