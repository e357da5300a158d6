"""The audit view with causes: findings grouped by root cause, and Enter on one shows its cause next to
its offsets in the Log view (a synthetic cluster whose audit returns explained findings)."""

from __future__ import annotations

from synthetic import SyntheticSource
from textual.widgets import Static
from tuihelp import rows_of, sync, text_of, until

from tests.unit.test_causes import report


class Explained(SyntheticSource):
    def run_audit(self, progress):
        return report()


@sync
async def test_findings_grouped_by_root_cause_and_enter_opens_the_cause_by_the_log():
    from tui.app import EosApp

    app = EosApp(Explained(4), refresh_seconds=1)
    expected = report()
    async with app.run_test(size=(120, 30)) as pilot:
        await pilot.pause(0.2)
        await until(pilot, lambda: app.dash is not None, "the first data")
        await pilot.press("7", "a")
        await until(pilot, lambda: not app.view("audit").running and app.view("audit").report is not None,
                    "the audit")
        rows = rows_of(app, "audit")
        rules = [r[5].split(":")[0] for r in rows]
        assert len(rows) == len(expected.findings)
        # Each root cause's findings are together, in the order of each group's first finding.
        assert rules == sorted(rules, key=rules.index)
        first = expected.findings[0]
        assert rows[0][0] == first.kind and rows[0][5].startswith(rules[0] + ": ")
        await pilot.press("enter")
        await until(pilot, lambda: app.view("log").plog is not None, "the finding's log")
        await pilot.pause(0.1)
        summary = text_of(app.query_one("#log-summary", Static))
        assert "cause: " + first.cause.summary[:40] in summary.replace("\n", " ")
