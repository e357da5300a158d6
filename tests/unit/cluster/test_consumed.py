"""eosctl.cluster.consumed: a confluent-kafka message's coordinates and headers, as a record has them."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, Message

from eosctl.cluster.consumed import headers, placed


def test_a_record_has_its_place_and_headers_in_order():
    m = Message(topic="orders", partition=3, offset=41, key=b"k", value=b"v",
                headers=[("b", b"2"), ("a", None), ("b", b"1")])
    assert placed(m) == ("orders", 3, 41)
    assert headers(m) == [("b", b"2"), ("a", None), ("b", b"1")]
    assert headers(Message(topic="orders", partition=0, offset=0)) == []


def test_an_error_read_as_a_record_fails_naming_the_error():
    m = Message(error=KafkaError(KafkaError._PARTITION_EOF))
    with pytest.raises(AssertionError, match="PARTITION_EOF"):
        placed(m)
