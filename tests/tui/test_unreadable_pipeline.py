"""Issue 49, item 5: the Overview names the configured pipeline whatever could not be read.

Without Read on the pipeline's topic (Kafka answers Metadata, then refuses ListOffsets and Fetch with
TOPIC_AUTHORIZATION_FAILED), the TUI's banner says to grant Read; its Overview must still be the
pipeline's row, RED, with that reason, not "no pipeline". The scripted broker refuses as Kafka does.
"""

from __future__ import annotations

import pytest
from textual.widgets import Static

from tests.kafkasim import TOPIC_AUTHORIZATION_FAILED, KafkaSim
from tests.support.tui import rows_of, running, sync, text_of, until


@pytest.fixture
def refused(kafka_sim: KafkaSim) -> KafkaSim:
    kafka_sim.partition("shop.orders", 0).data(5)
    kafka_sim.group("shop.sink", {("shop.orders", 0): 5}, state="Stable")
    for api in ("list_offsets", "fetch"):
        kafka_sim.inject(api, "shop.orders", error=TOPIC_AUTHORIZATION_FAILED, times=None,
                         **({"probe": None} if api == "fetch" else {}))
    return kafka_sim


def app_for(sim: KafkaSim):
    from eosctl.config.model import Cluster, Pipeline
    from eosctl.config.target import Target
    from tui.app import EosApp
    from tui.sources import LiveSource

    pipe = Pipeline("shop", "c", ("shop.orders",), "shop.sink")
    target = Target(cluster=Cluster(name="c", bootstrap_servers=sim.bootstrap), pipeline=pipe, config=None,
                    topics=pipe.source_topics, group=pipe.group)
    return EosApp(LiveSource(target, timeout_ms=3000), refresh_seconds=0.5)


@sync
async def test_the_overview_names_the_pipeline_it_cannot_read(refused: KafkaSim) -> None:
    app = app_for(refused)
    async with running(app, (160, 30)) as pilot:
        banner = app.query_one("#banner", Static)
        await until(pilot, lambda: banner.has_class("shown") and "grant Read" in text_of(banner),
                    "the banner", timeout=30, step=0.2)
        await until(pilot, lambda: rows_of(app, "overview"), "the Overview's row", timeout=10, step=0.1)
        [row] = rows_of(app, "overview")
        assert row[:3] == ["shop", "RED", "-"], row
        reasons = text_of(app.view("overview").query_one("#overview-reasons", Static))
        assert "grant Read on topic shop.orders" in reasons, reasons
        assert "no pipeline" not in reasons
