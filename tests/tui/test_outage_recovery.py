"""The live TUI through a broker outage (issue 10, item 4): the banner comes, then goes again when the
broker is back on the same port, and the lag of a committed group is fresh and error-free once more.

A throwaway broker (its own state directory): the session broker must keep running.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from textual.widgets import Static

from tests.support.broker import committed_group
from tests.support.tui import text_of, until

pytestmark = pytest.mark.integration


@pytest.mark.timeout(180)
def test_the_banner_goes_away_when_the_broker_is_back(tmp_path):
    from eosctl.config.model import Cluster
    from eosctl.config.target import Target
    from eosctl.sandbox import noida
    from tui.app import EosApp
    from tui.sources import LiveSource

    home = tmp_path / "sb"
    state, _ = noida.up(home)
    try:
        topic, group = committed_group(state.bootstrap, "tuiout", 3)
        cluster = Cluster(name="throwaway", bootstrap_servers=state.bootstrap)
        target = Target(cluster=cluster, pipeline=None, config=None, topics=(topic,), group=group)
        source = LiveSource(target, timeout_ms=2000)

        async def body() -> None:
            app = EosApp(source, refresh_seconds=1)
            async with app.run_test(size=(100, 30)) as pilot:
                banner = app.query_one("#banner", Static)
                await until(pilot, lambda: app.dash is not None and app.dash.lag is not None, "first data")
                assert [(p.topic, p.committed) for p in app.dash.lag.partitions] == [(topic, 3)]
                noida.down(home)
                await until(pilot, lambda: banner.has_class("shown") and "retrying" in text_of(banner),
                             "outage banner")
                noida.up(home, port=state.port)
                back = time.time()
                await until(pilot, lambda: not banner.has_class("shown") and app.dash.taken_at > back
                             and "lag" not in app.dash.errors and app.dash.lag is not None,
                             "fresh data after the outage", timeout=50)
                lag = app.dash.lag.partitions
                assert [(p.topic, p.committed, p.error) for p in lag] == [(topic, 3, None)]

        asyncio.run(asyncio.wait_for(body(), timeout=150))
        source.close()
    finally:
        noida.down(home)
