"""`eosctl log --records` and `explain --offset` on Apache Kafka 4.4 read records written by confluent-kafka's
Avro, Protobuf and JSON Schema serializers (ids in the prefix, and in headers), decoded through a registry
(tests/support/registrystub.py: see issue 50's note on why not a JVM registry), with `--raw` showing the
bytes."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from confluent_kafka.schema_registry import SchemaRegistryClient, header_schema_id_serializer
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext, StringSerializer

from tests.support.helpers import eosctl, eosctl_json
from tests.support.registrystub import RegistryStub
from tests.unit.cluster.test_schemas import AT, ORDER, ORDER_VALUE, _proto_class

pytestmark = pytest.mark.integration

KEY_SCHEMA = json.dumps({"type": "record", "name": "OrderKey", "namespace": "shop",
                         "fields": [{"name": "order_id", "type": "string"}]})
EVENT = json.dumps({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]})


@pytest.fixture
def framed(bootstrap, unique, tmp_path):
    """A 1-partition topic: 0 an Avro key and value (ids in the prefix), 1 an Avro value with its id in a
    header, 2 a Protobuf value (a nested message), 3 a JSON Schema value, 4 a value not framed; and a
    config naming the registry."""
    topic = f"{unique}-orders"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    with RegistryStub() as registry:
        client = SchemaRegistryClient({"url": registry.url})

        def ctx(field: MessageField, headers: list | None = None) -> SerializationContext:
            return SerializationContext(topic, field, headers)

        key = AvroSerializer(client, KEY_SCHEMA)
        value = AvroSerializer(client, ORDER)
        in_header = AvroSerializer(client, ORDER, conf={"schema.id.serializer": header_schema_id_serializer})
        line = _proto_class()
        proto = ProtobufSerializer(line, client, {"use.deprecated.format": False})
        event = JSONSerializer(EVENT, client)
        headers: list = []
        records = [
            (key({"order_id": "o-1"}, ctx(MessageField.KEY)), value(ORDER_VALUE, ctx(MessageField.VALUE)),
             []),
            (StringSerializer()("o-2"), in_header({**ORDER_VALUE, "id": 8},
                                                  ctx(MessageField.VALUE, headers)), headers),
            (None, proto(line(sku="A-1", qty=3, blob=b"\x01"), ctx(MessageField.VALUE)), []),
            (None, event({"n": 5}, ctx(MessageField.VALUE)), []),
            (None, b'{"id": 9}', []),
        ]
        producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
        for k, v, h in records:
            producer.produce(topic, key=k, value=v, headers=h)
        assert producer.flush(30) == 0
        config = tmp_path / "eosctl.toml"
        config.write_text(f'[clusters.main]\nbootstrap_servers = "{bootstrap}"\n'
                          f'schema_registry_url = "{registry.url}"\n\n'
                          f'[pipelines.orders]\nsource_topics = ["{topic}"]\n')
        yield topic, config, registry


def _records(config: Path, topic: str, *extra: str) -> list[dict]:
    return eosctl_json("log", "-c", str(config), "--topic", topic, "--partition", "0", "--records",
                       *extra)["records"]


def test_log_records_show_decoded_keys_and_values_with_subject_version_and_id(framed):
    topic, config, registry = framed
    recs = _records(config, topic)
    assert [r["offset"] for r in recs] == [0, 1, 2, 3, 4]
    assert [r["kind"] for r in recs] == ["DATA"] * 5
    k0, v0 = recs[0]["key_decoded"], recs[0]["value_decoded"]
    assert (k0["encoding"], k0["subject"], k0["version"], k0["schema_id"], k0["data"]) == (
        "AVRO", f"{topic}-key", 1, 1, {"order_id": "o-1"})
    assert (v0["encoding"], v0["subject"], v0["schema_id"], v0["id_in"]) == ("AVRO", f"{topic}-value", 2,
                                                                             "prefix")
    assert v0["data"] == {"id": 7, "amount": "12.50", "at": AT.isoformat(), "state": "PAID",
                          "tags": ["a", "b"]}
    v1 = recs[1]["value_decoded"]
    assert (v1["encoding"], v1["id_in"], v1["guid"], v1["schema_id"], v1["subject"], v1["data"]["id"]) == (
        "AVRO", "header", registry.schemas[2]["guid"], 2, f"{topic}-value", 8)
    assert recs[1]["key_decoded"]["encoding"] == "unframed"  # a string key where the registry is set
    assert recs[1]["key"] == "o-2"
    assert recs[1]["headers"][0]["key"] == "__value_schema_id"
    v2 = recs[2]["value_decoded"]
    assert (v2["encoding"], v2["message"]) == ("PROTOBUF", "shop.Envelope.Line")
    assert v2["data"] == {"sku": "A-1", "qty": 3, "blob": "\x01", "prices": []}
    assert (recs[3]["value_decoded"]["encoding"], recs[3]["value_decoded"]["data"]) == ("JSON", {"n": 5})
    v4 = recs[4]["value_decoded"]
    assert (v4["encoding"], recs[4]["value"]) == ("unframed", '{"id": 9}')
    assert v4["problem"] == ("not in the Schema Registry wire format: it starts with byte 0x7b, not the "
                             "magic byte 0x00")
    # Each schema once for the run: four ids, and the GUID one record names (schema 2's: a record naming
    # its schema by GUID is looked up by it, once).
    assert {k: n for k, n in registry.requests.items() if k.startswith("GET /schemas/")
            and not k.endswith("/versions")} == {**{f"GET /schemas/ids/{i}": 1 for i in (1, 2, 3, 4)},
                                                  f"GET /schemas/guids/{registry.schemas[2]['guid']}": 1}


def test_log_records_table_and_raw(framed):
    topic, config, registry = framed
    out = eosctl("log", "-c", str(config), "--topic", topic, "--partition", "0", "--records",
                 "--format", "plain", columns=1000)
    assert out.exit_code == 0, out.output
    rows = out.stdout.split("# Records\n")[1].splitlines()
    assert rows[0] == "offset\tkey\tvalue\ttimestamp (UTC)\tcodec"
    assert rows[1].split("\t")[:3] == [
        "0", f'AVRO {topic}-key v1 (id 1): {{"order_id": "o-1"}}',
        f'AVRO {topic}-value v1 (id 2): {{"id": 7, "amount": "12.50", '
        '"at": "2026-12-01T10:30:00.123000+00:00", "state": "PAID", "tags": ["a", "b"]}']
    assert rows[2].split("\t")[2].startswith(f'AVRO {topic}-value v1 (id 2, in header): '
                                             '{"id": 8, "amount": "12.50"')
    assert rows[3].split("\t")[1:3] == ["-", f'PROTOBUF shop.Envelope.Line {topic}-value v2 (id 3): '
                                               '{"sku": "A-1", "qty": 3, "blob": "\\u0001", "prices": []}']
    assert rows[5].split("\t")[2] == ("UNFRAMED (not in the Schema Registry wire format: it starts with byte "
                                      '0x7b, not the magic byte 0x00): {"id": 9}')
    raw = _records(config, topic, "--raw")
    assert [r["value_decoded"] for r in raw] == [None] * 5
    assert raw[4]["value"] == '{"id": 9}'
    assert raw[0]["value"].startswith("\x00\x00\x00\x00\x02")  # magic byte 0, schema id 2


def test_explain_shows_the_decoded_record(framed):
    topic, config, _ = framed
    doc = eosctl_json("explain", "-c", str(config), "--topic", topic, "--partition", "0", "--offset", "0")
    assert doc["record"]["value_decoded"]["data"]["amount"] == str(Decimal("12.50"))
    assert doc["record"]["key_decoded"]["subject"] == f"{topic}-key"
    out = eosctl("explain", "-c", str(config), "--topic", topic, "--partition", "0", "--offset", "3",
                 "--format", "plain")
    assert out.exit_code == 0, out.output
    assert f'value\tJSON {topic}-value v3 (id 4): {{"n": 5}}\n' in out.stdout
    raw = eosctl_json("explain", "-c", str(config), "--topic", topic, "--partition", "0", "--offset", "3",
                      "--raw")
    assert raw["record"]["value_decoded"] is None
    assert raw["record"]["value"].startswith("\x00\x00\x00\x00\x04")  # magic byte 0, schema id 4


def test_an_unknown_schema_id_is_one_line_exit_2(framed, bootstrap):
    topic, config, registry = framed
    registry.schemas.pop(2)
    out = eosctl("log", "-c", str(config), "--topic", topic, "--partition", "0", "--records")
    assert out.exit_code == 2
    assert out.stderr.strip().splitlines() == [
        f"eosctl: error: schema id 2 (the value of {topic}-0 offset 0) is not in the schema registry at "
        f"{registry.url} (HTTP 404: Schema 2 not found); point clusters.main.schema_registry_url at the "
        "registry the producers use"]


def test_refused_credentials_and_an_unreachable_registry_are_one_line_exit_2(framed, tmp_path):
    topic, _, _ = framed
    with RegistryStub("eos", "right-pw") as guarded:
        config = tmp_path / "guarded.toml"
        config.write_text(f'[clusters.main]\nbootstrap_servers = "{_bootstrap_of(framed)}"\n'
                          f'schema_registry_url = "{guarded.url}"\nschema_registry_username = "eos"\n'
                          'schema_registry_password = "${SRPASS}"\n\n'
                          f'[pipelines.orders]\nsource_topics = ["{topic}"]\n')
        out = eosctl("log", "-c", str(config), "--topic", topic, "--partition", "0", "--records",
                     env={"SRPASS": "wrong-pw-123"})
        assert out.exit_code == 2
        assert out.stderr.strip().splitlines() == [
            f"eosctl: error: the schema registry at {guarded.url} refused the credentials (HTTP 401) asked "
            f"for schema id 1 (the key of {topic}-0 offset 0); check clusters.main.schema_registry_username "
            "and schema_registry_password"]
        assert "wrong-pw-123" not in out.output
    out = eosctl("log", "-c", str(config), "--topic", topic, "--partition", "0", "--records",
                 env={"SRPASS": "wrong-pw-123"})  # the stub is gone: nothing listens
    assert out.exit_code == 2
    (line,) = out.stderr.strip().splitlines()
    assert line.startswith(f"eosctl: error: the schema registry at {guarded.url} is unreachable (")
    assert line.endswith("check clusters.main.schema_registry_url and that the registry is up")


def _bootstrap_of(framed) -> str:
    import tomllib

    return tomllib.loads(framed[1].read_text())["clusters"]["main"]["bootstrap_servers"]
