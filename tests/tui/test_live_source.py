"""The live source without a broker (the core's functions replaced): through its LiveModel it keeps its
admin clients across refreshes and rebuilds them after a connection error, hands the ledger only
whole-log scans, and takes producers and fencing from the core as they are."""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime

import pytest

import eosctl.cluster.clients
import eosctl.inspection.capture
import eosctl.inspection.ledger
import eosctl.inspection.live
import eosctl.txn.producers
from eosctl.base.errors import BrokerError
from eosctl.cluster.model import Kind, OffsetRange, PartitionLog
from eosctl.cluster.wire import Offsets
from eosctl.config.model import Cluster, Pipeline, Sink
from eosctl.config.target import Target
from eosctl.inspection import lag
from eosctl.inspection.capture import Capture, covers_whole_log
from eosctl.txn import transactions as txns
from eosctl.txn.producers import Found, ProducerRow
from eosctl.txn.transactions import HangingReport
from tui.sources import Dashboard, LiveSource
from tui.views.overview import health, overview_rows
from tui.views.producers import headline, producer_rows

CLUSTER = Cluster(name="c", bootstrap_servers="127.0.0.1:1")
SINK = Sink(duckdb="/s.duckdb", table="orders_sink")
PIPE = Pipeline("shop", "c", ("shop.orders",), "shop.sink", sink=SINK)
# shop.orders[0]: log start 0, HW 9000 (longer than the TUI's tail scan); shop.orders[1]: 0..100.
OFFSETS = {("shop.orders", 0): Offsets(0, 9000, 9000), ("shop.orders", 1): Offsets(0, 100, 100)}


def plog(tp: tuple[str, int], start: int, offsets: Offsets) -> PartitionLog:
    return PartitionLog(tp[0], tp[1], offsets.log_start, offsets.high_watermark, offsets.last_stable, start,
                        offsets.high_watermark,
                        [OffsetRange(start, offsets.high_watermark - 1, Kind.DATA, -1, -1)])


class FakeWire:
    topic_ids: dict = {}

    def __init__(self, *a, **kw) -> None:
        pass

    def close(self) -> None:
        pass

    def log_sizes(self, tps):
        return {}

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        pass

    def metadata(self, topics):
        return {"shop.orders": {0: 1, 1: 1}}

    def offsets(self, tps):
        return {tp: OFFSETS[tp] for tp in tps}

    def served_offsets(self, positions):
        return {tp: OFFSETS[tp] for tp in positions}

    def hold_metadata(self):
        return contextlib.nullcontext()

    def leader(self, topic, partition):
        return 1


@pytest.fixture
def live(monkeypatch):
    """A LiveSource over fakes; returns (source, record) where record counts what was built and passed."""
    record: dict = {"confluent": 0, "kafka": 0, "closed": 0, "ledger_logs": None, "producer_logs": None,
                    "fail_lag": False, "describe_producers": 0, "described": [], "asked": []}

    class Admin:
        def close(self):
            record["closed"] += 1

    def confluent_admin(cluster, timeout=5.0):
        record["confluent"] += 1
        return Admin()

    def kafka_admin(cluster, timeout=5.0):
        record["kafka"] += 1
        return Admin()

    class Scan:
        def __init__(self, tp, start):
            self.tp, self.start, self.offsets, self.done = tp, start, OFFSETS[tp], True
            self.end = self.offsets.high_watermark
            self.changed, self.bytes_added = False, 0

        def finish(self):
            return plog(self.tp, self.start, self.offsets)

    def open_scans(client, tps, start=None, end=None, **kw):
        return {tp: Scan(tp, start[tp] if start else 0) for tp in tps}

    def poll(client, groups=None, topics=None, **kw):
        if record["fail_lag"]:
            raise BrokerError("no answer for the committed offsets of group 'shop.sink' within 5s")
        return lag.LagSnapshot(0, [], {})

    def describe_producers(admin, tps, leaders=None):
        record["describe_producers"] += 1
        record["asked"].append(sorted(tps))
        return {tp: [] for tp in tps}, "ok"

    def find_hanging(client, admin, topics, max_age_s, now_ms=None, described=None, **kw):
        record["described"].append(described)
        return HangingReport(0, 2)

    def find(client, admin, tps, scan_last=0, logs=None, described=None):
        record["producer_logs"] = logs
        record["described"].append(described)
        return Found([ProducerRow("shop.orders", 0, 7, 1, 3, None, None, epochs=(0, 1), fencing_events=0)],
                     "log-scan", "")

    def ledger_of(client, side, topics, group, committed, pipeline=None, logs=None, **kw):
        record["ledger_logs"] = logs
        return eosctl.inspection.ledger.Ledger(pipeline, "s", group, True, [])

    monkeypatch.setattr(eosctl.cluster.clients, "confluent_admin", confluent_admin)
    monkeypatch.setattr(eosctl.cluster.clients, "kafka_admin", kafka_admin)
    monkeypatch.setattr(eosctl.inspection.live, "WireClient", FakeWire)
    monkeypatch.setattr(eosctl.inspection.live, "open_scans", open_scans)
    monkeypatch.setattr(eosctl.inspection.live, "run_scans", lambda client, scans: 0)
    monkeypatch.setattr(eosctl.inspection.live, "read_sink",
        lambda sink: eosctl.inspection.ledger.SinkSide({}, None, {}, [], "s")
    )
    monkeypatch.setattr(eosctl.inspection.live, "change_token", lambda sink: None)
    monkeypatch.setattr(eosctl.inspection.live, "group_offsets",
                        lambda client, groups: {g: {} for g in groups})
    monkeypatch.setattr(lag, "poll", poll)
    monkeypatch.setattr(txns, "list_transactions", lambda admin, **k: [])
    monkeypatch.setattr(txns, "coordinator_unseen", lambda client, prefix="": None)  # every id visible
    monkeypatch.setattr(txns, "describe_producers", describe_producers)
    monkeypatch.setattr(txns, "find_hanging", find_hanging)
    monkeypatch.setattr(eosctl.txn.producers, "find", find)
    monkeypatch.setattr(eosctl.inspection.live, "ledger_of", ledger_of)
    target = Target(CLUSTER, PIPE, None, ("shop.orders",), "shop.sink")
    return LiveSource(target), record


def test_admin_clients_are_built_once_and_rebuilt_after_a_broker_error(live):
    source, record = live
    for _ in range(3):
        dash = source.fetch()
        assert dash.errors == {}
    # No librdkafka admin client at all: it dies on a loading group coordinator (eosctl.cluster.offsets).
    assert (record["confluent"], record["kafka"], record["closed"]) == (0, 1, 0)
    record["fail_lag"] = True
    dash = source.fetch()
    assert dash.errors == {"lag": "no answer for the committed offsets of group 'shop.sink' within 5s"}
    assert record["closed"] == 1  # dropped ...
    record["fail_lag"] = False
    source.fetch()
    assert (record["confluent"], record["kafka"]) == (0, 2)  # ... and built again on the next refresh
    source.close()
    assert record["closed"] == 2


def test_one_describe_producers_per_refresh_serves_hanging_and_producers(live):
    source, record = live
    source.fetch()
    answer = ({("shop.orders", 0): [], ("shop.orders", 1): []}, "ok")
    assert record["described"] == [answer] * 2
    # Offsets unchanged: nothing asked again (a producer's state changes only with what it appends) ...
    source.fetch()
    assert record["describe_producers"] == 1
    assert record["described"] == [answer] * 4
    # ... but every partition again once producers_every_s has passed (producer ids also expire with time).
    source.model.producers_every_s = 0
    source.fetch()
    assert record["asked"] == [[("shop.orders", 0), ("shop.orders", 1)]] * 2
    assert record["described"] == [answer] * 6


def test_with_a_sink_the_source_partitions_are_read_whole_and_the_ledger_gets_them(live):
    source, record = live
    source.fetch()
    # [0] is longer than the TUI's tail, but the ledger needs whole logs: the model reads source
    # partitions from the log start when there is a sink, and the ledger scans nothing itself.
    assert {tp: lg.scanned_from for tp, lg in record["ledger_logs"].items()} == {
        ("shop.orders", 0): 0, ("shop.orders", 1): 0}
    assert sorted(record["producer_logs"]) == [("shop.orders", 0), ("shop.orders", 1)]


def test_without_a_sink_a_partition_longer_than_the_tail_is_read_from_its_tail(live):
    source, record = live
    source.model.sink = None
    dash = source.fetch()
    assert {(lg.topic, lg.partition): lg.scanned_from for lg in dash.logs} == {
        ("shop.orders", 0): 4000, ("shop.orders", 1): 0}


def test_only_scans_covering_log_start_to_high_watermark_count_as_whole():
    tp = ("t", 0)
    whole = plog(tp, 0, Offsets(0, 50, 50))
    tail = plog(tp, 20, Offsets(0, 50, 50))
    after_retention = plog(tp, 30, Offsets(30, 50, 50))
    short = PartitionLog("t", 0, 0, 50, 50, 0, 40, [OffsetRange(0, 39, Kind.DATA, -1, -1)])
    wholes = [covers_whole_log(lg) for lg in (whole, tail, after_retention, short)]
    assert wholes == [True, False, True, False]


def test_a_tail_scan_would_make_the_ledger_under_report():
    """Why the ledger gets whole logs only: with the sink missing offset 10, a tail scan from 20 hides the
    gap."""
    from eosctl.inspection.ledger import partition_ledger
    from eosctl.sink import OffsetIsland

    tp = ("t", 0)
    o = Offsets(0, 50, 50)
    islands = [OffsetIsland("t", 0, 0, 9, 1), OffsetIsland("t", 0, 11, 49, 1)]
    gaps = {name: partition_ledger("t", 0, None, islands, 50, 50, o, lg).missing_offsets
            for name, lg in (("whole", plog(tp, 0, o)), ("tail", plog(tp, 20, o)))}
    assert gaps["whole"] == 1
    assert gaps["tail"] != 1
    assert not covers_whole_log(plog(tp, 20, o))


def _row(epochs: tuple[int, ...], fencing: int, zombies: int = 0) -> ProducerRow:
    return ProducerRow("t", 0, 7, epochs[-1], 3, None, None, epochs=epochs, fencing_events=fencing,
                       zombie_writes=zombies)


def test_more_than_one_epoch_without_a_fencing_event_is_not_fenced():
    """Transactions v2 bumps the epoch on every commit; only the core's fencing_events count."""
    dash = Dashboard(Capture(datetime(2026, 1, 1, tzinfo=UTC), "b:1", "shop", None, [],
                             producers=[_row((0, 1, 2), 0), _row((3, 4), 1)]))
    rows = producer_rows(dash)
    assert [r.cells[7] for r in rows] == ["", "FENCED x1"]
    assert [r.level for r in rows] == [None, "warn"]
    assert "2 producers on 1 partitions · 1 fenced" in headline(dash).plain
    assert overview_rows(dash)[0].cells[5] == 1
    assert "1 producer fenced (a new instance took over; the old one was cut off)" in health(dash).reasons


def test_a_producer_fenced_on_several_partitions_is_one_fenced_producer():
    """Issue 32, item 9: "2 producers fenced" counted one producer per partition it wrote."""
    rows = [ProducerRow("t", p, 7, 1, 3, None, None, epochs=(0, 1), fencing_events=1) for p in (0, 1)]
    dash = Dashboard(Capture(datetime(2026, 1, 1, tzinfo=UTC), "b:1", "shop", None, [], producers=rows))
    assert overview_rows(dash)[0].cells[5] == 1
    assert "1 producer fenced (a new instance took over; the old one was cut off)" in health(dash).reasons


def test_the_audit_tab_audits_a_pipeline_of_hops_and_names_the_pipelines_with_a_sink():
    """A pipeline of hops (the reference pipeline's default) audits hop by hop; one with neither sink nor
    hops names the config's pipelines the TUI could audit (issue 49: the demo's `eosctl tui -c` line)."""
    from pathlib import Path

    from eosctl.config.model import Config

    bare = Pipeline("watch", "c", ("shop.orders",), "shop.sink")
    hops = Pipeline("whole", "c", (), None, hops=("shop",))
    config = Config(Path("/e.toml"), {"c": CLUSTER}, {"shop": PIPE, "watch": bare, "whole": hops})
    runner = lambda target, progress: None  # noqa: E731
    for pipe, said in ((PIPE, None), (hops, None),
                       (bare, "no sink to audit: pipeline watch has none; start the TUI with -p NAME for one "
                              "that has: shop, whole"),
                       (None, "no sink to audit: start the TUI with --config FILE --pipeline NAME (with a "
                              "sink)")):
        source = LiveSource(Target(CLUSTER, pipe, config if pipe else None, ("shop.orders",), "shop.sink"),
                            run_audit=runner)
        try:
            assert source.can_audit() == said, pipe
        finally:
            source.close()
