"""Issue 32, item 5: a finding's story whole. The Audit and Ledger views show the row under the cursor in a
wrapping pane under the table, and the Log view the `cause:` of the finding Enter opened, whole at 80 and
at 200 columns (the table's cell stopped at ~50 characters, then at the terminal's width), never with its
rule twice ("replay: replay:")."""

from __future__ import annotations

import pytest
from synthetic import Explained

from tests.support.tui import SNAPSHOT, audited, shown_in, started, sync, until, words
from tests.unit.rules.test_causes import report


@pytest.mark.parametrize("width", [80, 200])
@sync
async def test_the_audit_pane_shows_each_cause_whole(width):
    from eosctl.report.findings import root_causes
    from tui.app import EosApp

    app = EosApp(Explained(4), refresh_seconds=3600)
    expected = report()
    assert max(len(f.cause.summary) for f in expected.findings if f.cause) > 2 * width  # wraps at any width
    async with app.run_test(size=(width, 24)) as pilot:
        await audited(pilot)
        view = app.view("audit")
        table = view.table.table
        findings = view.report.findings
        rule = {id(findings[i]): r.rule for r in root_causes(findings) for i in r.findings}
        pane = app.query_one("#audit-detail")
        for n in range(table.row_count):
            table.move_cursor(n)
            finding = table.row_at(n).item
            await pilot.pause(0.1)
            shown = words(" ".join(shown_in(app, pane)))
            assert f"{finding.kind} {finding.topic}[{finding.partition}]" in shown, shown
            if finding.cause is None:
                continue
            assert "cause: " + words(finding.cause.summary) in shown, (width, shown)
            r = rule[id(finding)]
            assert r in shown and f"{r}: {r}:" not in shown  # "replay: replay:" said nothing twice


@pytest.mark.parametrize("width", [80, 200])
@sync
async def test_the_ledger_pane_shows_every_flag_whole(width):
    from tui.app import EosApp
    from tui.sources import SnapshotSource

    app = EosApp(SnapshotSource(str(SNAPSHOT)))
    async with started(app, size=(width, 24)) as pilot:
        await pilot.press("6")
        await pilot.pause(0.2)
        (flagged,) = [p for p in app.dash.ledger.partitions if p.flags]
        assert app.view("ledger").table.cursor_key() == f"{flagged.topic}:{flagged.partition}"
        shown = words(" ".join(shown_in(app, app.query_one("#ledger-detail"))))
        for flag in flagged.flags:
            assert words(flag.message) in shown, (width, shown)
        if width == 80:  # the table's cell is cut: the pane is where the flag is read whole
            assert len(flagged.flags[0].message) > 40


@pytest.mark.parametrize("width", [80, 200])
@sync
async def test_enter_on_a_finding_shows_its_cause_whole_by_the_log(width):
    from tui.app import EosApp

    app = EosApp(Explained(4), refresh_seconds=3600)
    async with app.run_test(size=(width, 24)) as pilot:
        await audited(pilot)
        table = app.view("audit").table.table
        causes = [table.row_at(n).item.cause for n in range(table.row_count)]
        longest = max(range(len(causes)), key=lambda n: len(causes[n].summary) if causes[n] else 0)
        table.move_cursor(longest)
        finding = table.row_at(longest).item
        await pilot.press("enter")
        await until(pilot, lambda: app.view("log").plog is not None, "the finding's log")
        await pilot.pause(0.2)
        shown = words(" ".join(shown_in(app, app.query_one("#log-why"))))
        assert "cause: " + words(finding.cause.summary) in shown, (width, shown)


@sync
async def test_the_pane_follows_the_filter_and_is_gone_when_no_row_is_shown():
    from tui.app import EosApp
    from tui.sources import SnapshotSource

    app = EosApp(SnapshotSource(str(SNAPSHOT)))
    async with started(app) as pilot:
        await pilot.press("6", "slash", *"ched[1")
        await pilot.pause(0.2)
        pane = app.query_one("#ledger-detail")
        assert "tuiref.enriched[1] · 115 rows" in words(" ".join(shown_in(app, pane)))
        await pilot.press(*"zz")  # nothing matches: no row, no story of one
        await pilot.pause(0.2)
        assert not pane.display
