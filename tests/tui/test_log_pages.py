"""The Log tab shows the partition asked for last: a page of another partition that its worker still read
after the user moved on is dropped when it arrives (the Log tab's worker is exclusive; the message of a
worker that was replaced is not shown)."""

from __future__ import annotations

import threading

from synthetic import SyntheticSource

from tests.support.tui import started, sync, until


class SlowFirstPartition(SyntheticSource):
    """Partition 1's log answers only once ``release`` is set; the others at once."""

    def __init__(self) -> None:
        super().__init__(4)
        self.release = threading.Event()
        self.asked = threading.Event()  # partition 1's worker is reading
        self.answered = threading.Event()  # partition 1's page was read (late)

    def partition_log(self, topic, partition, around):
        if partition == 1:
            self.asked.set()
            self.release.wait(30)
            self.answered.set()
        return super().partition_log(topic, partition, around)


@sync
async def test_a_late_page_of_the_partition_asked_for_before_is_not_shown():
    from tui.app import EosApp

    source = SlowFirstPartition()
    app = EosApp(source, refresh_seconds=60)
    async with started(app, (120, 30)) as pilot:
        app.paused = True
        app.open_log(source.topic, 1, 5, 5)
        # Partition 2 asked for only once partition 1's worker reads: replaced before its thread started,
        # that worker is cancelled without ever reading, and the late page this test is about never comes
        # (a fixed pause here lost that race on a loaded machine: ci9, 60 s without partition 1's page).
        await until(pilot, source.asked.is_set, "partition 1's worker reading")
        app.open_log(source.topic, 2, 5, 5)
        log = app.view("log")
        await until(pilot, lambda: log.plog is not None and log.plog.partition == 2, "partition 2's page")
        source.release.set()
        await until(pilot, source.answered.is_set, "partition 1's late page")
        await pilot.pause(0.3)  # its message is handled meanwhile
        await pilot.pause(0.3)
        assert (log.plog.topic, log.plog.partition) == (source.topic, 2)
        assert log.current == (source.topic, 2)
