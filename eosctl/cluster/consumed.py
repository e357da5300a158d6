"""A confluent-kafka message's parts as a record that arrived has them.

confluent-kafka types a Message's topic, partition and offset as optional (a message that carries an error
may lack them) and its headers as a list or a dict. Code that has checked ``error()`` reads them here, so
that an error message read as a record fails at once, naming its error, rather than as a None further on.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    from confluent_kafka import Message


def placed(m: Message) -> tuple[str, int, int]:
    """The record's (topic, partition, offset)."""
    topic, partition, offset = m.topic(), m.partition(), m.offset()
    assert topic is not None and partition is not None and offset is not None, m.error()
    return topic, partition, offset


def headers(m: Message) -> list[tuple[str, bytes | None]]:
    """The record's headers in their order: a consumed message carries them as a list of pairs."""
    return cast("list[tuple[str, bytes | None]]", list(m.headers() or []))
