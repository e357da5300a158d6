"""100k findings stay usable (issue 20, defect 9): the audit's table output becomes aligned lines past
TABLE_ROWS (every finding, escaped), and a snapshot stores and loads every finding."""

from __future__ import annotations

import io
from datetime import UTC, datetime
from pathlib import Path

from rich.console import Console

from eosctl.commands.audit_cmd import _print_parts
from eosctl.inspection.capture import Capture
from eosctl.inspection.snapshot import load_snapshot, write_snapshot
from eosctl.output.audit import TABLE_ROWS, render
from eosctl.report.findings import AuditReport, Finding, PartitionSummary

N = 20_000


def many(topic: str = "orders") -> AuditReport:
    part = PartitionSummary(topic, 0, 0, 2 * N, 2 * N, 2 * N, N)
    return AuditReport.build([part], [Finding("gap", topic, 0, o, o, 1) for o in range(0, 2 * N, 2)])


def test_the_table_lists_every_finding_as_an_aligned_line() -> None:
    buf = io.StringIO()
    _print_parts(Console(file=buf, width=120, color_system=None), render(many("[/x]\x1b[2J"), "table"))
    lines = buf.getvalue().splitlines()
    rows = [ln for ln in lines if ln.startswith("gap ")]
    assert len(rows) == N > TABLE_ROWS
    assert rows[0].split() == ["gap", "[/x]\\x1b[2J", "0", "0", "1"]
    assert rows[-1].split()[-2:] == [str(2 * N - 2), "1"]
    assert len({ln.index("[/x]") for ln in rows}) == 1  # aligned
    assert "\x1b" not in buf.getvalue()
    assert f"findings ({N})" in lines


def test_a_snapshot_stores_and_loads_every_finding(tmp_path: Path) -> None:
    report = many()
    cap = Capture(captured_at=datetime.now(UTC), bootstrap="b:9092", pipeline=None, group=None,
                  topics=["orders"], audit=report, sections={"audit": "ok"})
    write_snapshot(cap, tmp_path / "s.duckdb")
    loaded = load_snapshot(tmp_path / "s.duckdb").audit
    assert loaded.findings == report.findings and loaded.verdict == "fail"
