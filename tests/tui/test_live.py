"""Pilot tests against a live broker: the reference pipeline with the hanging, zombie and duplicate-replay
faults on the shared test broker, and a throwaway broker that is stopped mid-session."""

from __future__ import annotations

import pytest
from textual.widgets import Static, TabbedContent

from tests.support.tui import cursor_row, rows_of, running, sync, text_of, until

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def reference(bootstrap, tmp_path_factory):
    """One pipeline run for the module: (target, manifest)."""
    import uuid

    from eosctl.config.model import Cluster
    from eosctl.config.target import resolve
    from eosctl.sandbox.pipeline import run_pipeline

    prefix = "tui" + uuid.uuid4().hex[:8]
    workdir = tmp_path_factory.mktemp("tuiref")
    manifest = run_pipeline(
        Cluster(name="test", bootstrap_servers=bootstrap),
        prefix,
        workdir,
        faults=("hanging", "zombie", "duplicate-replay"),
    )
    return resolve(str(workdir / "eosctl.toml"), prefix, None), manifest


async def _data(app, pilot):
    await until(pilot, lambda: app.dash is not None, "the first refresh")


@sync
async def test_hanging_transaction_is_highlighted(reference):
    from tui.app import EosApp
    from tui.sources import LiveSource

    target, manifest = reference
    hanging = manifest["hanging"][0]
    # max_age 0: the planted transaction is seconds old; in production the default is Kafka's 15 minutes.
    app = EosApp(LiveSource(target, max_age_s=0), refresh_seconds=60)
    async with running(app, (100, 30)) as pilot:
        await _data(app, pilot)
        await pilot.press("2")
        await pilot.pause()
        rows = {r[0]: r for r in rows_of(app, "transactions")}
        row = rows[hanging["transactional_id"]]
        assert row[1] == "HANGING Ongoing"
        assert row[2] == str(hanging["producer_id"])
        table = app.view("transactions").query_one("FilterTable").table
        index = [r[0] for r in rows_of(app, "transactions")].index(hanging["transactional_id"])
        assert "red" in str(table.get_row_at(index)[0].style)  # and bold, so NO_COLOR still shows it
        head = text_of(app.query_one("#txn-head", Static))
        assert "1 HANGING" in head
        overview = rows_of(app, "overview")[0]
        assert overview[1] == "RED"


@pytest.mark.spark
@sync
async def test_enter_on_an_audit_finding_opens_the_log_at_its_offsets(reference):
    from eosctl.commands.tui_cmd import run_audit
    from tui.app import EosApp
    from tui.sources import LiveSource

    target, manifest = reference
    dup = manifest["expected_findings"][0]
    app = EosApp(LiveSource(target, run_audit=run_audit), refresh_seconds=60)
    async with running(app, (100, 30)) as pilot:
        await _data(app, pilot)
        await pilot.press("7", "a")  # the TUI audits on the local engine: no JVM to wait for
        view = app.view("audit")
        await pilot.press("1")  # the UI answers while the audit runs in a worker
        await pilot.pause()
        assert app.query_one(TabbedContent).active == "overview"
        await until(pilot, lambda: not view.running and view.report is not None, "the audit", timeout=120,
                    step=0.2)
        assert view.report.verdict == "fail" and view.report.engine["name"] == "local"
        await pilot.press("7")
        await pilot.pause()
        rows = rows_of(app, "audit")
        assert rows[0][:5] == [
            "duplicate",
            dup["topic"],
            str(dup["partition"]),
            f"{dup['first_offset']}..{dup['last_offset']}",
            str(dup["count"]),
        ]
        await pilot.press("enter")
        await until(pilot, lambda: app.view("log").plog is not None
                    and app.view("log").plog.partition == dup["partition"], "the finding's log")
        await pilot.pause(0.2)
        assert app.query_one(TabbedContent).active == "log"
        row = cursor_row(app, "log")
        first, last = (int(x) for x in row[1].split(".."))
        assert row[0] == "▶" and first <= dup["first_offset"] and dup["last_offset"] <= last
        assert rows_of(app, "overview")[0][2] == "FAIL"


@sync
async def test_broker_stopping_shows_a_banner_and_the_app_keeps_responding(tmp_path, unique):
    from eosctl.config.model import Cluster
    from eosctl.config.target import Target
    from eosctl.sandbox import noida
    from tui.app import EosApp
    from tui.sources import LiveSource

    state, _ = noida.up(tmp_path / "sb")  # a throwaway broker: the shared one must keep running
    try:
        from confluent_kafka import Producer

        p = Producer({"bootstrap.servers": state.bootstrap})
        p.produce(f"{unique}.t", b"x")
        p.flush(10)
        cluster = Cluster(name="throwaway", bootstrap_servers=state.bootstrap)
        target = Target(cluster=cluster, pipeline=None, config=None, topics=(f"{unique}.t",), group=None)
        app = EosApp(LiveSource(target, timeout_ms=2000), refresh_seconds=1)
        async with running(app, (80, 24)) as pilot:
            await _data(app, pilot)
            banner = app.query_one("#banner", Static)
            assert not banner.has_class("shown")
            noida.down(tmp_path / "sb")
            await until(pilot, lambda: banner.has_class("shown") and "retrying" in text_of(banner),
                        "the outage banner", timeout=30, step=0.2)
            assert "cannot reach Kafka" in text_of(banner) or "slow" in text_of(banner)
            await pilot.press("5")  # still answering keys
            await pilot.pause()
            assert app.query_one(TabbedContent).active == "log"
            assert app.dash is not None  # the last good data stays on screen
    finally:
        noida.down(tmp_path / "sb")
