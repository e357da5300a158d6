"""A scripted Kafka-protocol broker for tests (see server.KafkaSim and the ``kafka_sim`` fixture)."""

from tests.kafkasim.log import ProducerRow, SimPartition
from tests.kafkasim.server import (
    FENCED_LEADER_EPOCH,
    KAFKA_STORAGE_ERROR,
    NOT_LEADER_OR_FOLLOWER,
    OFFSET_OUT_OF_RANGE,
    TOPIC_AUTHORIZATION_FAILED,
    UNKNOWN_LEADER_EPOCH,
    UNKNOWN_TOPIC_OR_PARTITION,
    Fault,
    KafkaSim,
    SimGroup,
    SimTransaction,
)

__all__ = [
    "FENCED_LEADER_EPOCH", "KAFKA_STORAGE_ERROR", "NOT_LEADER_OR_FOLLOWER", "OFFSET_OUT_OF_RANGE",
    "TOPIC_AUTHORIZATION_FAILED", "UNKNOWN_LEADER_EPOCH", "UNKNOWN_TOPIC_OR_PARTITION", "Fault", "KafkaSim",
    "ProducerRow", "SimGroup", "SimPartition", "SimTransaction",
]
