"""`eosctl explain REPORT` on a big report (issue 34, a smaller item)."""

from __future__ import annotations

import json

from click.testing import CliRunner

from eosctl.cli import main


def test_explain_lists_the_first_findings_of_a_root_cause_and_counts_the_rest(tmp_path):
    """A smaller item of issue 34: `explain` on a 1M-finding report laid out every row (530 s, 5 GB)."""
    from eosctl.report.findings import AuditReport, Finding, PartitionSummary

    findings = [Finding("duplicate", "orders", 0, 2 * i, 2 * i, 1) for i in range(250)]
    parts = [PartitionSummary("orders", 0, 0, 1000, 1000, 1000, 1250, 0, True, None)]
    src = tmp_path / "r.json"
    src.write_text(AuditReport.build(parts, findings, sink="s.duckdb (sink)", group="g").to_json())
    result = CliRunner().invoke(main, ["explain", str(src)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert result.stdout.count("duplicate ") == 100
    assert "... and 150 more findings of this root cause (all of them: --format json)" in result.stdout
    result = CliRunner().invoke(main, ["explain", str(src), "--format", "json"])
    assert sum(len(r["findings"]) for r in json.loads(result.stdout)["root_causes"]) == 250
