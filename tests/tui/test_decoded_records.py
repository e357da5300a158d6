"""Decoded records where a person reads them in the TUI and in snapshots (issue 50): the Log view's records
table (`v`), live through the cluster's Schema Registry (tests/support/registrystub.py) and from a snapshot
taken
with `eosctl snapshot --records N`, each key and value with its format, subject, version and schema id;
`--raw` (the TUI's and the snapshot's) shows bytes.

The topic, on the session's Apache Kafka: offsets 0..2 Avro values written by confluent-kafka's serializer
(the schema id in the prefix) with string keys, offset 3 a value without the framing (a producer without the
serializer).
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import duckdb
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from textual.widgets import Static

from tests.support.helpers import eosctl
from tests.support.registrystub import RegistryStub
from tests.support.tui import running, sync, text_of, until

pytestmark = pytest.mark.integration

SCHEMA = json.dumps({"type": "record", "name": "Order", "namespace": "shop",
                     "fields": [{"name": "id", "type": "long"}, {"name": "state", "type": "string"}]})


@pytest.fixture(scope="module")
def registry():
    with RegistryStub() as stub:
        yield stub


@pytest.fixture(scope="module")
def topic(bootstrap, registry) -> str:
    name = "tuirec" + uuid.uuid4().hex[:8]
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept: a destroyed client fails its futures
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(30)
    ser = AvroSerializer(SchemaRegistryClient({"url": registry.url}), SCHEMA)
    ctx = SerializationContext(name, MessageField.VALUE)
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for i in range(3):
        p.produce(name, key=f"k{i}".encode(), value=ser({"id": i, "state": "PAID"}, ctx))
    p.produce(name, key=b"k3", value=b'{"id": 3}')
    assert p.flush(30) == 0
    return name


def config(tmp_path: Path, bootstrap: str, registry, topic: str) -> Path:
    path = tmp_path / "eosctl.toml"
    path.write_text(f'[clusters.c]\nbootstrap_servers = "{bootstrap}"\n'
                    f'schema_registry_url = "{registry.url}"\n\n[pipelines.p]\nsource_topics = ["{topic}"]\n')
    return path


DECODED = 'AVRO {t}-value v1 (id 1): {{"id": {i}, "state": "PAID"}}'
# Offset 3's value where the others are framed: marked in its cell, the reason in the pane. The keys are
# plain strings, none framed: shown as their text.
UNFRAMED = '(unframed) {"id": 3}'
UNFRAMED_WHY = ('UNFRAMED (not in the Schema Registry wire format: it starts with byte 0x7b, not the magic '
                'byte 0x00): {"id": 3}')

def records_table(app) -> list[list[str]]:
    table = app.view("log").query_one("#log-records").table
    return [[c.plain for c in table.get_row_at(i)] for i in range(table.row_count)]


async def show_records(app, pilot, topic: str) -> list[list[str]]:
    """The Log view on the topic's partition 0, records from offset 0 (`g 0`, then `v`)."""
    view = app.view("log")
    await until(pilot, lambda: app.dash is not None, "the first data")
    await pilot.press("5")
    await until(pilot, lambda: view.plog is not None and view.plog.topic == topic, "the log view's scan")
    await pilot.press("g", "0", "enter")
    await pilot.press("v")
    await until(pilot, lambda: len(records_table(app)) == 4, "the records table")
    return records_table(app)


def _live_app(tmp_path: Path, bootstrap: str, registry, topic: str, raw: bool = False):
    from eosctl.commands.tui_cmd import live_source
    from tui.app import EosApp

    source = live_source(str(config(tmp_path, bootstrap, registry, topic)), "p", None, raw=raw)
    return EosApp(source, refresh_seconds=60)


@sync
async def test_the_live_log_view_shows_records_decoded_with_subject_version_and_id(bootstrap, registry, topic,
                                                                                   tmp_path):
    app = _live_app(tmp_path, bootstrap, registry, topic)
    async with running(app, (160, 40)) as pilot:
        rows = await show_records(app, pilot, topic)
        assert [r[1:] for r in rows] == [
            *[[str(i), "committed", f"k{i}", DECODED.format(t=topic, i=i)] for i in range(3)],
            ["3", "committed", "k3", UNFRAMED]]
        # The row under the cursor whole, in the pane under the table.
        pane = text_of(app.view("log").query_one("#log-record", Static))
        assert pane == (f"offset 0\nkey: k0\nvalue: AVRO {topic}-value v1 (id 1) "
                        '{"id": 0, "state": "PAID"}')
        await pilot.press("end")
        await until(pilot, lambda: text_of(app.view("log").query_one("#log-record", Static)).startswith(
            "offset 3"), "the last record in the pane")
        assert text_of(app.view("log").query_one("#log-record", Static)) == \
            f"offset 3\nkey: k3\nvalue: {UNFRAMED_WHY}"
        await pilot.press("v")  # back to the ranges
        await pilot.pause(0.1)
        assert not app.view("log").query_one("#log-records").display
    assert registry.requests["GET /schemas/ids/1"] == 1  # fetched once for the view's records


@sync
async def test_the_live_log_view_with_raw_shows_bytes(bootstrap, registry, topic, tmp_path):
    app = _live_app(tmp_path, bootstrap, registry, topic, raw=True)
    async with running(app, (160, 40)) as pilot:
        rows = await show_records(app, pilot, topic)
    assert rows[0][3] == "k0"
    assert rows[0][4].startswith("\\x00\\x00\\x00\\x00\\x01")  # the magic byte and schema id 1, as bytes
    assert rows[3][4] == '{"id": 3}'


def test_a_snapshot_with_records_stores_them_decoded_and_the_tui_shows_them(bootstrap, registry, topic,
                                                                            tmp_path):
    cfg = config(tmp_path, bootstrap, registry, topic)
    out, raw = tmp_path / "snap.duckdb", tmp_path / "raw.duckdb"
    r = eosctl("snapshot", "-c", str(cfg), "-p", "p", "--out", str(out), "--records", "3")
    assert r.exit_code == 0, r.output
    con = duckdb.connect(str(out), read_only=True)
    try:
        rows = con.execute('SELECT "offset", kind, key, value_decoded FROM log_records ORDER BY "offset"'
                           ).fetchall()
    finally:
        con.close()
    # The last 3 offsets of the partition: 1..3.
    assert [(o, k, key) for o, k, key, _ in rows] == [(1, "DATA", "k1"), (2, "DATA", "k2"), (3, "DATA", "k3")]
    first = json.loads(rows[0][3])
    assert {n: first[n] for n in ("encoding", "subject", "version", "schema_id", "id_in", "data")} == {
        "encoding": "AVRO", "subject": f"{topic}-value", "version": 1, "schema_id": 1, "id_in": "prefix",
        "data": {"id": 1, "state": "PAID"}}
    assert json.loads(rows[2][3])["encoding"] == "unframed"

    r = eosctl("snapshot", "-c", str(cfg), "-p", "p", "--out", str(raw), "--records", "3", "--raw")
    assert r.exit_code == 0, r.output
    con = duckdb.connect(str(raw), read_only=True)
    try:
        assert con.execute("SELECT count(*), count(value_decoded) FROM log_records").fetchone() == (3, 0)
    finally:
        con.close()

    @sync
    async def in_the_tui(path: Path, raw: bool) -> list[list[str]]:
        from tui.app import EosApp
        from tui.sources import SnapshotSource

        app = EosApp(SnapshotSource(str(path), raw=raw))
        async with running(app, (160, 40)) as pilot:
            view = app.view("log")
            await until(pilot, lambda: app.dash is not None, "the snapshot")
            await pilot.press("5")
            await until(pilot, lambda: view.plog is not None, "the log view")
            await pilot.press("g", "0", "enter")
            await pilot.press("v")
            await until(pilot, lambda: len(records_table(app)) == 3, "the records table")
            return records_table(app)

    assert [r[1:] for r in in_the_tui(out, False)] == [
        *[[str(i), "committed", f"k{i}", DECODED.format(t=topic, i=i)] for i in (1, 2)],
        ["3", "committed", "k3", UNFRAMED]]
    assert in_the_tui(out, True)[0][4].startswith("\\x00\\x00\\x00\\x00\\x01")  # --raw: the stored bytes
    assert in_the_tui(raw, False)[0][4].startswith("\\x00\\x00\\x00\\x00\\x01")


def test_raw_without_records_is_one_line_and_exit_2(tmp_path):
    r = eosctl("snapshot", "--bootstrap", "127.0.0.1:1", "-t", "x", "--out", str(tmp_path / "s.duckdb"),
               "--raw")
    assert r.exit_code == 2
    assert "--raw goes with --records N" in r.output
