"""invalid_row findings and ledger rows without a topic, partition or offsets in the TUI (issue 9 case 8)."""

from __future__ import annotations

from textual.widgets import Static

from eosctl.inspection.ledger import Ledger, LedgerFlag, PartitionLedger
from eosctl.report.findings import AuditReport, Finding, PartitionSummary
from tests.support.tui import rows_of, sync, text_of


@sync
async def test_audit_view_lists_invalid_rows_and_enter_stays_put():
    from synthetic import SyntheticSource

    from tui.app import EosApp

    source = SyntheticSource(20)
    findings = [Finding("invalid_row", None, 0, None, None, 2, detail="src_topic is NULL"),
                Finding("invalid_row", source.topic, None, None, None, 1, detail="src_partition is NULL")]
    parts = [PartitionSummary(source.topic, p, 0, 1000, 1000, 1000, 1000) for p in range(20)]
    source.run_audit = lambda progress: AuditReport.build(parts, findings, sink="dirty.duckdb (orders_sink)")
    app = EosApp(source, refresh_seconds=60)
    async with app.run_test(size=(120, 30)) as pilot:
        while app.dash is None:
            await pilot.pause(0.05)
        await pilot.press("7", "a")
        while app.view("audit").running or app.view("audit").report is None:
            await pilot.pause(0.05)
        assert rows_of(app, "audit") == [
            ["invalid_row", "-", "0", "-", "2", "src_topic is NULL"],
            ["invalid_row", "synth.orders", "-", "-", "1", "src_partition is NULL"],
        ]
        await pilot.press("enter")  # no offsets to open: stays on the audit view
        await pilot.pause(0.2)
        assert app.view("audit").display and app.view("log").plog is None
        await pilot.press("1")
        await pilot.pause(0.2)
        assert "audit failed: 2 findings (invalid_row)" in text_of(app.query_one("#overview-reasons", Static))


def test_ledger_rows_show_a_row_without_topic_or_partition():
    from tui.views.ledger import ledger_rows

    flag = LedgerFlag("invalid_row", None, None, 1, "1 sink row no Kafka record can match: src_topic is NULL")
    ledger = Ledger(None, "dirty.duckdb (orders_sink)", None, True,
                    [PartitionLedger(None, 0, rows=1, flags=[flag])])
    (row,) = ledger_rows(ledger)
    assert row.cells[0] == "-[0]" and row.cells[-1] == flag.message and row.level == "bad"
