"""Issue 9, case 7: a group's committed offsets for a topic that is gone (or that the user may not
describe) give that partition's row an error; every other row and group is still measured."""

from __future__ import annotations

import json

from tests.kafkasim import TOPIC_AUTHORIZATION_FAILED, KafkaSim
from tests.support.helpers import eosctl


def lag(sim: KafkaSim, *args: str):
    return eosctl("lag", "--bootstrap", sim.bootstrap, "--format", "json", *args, columns=None)


def rows(doc: dict) -> list[tuple]:
    return [(g["group"], p["topic"], p["partition"], p["committed"], p["lso"], p["lag_to_lso"],
             p["records_behind"], p["error"]) for g in doc["groups"] for p in g["partitions"]]


def test_lag_reports_a_deleted_and_a_forbidden_topic_per_row_and_goes_on(kafka_sim: KafkaSim) -> None:
    p = kafka_sim.partition("orders", 0)
    p.data(6)
    p.txn(3, 0, 2)
    p.commit(3, 0)  # offsets 6, 7 committed data, 8 the marker
    kafka_sim.partition("secret", 0).data(4)
    # Metadata refuses "secret" (KafkaApis: TOPIC_AUTHORIZATION_FAILED for a topic the principal may not
    # describe); "gone" was deleted, but its offsets are still listed by the group coordinator.
    kafka_sim.inject("metadata", "secret", error=TOPIC_AUTHORIZATION_FAILED, times=None)
    kafka_sim.group("billing", {("gone", 0): 40, ("orders", 0): 2, ("secret", 0): 1})
    kafka_sim.group("shipping", {("orders", 0): 9})
    result = lag(kafka_sim)
    assert result.exit_code == 0, result.output
    gone = (f"topic 'gone' does not exist on {kafka_sim.bootstrap} (list topics with `kafka-topics --list`; "
            "existing: orders)")
    assert rows(json.loads(result.stdout)) == [
        ("billing", "gone", 0, 40, -1, None, None, gone),
        ("billing", "orders", 0, 2, 9, 7, 6, None),
        ("billing", "secret", 0, 1, -1, None, None,
         "metadata for topic 'secret' failed: TopicAuthorizationFailed on secret: grant Read on topic secret "
         "(kafka-acls --add --allow-principal User:NAME --operation Read --topic secret)"),
        ("shipping", "orders", 0, 9, 9, 0, 0, None),
    ]


def test_a_topic_named_with_topic_still_fails_the_poll(kafka_sim: KafkaSim) -> None:
    kafka_sim.partition("orders", 0).data(1)
    kafka_sim.group("billing", {("gone", 0): 40})
    result = lag(kafka_sim, "--topic", "gone")
    assert result.exit_code == 2
    assert result.stderr == (f"eosctl: error: topic 'gone' does not exist on {kafka_sim.bootstrap} "
                             "(list topics with `kafka-topics --list`; existing: orders)\n")
