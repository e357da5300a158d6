"""Framed keys and values decoded through a registry: confluent-kafka's own Avro, Protobuf and JSON Schema
serializers write them against tests/support/registrystub.py, eosctl.cluster.schemas reads them back."""

from __future__ import annotations

import json
import socket
import struct
from datetime import UTC, datetime
from decimal import Decimal

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient, header_schema_id_serializer
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool
from google.protobuf.message_factory import GetMessageClass

from eosctl.cluster.schemas import (
    Decoded,
    RegistrySettings,
    SchemaDecoder,
    SchemaRegistryProblem,
    Undecodable,
    Unframed,
)
from tests.support.registrystub import RegistryStub

ORDER = json.dumps({
    "type": "record", "name": "Order", "namespace": "shop",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "state", "type": {"type": "enum", "name": "State", "symbols": ["NEW", "PAID"]}},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
    ],
})
AT = datetime(2026, 12, 1, 10, 30, 0, 123000, tzinfo=UTC)
ORDER_VALUE = {"id": 7, "amount": Decimal("12.50"), "at": AT, "state": "PAID", "tags": ["a", "b"]}


@pytest.fixture
def registry():
    with RegistryStub() as stub:
        yield stub


def _client(stub: RegistryStub) -> SchemaRegistryClient:
    return SchemaRegistryClient({"url": stub.url})


def _ctx(topic: str, field: str = "value", headers: list | None = None) -> SerializationContext:
    return SerializationContext(topic, MessageField.KEY if field == "key" else MessageField.VALUE, headers)


def _decoder(stub: RegistryStub) -> SchemaDecoder:
    return SchemaDecoder(RegistrySettings(stub.url, cluster="main"))


def test_avro_in_the_prefix_decodes_typed_with_subject_and_version(registry):
    data = AvroSerializer(_client(registry), ORDER)(ORDER_VALUE, _ctx("orders"))
    assert data[0] == 0 and struct.unpack(">I", data[1:5])[0] == 1
    got = _decoder(registry).decode("orders", "value", data, where="orders-0 offset 5")
    assert got == Decoded("AVRO", 1, None, "prefix", "orders-value", 1, ORDER_VALUE)


def test_avro_with_its_id_in_a_header_and_a_bare_payload(registry):
    headers: list = []
    ser = AvroSerializer(_client(registry), ORDER, conf={"schema.id.serializer": header_schema_id_serializer})
    data = ser(ORDER_VALUE, _ctx("orders", headers=headers))
    assert [k for k, _ in headers] == ["__value_schema_id"] and headers[0][1][0] == 1  # a GUID
    got = _decoder(registry).decode("orders", "value", data, headers)
    assert isinstance(got, Decoded) and got.id_in == "header" and got.data == ORDER_VALUE
    # The record names its schema by GUID; the registry's answer gives its id, subject and version too.
    assert (got.guid, got.schema_id, got.subject, got.version) == (registry.schemas[1]["guid"], 1,
                                                                   "orders-value", 1)
    # A key's header is __key_schema_id: the value's header does not frame a key.
    assert isinstance(_decoder(registry).decode("orders", "key", data, headers), Unframed)


def _proto_class():
    fdp = descriptor_pb2.FileDescriptorProto(name="shop.proto", package="shop", syntax="proto3")
    outer = fdp.message_type.add(name="Envelope")
    outer.field.add(name="note", number=1, type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
                    label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL)
    inner = outer.nested_type.add(name="Line")
    F = descriptor_pb2.FieldDescriptorProto
    inner.field.add(name="sku", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    inner.field.add(name="qty", number=2, type=F.TYPE_INT64, label=F.LABEL_OPTIONAL)
    inner.field.add(name="blob", number=3, type=F.TYPE_BYTES, label=F.LABEL_OPTIONAL)
    inner.field.add(name="prices", number=4, type=F.TYPE_DOUBLE, label=F.LABEL_REPEATED)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    return GetMessageClass(pool.FindMessageTypeByName("shop.Envelope.Line"))


def test_protobuf_a_nested_message_by_its_index_list(registry):
    line = _proto_class()
    msg = line(sku="A-1", qty=2**40, blob=b"\x00\xff", prices=[1.5, 2.25])
    data = ProtobufSerializer(line, _client(registry), {"use.deprecated.format": False})(msg, _ctx("lines"))
    got = _decoder(registry).decode("lines", "value", data)
    assert isinstance(got, Decoded) and got.format == "PROTOBUF" and got.message == "shop.Envelope.Line"
    assert got.data == {"sku": "A-1", "qty": 2**40, "blob": b"\x00\xff", "prices": [1.5, 2.25]}
    assert (got.subject, got.version) == ("lines-value", 1)


def test_json_schema_decoded_and_checked_against_its_schema(registry):
    schema = json.dumps({"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]})
    client = _client(registry)
    data = JSONSerializer(schema, client)({"id": 3}, _ctx("events"))
    dec = _decoder(registry)
    assert dec.decode("events", "value", data) == Decoded("JSON", 1, None, "prefix", "events-value", 1,
                                                         {"id": 3})
    bad = dec.decode("events", "value", data[:5] + b'{"id": "x"}')
    assert isinstance(bad, Undecodable) and "not valid under its JSON Schema" in bad.why


def test_each_schema_is_fetched_once_per_id(registry):
    ser = AvroSerializer(_client(registry), ORDER)
    records = [ser({**ORDER_VALUE, "id": i}, _ctx("orders")) for i in range(50)]
    registry.requests.clear()
    dec = _decoder(registry)
    assert [dec.decode("orders", "value", r).data["id"] for r in records] == list(range(50))
    assert registry.requests == {"GET /schemas/ids/1": 1, "GET /schemas/ids/1/versions": 1}


def test_a_record_not_framed_is_an_outcome_not_an_error(registry):
    AvroSerializer(_client(registry), ORDER)(ORDER_VALUE, _ctx("orders"))
    dec = _decoder(registry)
    assert dec.decode("orders", "value", b'{"id": 7}') == Unframed(
        "it starts with byte 0x7b, not the magic byte 0x00")
    assert dec.decode("orders", "value", b"\x00\x00\x01") == Unframed(
        "it is 3 bytes, shorter than the magic byte and schema id")
    assert dec.decode("orders", "value", None) is None
    got = dec.decode("orders", "value", b"\x00\x00\x00\x00\x01\x02")
    assert isinstance(got, Undecodable) and got.schema_id == 1 and got.format == "AVRO"


def test_an_unknown_id_is_named_in_one_line(registry):
    with pytest.raises(SchemaRegistryProblem) as e:
        _decoder(registry).decode("orders", "value", b"\x00\x00\x00\x00\x09abc", where="orders-0 offset 5")
    assert str(e.value) == (
        f"schema id 9 (the value of orders-0 offset 5) is not in the schema registry at {registry.url} "
        "(HTTP 404: Schema 9 not found); point clusters.main.schema_registry_url at the registry the "
        "producers use")


def test_an_unreachable_registry_is_named_in_one_line():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dec = SchemaDecoder(RegistrySettings(f"http://127.0.0.1:{port}", cluster="main"))
    with pytest.raises(SchemaRegistryProblem) as e:
        dec.decode("orders", "key", b"\x00\x00\x00\x00\x01abc")
    text = str(e.value)
    assert text.startswith(f"the schema registry at http://127.0.0.1:{port} is unreachable (ConnectError")
    assert text.endswith("asked for schema id 1 (a key of topic orders); check "
                         "clusters.main.schema_registry_url and that the registry is up")
    assert "\n" not in text


def test_refused_credentials_are_named_and_the_password_never_shown():
    with RegistryStub("eos", "right") as stub:
        sid = stub.register("orders-value", ORDER)
        framed = b"\x00" + struct.pack(">I", sid) + b"\x0e"
        dec = SchemaDecoder(RegistrySettings(stub.url, "eos", "wrong-secret", cluster="main"))
        with pytest.raises(SchemaRegistryProblem) as e:
            dec.decode("orders", "value", framed)
        assert str(e.value) == (
            f"the schema registry at {stub.url} refused the credentials (HTTP 401) asked for schema id 1 "
            "(a value of topic orders); check clusters.main.schema_registry_username and "
            "schema_registry_password")
        assert "wrong-secret" not in str(e.value) and "wrong-secret" not in repr(dec.settings)
        ok = SchemaDecoder(RegistrySettings(stub.url, "eos", "right"))
        assert isinstance(ok.decode("orders", "value", framed), Undecodable)  # authorized: the schema came
