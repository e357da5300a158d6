"""The TUI while the partitions' leaders move on the three-node cluster (issue 31 item 2): every refresh it
shows has the right high watermarks and no lag, and once the churn stops no outage banner is left."""

from __future__ import annotations

import asyncio

import pytest
from textual.widgets import Static

from tests.integration.test_leaders_move import PARTITIONS, RECORDS, TXN, Churn, moving  # noqa: F401
from tests.support.tui import running, sync, until

pytestmark = pytest.mark.integration


@sync
async def test_the_tui_shows_the_right_numbers_while_leaders_move(moving, tmp_path):  # noqa: F811
    from eosctl.config.model import Cluster
    from eosctl.config.target import Target
    from tui.app import EosApp
    from tui.sources import LiveSource

    cluster, topic, group, _ = moving
    hw = RECORDS + RECORDS // TXN
    target = Target(cluster=Cluster(name="c3", bootstrap_servers=cluster.bootstrap), pipeline=None,
                    config=None, topics=(topic,), group=group)
    app = EosApp(LiveSource(target, timeout_ms=5000), refresh_seconds=0.5)
    seen = []
    async with running(app, (120, 30)) as pilot:
        await until(pilot, lambda: app.dash is not None, "the first refresh", timeout=60)
        with Churn(cluster, topic, tmp_path) as churn:
            while churn.rounds < 2 and churn.thread.is_alive():
                dash = app.dash
                if dash is not None and dash.lag is not None and (not seen or seen[-1] is not dash):
                    seen.append(dash)
                await asyncio.sleep(0.3)
        assert churn.rounds >= 2, churn.errors
        banner = app.query_one("#banner", Static)
        await until(pilot, lambda: not banner.has_class("shown"), "no banner after the churn", timeout=60)
    for dash in seen:
        rows = [p for p in dash.lag.partitions if p.topic == topic and p.error is None]
        assert all(p.hw == hw and p.committed == hw for p in rows), rows
    assert len(seen) >= 2
