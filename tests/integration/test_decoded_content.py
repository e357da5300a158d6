"""The decoded content check on Apache Kafka 4.4 (issue 50, step 3): Avro values written by confluent-kafka's
serializer (ids in the prefix) against a registry (tests/support/registrystub.py), a DuckDB sink of typed
columns
(DECIMAL, TIMESTAMP, an enum as VARCHAR, a LIST), planted faults giving exactly their findings, on by
default, both engines.

Partition 0: records 0..11 framed, 12 not framed (a producer without the serializer). Partition 1: records
0..5 framed in one transaction (marker at 6), the sink stored at offset + 1 (a shifted writer).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import duckdb
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from tests.support.helpers import eosctl
from tests.support.markers import markers_written
from tests.support.registrystub import RegistryStub

pytestmark = pytest.mark.integration

SCHEMA = json.dumps({
    "type": "record", "name": "Order", "namespace": "shop",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}},
        {"name": "placed", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        {"name": "state", "type": {"type": "enum", "name": "State", "symbols": ["NEW", "PAID"]}},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
    ],
})
T0 = datetime(2026, 12, 1, 10, 0, 0, 123456, tzinfo=UTC)


def order(i: int) -> dict:
    return {"id": i, "amount": Decimal(f"{i}.50"), "placed": T0 + timedelta(seconds=i), "state": "PAID",
            "tags": [f"t{i}"]}


@pytest.fixture(scope="module")
def registry():
    with RegistryStub() as stub:
        yield stub


@pytest.fixture(scope="module")
def topic(bootstrap, registry):
    import uuid

    name = "decoded" + uuid.uuid4().hex[:8]
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept: a destroyed client fails its futures
    admin.create_topics([NewTopic(name, 2, 1)])[name].result(30)
    ser = AvroSerializer(SchemaRegistryClient({"url": registry.url}), SCHEMA)
    ctx = SerializationContext(name, MessageField.VALUE)
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for i in range(12):
        p.produce(name, value=ser(order(i), ctx), partition=0)
    p.produce(name, value=b'{"id": 12}', partition=0)
    assert p.flush(30) == 0
    # Partition 1 in one committed transaction: records 0..5, its marker at 6 (a writer storing offset + 1
    # then holds offsets 1..6, all below the high watermark, as the byte-level test's).
    t = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{name}-1"})
    t.init_transactions(30)
    t.begin_transaction()
    for i in range(6):
        t.produce(name, value=ser(order(i), ctx), partition=1)
    t.commit_transaction(30)
    markers_written(bootstrap, f"{name}-1")  # the writer's offsets 1..6 are below the HW only after it
    return name


def make_sink(path: Path, topic: str, rows: list[tuple[int, int, dict]]) -> Path:
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE orders (src_topic VARCHAR, src_partition INTEGER, src_offset BIGINT, "
                "id BIGINT, amount DECIMAL(9, 2), placed TIMESTAMP, state VARCHAR, tags VARCHAR[], "
                "loaded_by VARCHAR)")
    con.executemany("INSERT INTO orders VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'job')",
                    [(topic, p, o, v["id"], v["amount"], v["placed"].replace(tzinfo=None), v["state"],
                      v["tags"]) for p, o, v in rows])
    con.close()
    return path


def config(tmp_path: Path, bootstrap: str, registry: RegistryStub, topic: str, sink: Path,
           extra: str = "") -> Path:
    path = tmp_path / "eosctl.toml"
    path.write_text(f'[clusters.main]\nbootstrap_servers = "{bootstrap}"\n'
                    f'schema_registry_url = "{registry.url}"\n'
                    f'\n[pipelines.orders]\nsource_topics = ["{topic}"]\n\n[pipelines.orders.sink]\n'
                    f'duckdb = "{sink}"\ntable = "orders"\n{extra}')
    return path


def faulty_rows() -> list[tuple[int, int, dict]]:
    rows = []
    for o in range(12):
        v = order(o)
        if o == 3:
            v["state"] = "NEW"  # a transform that mangles one field
        if o == 5:
            v = order(9)  # another record's fields at the right offset
        if o == 7:
            v["amount"] = Decimal("750.00")  # 7.50 written at the wrong scale
        rows.append((0, o, v))
    rows.append((0, 12, {"id": 12, "amount": Decimal("12.50"), "placed": T0, "state": "PAID", "tags": []}))
    rows += [(1, o + 1, order(o)) for o in range(6)]  # stored at offset + 1
    return rows


def found(report: dict) -> list[tuple]:
    return [(f["kind"], f["partition"], f["first_offset"], f["last_offset"],
             (f.get("cause") or {}).get("rule")) for f in report["findings"]]


@pytest.mark.parametrize("engine", ["local", "spark"])
def test_planted_faults_give_exactly_their_findings_with_the_field_named(topic, registry, bootstrap, tmp_path,
                                                                         engine, request):
    if engine == "spark":
        request.getfixturevalue("spark")
    sink = make_sink(tmp_path / "sink.duckdb", topic, faulty_rows())
    cfg = config(tmp_path, bootstrap, registry, topic, sink, 'timestamp_precision = "us"\n')
    r = eosctl("audit", "-c", str(cfg), "-p", "orders", "--engine", engine, "--format", "json")
    assert r.exit_code == 1, r.output
    report = json.loads(r.stdout)
    assert found(report) == [
        ("content_mismatch", 0, 3, 3, "different_field"),
        ("content_mismatch", 0, 5, 5, "different_record"),
        ("content_mismatch", 0, 7, 7, "different_field"),
        ("content_mismatch", 0, 12, 12, "unframed_record"),
        ("content_mismatch", 1, 1, 6, "shifted_coordinates"),  # and no gap or phantom made up by the shift
    ]
    summaries = [f["cause"]["summary"] for f in report["findings"]]
    assert "column 'state' (field value.state) holds 'NEW' where the record has 'PAID'" in summaries[0]
    assert summaries[1].startswith(f"The sink's row at {topic}[0] offset 5 holds the record at offset 9's "
                                   "fields")
    assert ("column 'amount' (field value.amount) holds 750.00 where the record has 7.50: the same digits at "
            "another scale (the record's is 2; x10^2)") in summaries[2]
    assert "it starts with byte 0x7b, not the magic byte 0x00" in summaries[3]
    assert report["findings"][4]["cause"]["shift"] == 1


@pytest.mark.parametrize("types", ["DECIMAL(9, 2) TIMESTAMP", "DECIMAL(12, 4) TIMESTAMP_MS"])
def test_the_column_pass_gives_the_record_by_record_findings(topic, registry, bootstrap, tmp_path,
                                                             monkeypatch, types):
    """The planted faults again, the sink's amount at the record's scale or another, its times in
    microseconds or milliseconds: auditors.fieldfast answers for both partitions, with exactly the
    findings (summaries included) of the record-by-record check."""
    from auditors import fieldfast

    answered: list[bool] = []
    column_pass = fieldfast.partition

    def spy(*args, **kwargs):
        got = column_pass(*args, **kwargs)
        answered.append(got is not None)
        return got

    sink = make_sink(tmp_path / "sink.duckdb", topic, faulty_rows())
    con = duckdb.connect(str(sink))
    amount, placed = types.rsplit(" ", 1)
    con.execute(f"ALTER TABLE orders ALTER amount TYPE {amount}")
    con.execute(f"ALTER TABLE orders ALTER placed TYPE {placed}")
    con.close()
    precision = "ms" if placed == "TIMESTAMP_MS" else "us"
    cfg = config(tmp_path, bootstrap, registry, topic, sink, f'timestamp_precision = "{precision}"\n')
    monkeypatch.setattr(fieldfast, "partition", spy)
    fast = json.loads(eosctl("audit", "-c", str(cfg), "-p", "orders", "--format", "json").stdout)
    assert answered == [True, True]
    monkeypatch.setattr(fieldfast, "partition", lambda *args, **kwargs: None)
    exact = json.loads(eosctl("audit", "-c", str(cfg), "-p", "orders", "--format", "json").stdout)
    assert found(fast) == found(exact) == [
        ("content_mismatch", 0, 3, 3, "different_field"),
        ("content_mismatch", 0, 5, 5, "different_record"),
        ("content_mismatch", 0, 7, 7, "different_field"),
        ("content_mismatch", 0, 12, 12, "unframed_record"),
        ("content_mismatch", 1, 1, 6, "shifted_coordinates"),
    ]
    assert fast["findings"] == exact["findings"]


ORDER_V2 = json.dumps({**json.loads(SCHEMA), "fields": [
    *json.loads(SCHEMA)["fields"], {"name": "note", "type": ["null", "string"], "default": None}]})


def test_the_column_pass_over_two_schema_versions_a_tombstone_and_a_payload_with_bytes_over(
        registry, bootstrap, tmp_path, monkeypatch):
    """Records 0..2 under the schema (with a trace header), 3..5 under a second version (one more field),
    6 framed with two bytes after its record, 7 a tombstone, 8 one more record whose row holds a mangled id:
    the column pass answers with the record-by-record check's findings."""
    import uuid

    from auditors import fieldfast

    name = "decodedv2" + uuid.uuid4().hex[:6]
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept: a destroyed client fails its futures
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(30)
    client = SchemaRegistryClient({"url": registry.url})
    v1, v2 = AvroSerializer(client, SCHEMA), AvroSerializer(client, ORDER_V2)
    ctx = SerializationContext(name, MessageField.VALUE)
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    values = [v1(order(i), ctx) for i in range(3)] + [v2({**order(i), "note": "n"}, ctx) for i in range(3, 6)]
    values += [v1(order(6), ctx) + b"\x00\x00", None, v1(order(8), ctx)]
    trace = [("traceparent", b"00-4bf9-00f0-01")]  # a header that names no schema
    for i, v in enumerate(values):
        p.produce(name, value=v, partition=0, headers=trace if i < 3 else None)
    assert p.flush(30) == 0
    rows = [(0, o, order(o)) for o in range(7)] + [(0, 8, {**order(8), "id": 80})]
    sink = make_sink(tmp_path / "sink.duckdb", name, rows)
    cfg = config(tmp_path, bootstrap, registry, name, sink, 'timestamp_precision = "us"\n')
    answered: list[bool] = []
    column_pass = fieldfast.partition
    monkeypatch.setattr(fieldfast, "partition",
                        lambda *a, **kw: answered.append(column_pass(*a, **kw)) or answered[-1])
    fast = json.loads(eosctl("audit", "-c", str(cfg), "-p", "orders", "--format", "json").stdout)
    assert [a is not None for a in answered] == [True]
    monkeypatch.setattr(fieldfast, "partition", lambda *args, **kwargs: None)
    exact = json.loads(eosctl("audit", "-c", str(cfg), "-p", "orders", "--format", "json").stdout)
    assert found(fast) == found(exact) == [("content_mismatch", 0, 6, 6, "unframed_record"),
                                           ("gap", 0, 7, 7, None),  # the tombstone has no row
                                           ("content_mismatch", 0, 8, 8, "different_field")]
    assert fast["findings"] == exact["findings"]
    assert "framed as AVRO, does not decode: 2 bytes left after the Avro record" in \
        fast["findings"][0]["cause"]["summary"]


def test_avro_ids_in_headers_are_left_to_the_record_by_record_check(registry, bootstrap, tmp_path,
                                                                    monkeypatch):
    """Avro values with their ids in __value_schema_id headers (bare payloads): the column pass declines
    the partition and the record-by-record check decodes them: a clean sink, no finding."""
    import uuid

    from confluent_kafka.schema_registry import header_schema_id_serializer

    from auditors import fieldfast

    name = "decodedhdr" + uuid.uuid4().hex[:6]
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept: a destroyed client fails its futures
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(30)
    ser = AvroSerializer(SchemaRegistryClient({"url": registry.url}), SCHEMA,
                         conf={"schema.id.serializer": header_schema_id_serializer})
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for i in range(4):
        headers: list = []
        p.produce(name, value=ser(order(i), SerializationContext(name, MessageField.VALUE, headers)),
                  headers=headers, partition=0)
    assert p.flush(30) == 0
    sink = make_sink(tmp_path / "sink.duckdb", name, [(0, o, order(o)) for o in range(4)])
    cfg = config(tmp_path, bootstrap, registry, name, sink, 'timestamp_precision = "us"\n')
    answered: list = []
    column_pass = fieldfast.partition
    monkeypatch.setattr(fieldfast, "partition",
                        lambda *a, **kw: answered.append(column_pass(*a, **kw)) or answered[-1])
    r = eosctl("audit", "-c", str(cfg), "-p", "orders", "--format", "json")
    assert (r.exit_code, json.loads(r.stdout)["findings"], answered) == (0, [], [None]), r.output


def test_a_clean_sink_passes_and_a_mapping_names_other_columns(topic, registry, bootstrap, tmp_path):
    clean = [(0, o, order(o)) for o in range(13)] + [(1, o, order(o)) for o in range(6)]
    sink = make_sink(tmp_path / "sink.duckdb", topic, clean)
    cfg = config(tmp_path, bootstrap, registry, topic, sink)
    r = eosctl("audit", "-c", str(cfg), "-p", "orders", "--format", "json")
    report = json.loads(r.stdout)
    # Partition 0's record 12 is not framed: its row is not compared, the record is a finding; nothing else.
    assert found(report) == [("content_mismatch", 0, 12, 12, "unframed_record")], r.output
    assert report["summary"]["findings"]["gap"] == 0
    # The sink truncated the microseconds: one line says which tolerance to set, and with it the rows pass.
    con = duckdb.connect(str(sink))
    con.execute("UPDATE orders SET placed = date_trunc('millisecond', placed)")
    con.close()
    r = eosctl("audit", "-c", str(cfg), "-p", "orders", "--format", "json")
    summaries = [f["cause"]["summary"] for f in json.loads(r.stdout)["findings"]]
    assert len(summaries) == 19 and "differs below the millisecond" in summaries[0]
    cfg = config(tmp_path, bootstrap, registry, topic, sink, 'timestamp_precision = "ms"\n'
                 '[pipelines.orders.sink.fields]\nid = "value.id"\nplaced = "value.placed"\n')
    r = eosctl("audit", "-c", str(cfg), "-p", "orders", "--format", "json")
    assert found(json.loads(r.stdout)) == [("content_mismatch", 0, 12, 12, "unframed_record")], r.output


def _proto_line_class():
    from google.protobuf import descriptor_pb2, descriptor_pool
    from google.protobuf.message_factory import GetMessageClass

    F = descriptor_pb2.FieldDescriptorProto
    fdp = descriptor_pb2.FileDescriptorProto(name="lines.proto", package="shop", syntax="proto3")
    line = fdp.message_type.add(name="Line")
    line.field.add(name="sku", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    line.field.add(name="qty", number=2, type=F.TYPE_INT64, label=F.LABEL_OPTIONAL)
    line.field.add(name="price", number=3, type=F.TYPE_DOUBLE, label=F.LABEL_OPTIONAL)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    return GetMessageClass(pool.FindMessageTypeByName("shop.Line"))


KEY_SCHEMA = json.dumps({"type": "record", "name": "LineKey", "namespace": "shop",
                         "fields": [{"name": "line_id", "type": "string"}]})
LINE_JSON = json.dumps({"type": "object", "required": ["sku", "qty", "price"],
                        "properties": {"sku": {"type": "string"}, "qty": {"type": "integer"},
                                       "price": {"type": "number"}}})


@pytest.mark.parametrize("fmt", ["protobuf", "json_in_headers"])
def test_protobuf_and_json_schema_values_with_avro_keys(fmt, bootstrap, registry, tmp_path):
    """Keys in Avro (a key.PATH mapping), values in Protobuf (prefix) or JSON Schema (ids in headers): a
    mangled field and an unframed record are their findings, the rest passes."""
    import uuid

    from confluent_kafka.schema_registry import header_schema_id_serializer
    from confluent_kafka.schema_registry.json_schema import JSONSerializer
    from confluent_kafka.schema_registry.protobuf import ProtobufSerializer

    name = f"decoded-{fmt.replace('_', '-')}-" + uuid.uuid4().hex[:6]
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept: a destroyed client fails its futures
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(30)
    client = SchemaRegistryClient({"url": registry.url})
    keys = AvroSerializer(client, KEY_SCHEMA)
    line = _proto_line_class()
    if fmt == "protobuf":
        ser = ProtobufSerializer(line, client, {"use.deprecated.format": False})
        value_of = lambda i: line(sku=f"s{i}", qty=i, price=i * 1.1)  # noqa: E731
    else:
        ser = JSONSerializer(LINE_JSON, client, conf={"schema.id.serializer": header_schema_id_serializer})
        value_of = lambda i: {"sku": f"s{i}", "qty": i, "price": i * 1.1}  # noqa: E731
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for i in range(6):
        headers: list = []
        k = keys({"line_id": f"l-{i}"}, SerializationContext(name, MessageField.KEY))
        v = ser(value_of(i), SerializationContext(name, MessageField.VALUE, headers)) if i != 4 else \
            b"s4,4,4.4"  # a producer without the serializer
        p.produce(name, key=k, value=v, headers=headers)
    assert p.flush(30) == 0
    sink = tmp_path / "lines.duckdb"
    con = duckdb.connect(str(sink))
    con.execute("CREATE TABLE orders (src_topic VARCHAR, src_partition INTEGER, src_offset BIGINT, "
                "line VARCHAR, sku VARCHAR, qty BIGINT, price DOUBLE)")
    con.executemany("INSERT INTO orders VALUES (?, 0, ?, ?, ?, ?, ?)",
                    [(name, i, f"l-{i}", f"s{i}", 99 if i == 2 else i, i * 1.1) for i in range(6)])
    con.close()
    cfg = config(tmp_path, bootstrap, registry, name, sink, "float_tolerance = 1e-9\n"
                 '[pipelines.orders.sink.fields]\nline = "key.line_id"\nsku = "value.sku"\nqty = "qty"\n'
                 'price = "value.price"\n')
    r = eosctl("audit", "-c", str(cfg), "-p", "orders", "--format", "json")
    report = json.loads(r.stdout)
    assert r.exit_code == 1, r.output
    assert found(report) == [("content_mismatch", 0, 2, 2, "different_field"),
                             ("content_mismatch", 0, 4, 4, "unframed_record")]
    assert "column 'qty' (field value.qty) holds 99 where the record has 2" in \
        report["findings"][0]["cause"]["summary"]
    # No mapping: the columns named like the value's fields, and the key column to the key's one field.
    con = duckdb.connect(str(sink))
    con.execute("UPDATE orders SET line = 'l-9' WHERE src_offset = 1")
    con.close()
    cfg = config(tmp_path, bootstrap, registry, name, sink, 'key_column = "line"\nfloat_tolerance = 1e-9\n')
    report = json.loads(eosctl("audit", "-c", str(cfg), "-p", "orders", "--format", "json").stdout)
    assert found(report) == [("content_mismatch", 0, 1, 1, "different_field"),
                             ("content_mismatch", 0, 2, 2, "different_field"),
                             ("content_mismatch", 0, 4, 4, "unframed_record")]
    assert "column 'line' (field key.line_id) holds 'l-9' where the record has 'l-1'" in \
        report["findings"][0]["cause"]["summary"]


KEY_V2 = json.dumps({"type": "record", "name": "LineKey", "namespace": "shop", "doc": "v2",
                     "fields": [{"name": "line_id", "type": "string"}]})


def test_key_lineage_pairs_a_key_reserialized_under_a_new_schema_version(bootstrap, registry, tmp_path):
    """A stage that reads Avro keys (schema v1) and writes them again under v2 (another schema id: other
    bytes, the same logical key): `lineage = "key"` pairs them by what they mean where the cluster names a
    registry; by bytes, every input is lost and every output unpaired."""
    import uuid

    from confluent_kafka import Consumer, TopicPartition

    name = "relkey" + uuid.uuid4().hex[:6]
    src, out, group = f"{name}.in", f"{name}.out", f"{name}.stage"
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept: a destroyed client fails its futures
    for f in admin.create_topics([NewTopic(t, 1, 1) for t in (src, out)]).values():
        f.result(30)
    client = SchemaRegistryClient({"url": registry.url})
    v1, v2 = AvroSerializer(client, KEY_SCHEMA), AvroSerializer(client, KEY_V2)
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for i in range(5):
        p.produce(src, key=v1({"line_id": f"l-{i}"}, SerializationContext(src, MessageField.KEY)), value=b"v")
    assert p.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                         "isolation.level": "read_committed", "auto.offset.reset": "earliest"})
    writer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{name}.tx"})
    try:
        consumer.assign([TopicPartition(src, 0, 0)])
        msgs: list = []
        while len(msgs) < 5:
            msgs += [m for m in consumer.consume(5, 1) if m.error() is None]
        writer.init_transactions(30)
        writer.begin_transaction()
        from confluent_kafka.schema_registry.avro import AvroDeserializer

        read = AvroDeserializer(client)
        written = []
        for m in msgs:
            key = read(m.key(), SerializationContext(src, MessageField.KEY))
            written.append(v2(key, SerializationContext(out, MessageField.KEY)))
            writer.produce(out, key=written[-1], value=m.value())
        writer.send_offsets_to_transaction([TopicPartition(src, 0, 5)], consumer.consumer_group_metadata(),
                                           30)
        writer.commit_transaction(30)
        markers_written(bootstrap, f"{name}.tx")
    finally:
        consumer.close()
    assert all(w != m.key() for w, m in zip(written, msgs, strict=True))  # v2 is another id: other bytes
    text = (f'[clusters.c]\nbootstrap_servers = "{bootstrap}"\nschema_registry_url = "{registry.url}"\n\n'
            f'[pipelines.stage]\nsource_topics = ["{src}"]\ngroup = "{group}"\n\n'
            f'[pipelines.stage.sink]\nkafka_topic = "{out}"\nlineage = "key"\n')
    cfg = tmp_path / "eosctl.toml"
    cfg.write_text(text)
    r = eosctl("audit", "-c", str(cfg), "--format", "json")
    assert (r.exit_code, json.loads(r.stdout)["findings"]) == (0, []), r.output
    cfg.write_text(text.replace(f'schema_registry_url = "{registry.url}"\n', ""))
    r = eosctl("audit", "-c", str(cfg), "--format", "json")
    kinds = sorted({f["kind"] for f in json.loads(r.stdout)["findings"]})
    assert (r.exit_code, kinds) == (1, ["invalid_row", "lost_key"]), r.output


def test_a_postgresql_sink_of_typed_columns(topic, registry, bootstrap, postgres, pg_db, tmp_path):
    """The same planted faults in a PostgreSQL table (NUMERIC, TIMESTAMP, TEXT[]): the same findings."""
    from urllib.parse import quote

    import psycopg

    with psycopg.connect(pg_db, autocommit=True) as con:
        con.execute("CREATE TABLE orders (src_topic TEXT, src_partition INTEGER, src_offset BIGINT, "
                    "id BIGINT, amount NUMERIC(9, 2), placed TIMESTAMP, state TEXT, tags TEXT[], "
                    "loaded_by TEXT)")
        with con.cursor() as cur:
            cur.executemany("INSERT INTO orders VALUES (%s, %s, %s, %s, %s, %s, %s, %s, 'job')",
                            [(topic, p, o, v["id"], v["amount"], v["placed"].replace(tzinfo=None), v["state"],
                              v["tags"]) for p, o, v in faulty_rows()])
    uri = pg_db.replace(":" + quote(postgres.password, safe=""), ":${PGPW}", 1)
    assert postgres.password not in uri
    path = tmp_path / "eosctl.toml"
    path.write_text(f'[clusters.main]\nbootstrap_servers = "{bootstrap}"\n'
                    f'schema_registry_url = "{registry.url}"\n\n[pipelines.orders]\n'
                    f'source_topics = ["{topic}"]\n\n[pipelines.orders.sink]\npostgres = "{uri}"\n'
                    'table = "orders"\n')
    r = eosctl("audit", "-c", str(path), "-p", "orders", "--engine", "local", "--format", "json",
               env={"PGPW": postgres.password})
    assert r.exit_code == 1, r.output
    assert found(json.loads(r.stdout)) == [
        ("content_mismatch", 0, 3, 3, "different_field"),
        ("content_mismatch", 0, 5, 5, "different_record"),
        ("content_mismatch", 0, 7, 7, "different_field"),
        ("content_mismatch", 0, 12, 12, "unframed_record"),
        ("content_mismatch", 1, 1, 6, "shifted_coordinates"),
    ]
