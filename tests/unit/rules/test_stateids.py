"""What a state sink's rows and records compare by (eosctl.rules.stateids)."""

from __future__ import annotations

import hashlib
from decimal import Decimal

from eosctl.config.model import Sink
from eosctl.rules.stateids import canon, is_delete, key_text, record_key, record_value, row_tuple


def test_one_text_per_value_whatever_column_type_holds_it():
    assert canon(5) == canon(5.0) == canon(Decimal("5.00")) == canon("5") == canon(b"5") == "5"
    assert canon(2.5) == "2.5"
    assert canon('{"b": 1,  "a": [1, 2]}') == canon({"a": [1, 2], "b": 1}) == '{"a":[1,2],"b":1}'
    assert canon(True) == "true"
    assert canon(None) is None
    assert canon("{not json") == "{not json"


def test_keys_from_the_key_bytes_or_json_fields_of_key_and_value():
    assert record_key(Sink(duckdb="x", key_column="id"), b"k1", b"{}") == ("k1",)
    sink = Sink(duckdb="x", mode="upsert", key_fields=(("region", "key.r"), ("id", "value.order.id")))
    assert record_key(sink, b'{"r": "eu"}', b'{"order": {"id": 7}}') == ("eu", "7")
    assert record_key(sink, b"not json", b'{"order": {}}') == (None, None)
    assert key_text(("region", "id"), ("eu", "7")) == "region=eu, id=7"


def test_values_by_fields_whole_or_md5_and_deletes_by_tombstone_or_named_value():
    fields = Sink(duckdb="x", mode="upsert", key_column="id",
                  value_fields=(("v", "value.v"), ("doc", "value")))
    assert record_value(fields, b"k", b'{"v": 3}') == ("3", '{"v":3}')
    md5 = Sink(duckdb="x", mode="upsert", key_column="id", value_hash_column="h")
    assert record_value(md5, b"k", b"abc") == (hashlib.md5(b"abc").hexdigest(),)
    upper = hashlib.md5(b"abc").hexdigest().upper()
    assert row_tuple([upper], hashed=True) == record_value(md5, b"k", b"abc")
    assert record_value(Sink(duckdb="x", key_column="id"), b"k", b"abc") is None
    deletes = Sink(duckdb="x", mode="upsert", key_column="id", delete_values=("value.__deleted=true", "DEL"))
    assert is_delete(deletes, None)
    assert is_delete(deletes, b'{"__deleted": "true", "v": 1}')
    assert is_delete(deletes, b"DEL")
    assert not is_delete(deletes, b'{"__deleted": "false"}')
    assert not is_delete(Sink(duckdb="x"), b"DEL")
