"""The audit view with causes: findings grouped by root cause, and Enter on one shows its cause next to
its offsets in the Log view (a synthetic cluster whose audit returns explained findings)."""

from __future__ import annotations

from synthetic import Explained, SyntheticSource
from textual.widgets import Static

from tests.support.tui import audited, rows_of, started, sync, text_of, until
from tests.unit.rules.test_causes import report


@sync
async def test_findings_grouped_by_root_cause_and_enter_opens_the_cause_by_the_log():
    from tui.app import EosApp

    app = EosApp(Explained(4), refresh_seconds=1)
    expected = report()
    async with app.run_test(size=(120, 30)) as pilot:
        await audited(pilot)
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
        summary = text_of(app.query_one("#log-why", Static))  # under the summary, wrapped
        assert "cause: " + first.cause.summary[:40] in summary.replace("\n", " ")


def hop_report():
    """A pipeline audited hop by hop (eosctl.report.findings.merge_hops): the stage's hop, then the sink's."""
    from eosctl.report.findings import AuditReport, Finding, PartitionSummary, merge_hops

    def hop(topic: str, findings: list) -> AuditReport:
        return AuditReport.build([PartitionSummary(topic, 0, 0, 100, 100, 98, 99)], findings,
                                 sink=f"{topic} sink")

    stage = hop("shop.orders", [Finding("gap", "shop.orders", 0, 7, 8, 2)])
    sink = hop("shop.enriched", [Finding("duplicate", "shop.enriched", 0, 3, 3, 1),
                                 Finding("gap", "shop.enriched", 0, 50, 50, 1)])
    return merge_hops([("shop.process", stage), ("shop", sink)], [("shop.orders",), ("shop.enriched",)])


class Hops(SyntheticSource):
    def run_audit(self, progress):
        return hop_report()


@sync
async def test_a_pipeline_audited_hop_by_hop_shows_each_hop_and_its_findings_under_it():
    from tui.app import EosApp

    app = EosApp(Hops(4), refresh_seconds=1)
    async with app.run_test(size=(160, 30)) as pilot:
        await audited(pilot)
        head = text_of(app.query_one("#audit-head", Static))
        assert " FAIL  hop shop.process: shop.orders -> shop.orders sink · 1 finding (1 failing)" in head
        assert " FAIL  hop shop: shop.enriched -> shop.enriched sink · 2 findings (2 failing)" in head
        rows = rows_of(app, "audit")
        assert [(r[0], r[1], r[5].split(" · ")[0]) for r in rows] == [
            ("gap", "shop.orders", "hop shop.process"), ("duplicate", "shop.enriched", "hop shop"),
            ("gap", "shop.enriched", "hop shop")]


@sync
async def test_a_wide_terminal_shows_each_cause_whole_and_never_says_its_rule_twice():
    # Issue 32, item 5: the detail stopped at ~50 characters even at 200 columns ("replay: replay: ...").
    from eosctl.output.finding import short_cause
    from eosctl.report.rootcauses import root_causes
    from tui.app import EosApp

    app = EosApp(Explained(4), refresh_seconds=1)
    expected = report()
    rule = {i: r.rule for r in root_causes(expected.findings) for i in r.findings}
    async with app.run_test(size=(220, 30)) as pilot:
        await audited(pilot)
        await pilot.pause(0.2)
        details = {r[5] for r in rows_of(app, "audit")}
        for i, f in enumerate(expected.findings):
            if f.cause is None:
                continue
            cause = short_cause(f)
            whole = cause if cause.startswith(rule[i] + ":") else f"{rule[i]}: {cause}"
            assert whole in details, (whole, details)
        assert not any(d.split(": ")[0] == d.split(": ")[1] for d in details if d.count(": ") >= 2)


@sync
async def test_the_audit_view_before_a_run_says_how_to_run_one():
    # Issue 32, item 9: before any audit the view said "no findings", an audit's result.
    from tui.app import EosApp
    from tui.rowtable import RowTable

    app = EosApp(Explained(4), refresh_seconds=1)
    async with started(app, size=(120, 30)) as pilot:
        await pilot.press("7")
        await pilot.pause(0.2)
        assert app.view("audit").query_one(RowTable).empty == "no audit yet: press a to run one"
        await pilot.press("a")
        await until(pilot, lambda: not app.view("audit").running and app.view("audit").report is not None,
                    "the audit")
        assert app.view("audit").query_one(RowTable).empty == "no findings"


def test_the_help_fits_its_box_at_80_columns_without_breaking_a_phrase():
    # Issue 32, item 9: the help box wrapped mid-phrase. 80 columns: the box is 72 wide (90%), 68 inside.
    from rich.text import Text

    from tui.screens import HELP

    assert max(len(line) for line in Text.from_markup(HELP).plain.splitlines()) <= 68
