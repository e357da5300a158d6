"""SVG snapshots of each view on the fixed incident snapshot, at 80x24: a rendering change must be
reviewed on purpose (`pytest tests/tui/test_svg.py --snapshot-update` after looking at the new SVGs)."""

from __future__ import annotations

import pytest

from tests.support.tui import SNAPSHOT, until

VIEWS = ["1", "2", "3", "4", "5", "6", "7"]


def _app():
    from tui.app import EosApp
    from tui.sources import SnapshotSource

    app = EosApp(SnapshotSource(str(SNAPSHOT)))
    # The tab underline moves at once: animated, it starts on a timer, which under load fired after the
    # screenshot (ci11: the Producers view with the underline still under Overview).
    app.animation_level = "none"
    return app


@pytest.mark.parametrize(
    "key", VIEWS, ids=["overview", "transactions", "producers", "lag", "log", "ledger", "audit"]
)
def test_view(snap_compare, key):
    async def show(pilot):
        app = pilot.app
        await until(pilot, lambda: app.dash is not None, "the first data")
        await pilot.press(key)
        await pilot.pause(0.1)
        if key == "5":
            await until(pilot, lambda: app.view("log").plog is not None, "the log view's scan")
            # The view opens at the LSO, the table's last row: on a slow machine the scroll to it lands
            # a few frames after the rows, so wait for it rather than for a fixed time.
            # The scrollbar is drawn a frame or two after the scroll itself, so the state must hold for
            # half a second before the screenshot (under load a single check once caught the old thumb).
            table = app.view("log").query_one("FilterTable").table

            def at_the_lso() -> bool:
                return bool(table.row_count and table.cursor_row == table.row_count - 1
                            and table.max_scroll_y and table.scroll_y >= table.max_scroll_y)

            stable = 0
            for _ in range(300):  # at most 30 s; after that the snapshot comparison shows what is wrong
                stable = stable + 1 if at_the_lso() else 0
                if stable >= 5:
                    break
                await pilot.pause(0.1)
        await pilot.wait_for_scheduled_animations()
        await pilot.pause(0.1)

    assert snap_compare(_app(), run_before=show, terminal_size=(80, 24))


def test_help(snap_compare):
    async def show(pilot):
        await until(pilot, lambda: pilot.app.dash is not None, "the first data")
        await pilot.press("question_mark")
        await pilot.pause(0.1)

    assert snap_compare(_app(), run_before=show, terminal_size=(80, 24))


def _with_records(path):
    """The reference snapshot with records stored for the open transaction the Log view opens at (as
    `eosctl snapshot --records N` stores them): Avro values written by confluent-kafka's serializer and
    decoded through a registry (tests/support/registrystub.py), one value without the framing."""
    import json

    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    from eosctl.cluster.model import Kind
    from eosctl.cluster.records import Record
    from eosctl.cluster.schemas import RegistrySettings, SchemaDecoder
    from eosctl.inspection.records import record_document
    from eosctl.inspection.snapshot import load_snapshot, write_snapshot
    from tests.support.registrystub import RegistryStub

    cap = load_snapshot(SNAPSHOT)
    topic, partition = "tuiref.enriched", 0
    log = cap.log_of(topic, partition)
    schema = json.dumps({"type": "record", "name": "Order", "namespace": "shop",
                         "fields": [{"name": "id", "type": "long"}, {"name": "state", "type": "string"}]})
    with RegistryStub() as stub:
        ser = AvroSerializer(SchemaRegistryClient({"url": stub.url}), schema)
        decoder = SchemaDecoder(RegistrySettings(stub.url))
        ctx = SerializationContext(topic, MessageField.VALUE)
        first = next(r.first for r in log.ranges if r.kind is Kind.OPEN)
        values = [ser({"id": 7, "state": "PAID"}, ctx), ser({"id": 8, "state": "NEW"}, ctx), b'{"id": 9}']
        cap.records[(topic, partition)] = [
            record_document(topic, partition, Record(first + i, f"order-{7 + i}".encode(), v, 0, "none"),
                            decoder, log.kind_at(first + i).value)
            for i, v in enumerate(values)]
    write_snapshot(cap, path)
    return path


def test_log_records(snap_compare, tmp_path):
    """The Log view's records table (`v`): decoded values with their format, subject, version and schema
    id, the row under the cursor whole in the pane below."""
    from tui.app import EosApp
    from tui.sources import SnapshotSource

    app = EosApp(SnapshotSource(str(_with_records(tmp_path / "records.duckdb"))))
    app.animation_level = "none"

    async def show(pilot):
        app = pilot.app
        await until(pilot, lambda: app.dash is not None, "the first data")
        await pilot.press("5")
        await until(pilot, lambda: app.view("log").plog is not None, "the log view's scan")
        await pilot.pause(0.3)
        await pilot.press("v")
        table = app.view("log").query_one("#log-records").table
        await until(pilot, lambda: table.row_count == 3, "the records table")
        await pilot.wait_for_scheduled_animations()
        await pilot.pause(0.2)

    assert snap_compare(app, run_before=show, terminal_size=(100, 24))
