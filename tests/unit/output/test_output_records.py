"""A record's key and value in a table cell: decoded with its schema's names, or its text; long ones cut."""

from __future__ import annotations

from eosctl.cluster.records import Record
from eosctl.cluster.schemas import Decoded, Undecodable, Unframed
from eosctl.inspection.records import record_document
from eosctl.output.records import SHOWN_CHARS, cut, field_text


class _Outcomes:
    def __init__(self, *outcomes: object) -> None:
        self.outcomes = list(outcomes)

    def decode(self, *args: object) -> object:
        return self.outcomes.pop(0)


def _doc(key: object, value: object, raw_key: bytes | None = b"k", raw_value: bytes | None = b"v") -> dict:
    return record_document("orders", 0, Record(5, raw_key, raw_value, 1, "none"),
                           _Outcomes(key, value))  # type: ignore[arg-type]


def _text(doc: dict, which: str) -> str:
    return field_text(doc[f"{which}_decoded"], doc[which])


def test_decoded_fields_say_format_subject_version_and_id():
    doc = _doc(Decoded("AVRO", 3, None, "prefix", "orders-key", 2, {"id": "o-1"}),
               Decoded("PROTOBUF", None, "6f1c", "header", None, None, {"n": 1}, "shop.Line"))
    assert _text(doc, "key") == 'AVRO orders-key v2 (id 3): {"id": "o-1"}'
    assert _text(doc, "value") == 'PROTOBUF shop.Line (guid 6f1c, in header): {"n": 1}'
    assert (doc["key"], doc["value"]) == ("k", "v")  # the text stays beside the decoded form


def test_unframed_and_undecodable_say_why_then_show_the_text():
    doc = _doc(Unframed("it starts with byte 0x6f, not the magic byte 0x00"),
               Undecodable("AVRO", 4, None, "1 bytes left after the Avro record"), b"o-1",
               b"\x00\x00\x00\x00\x04\xff")
    assert _text(doc, "key") == ("UNFRAMED (not in the Schema Registry wire format: it starts with byte "
                                 "0x6f, not the magic byte 0x00): o-1")
    assert _text(doc, "value") == ("UNDECODABLE (framed as AVRO schema 4, does not decode: 1 bytes left "
                                   "after the Avro record): \x00\x00\x00\x00\x04\\xFF")
    # Valid UTF-8 control characters stay characters here: table() escapes them for the terminal.


def test_no_registry_null_and_long_values():
    raw = record_document("orders", 0, Record(5, None, b"x" * 500, 1, "lz4"), None)
    assert (raw["key_decoded"], raw["value_decoded"]) == (None, None)
    assert _text(raw, "key") == "null"
    assert _text(raw, "value") == "x" * SHOWN_CHARS + "… (340 more characters)"
    assert raw["value"] == "x" * 500  # JSON keeps it whole
    assert cut("short") == "short"
