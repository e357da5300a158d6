"""Issue 49, item 5: the exit code of a bounded watch (`lag --watch S --count N`) says whether it read Kafka.

A watch carries on through failed polls (ERR with the reason, tests/integration/test_lag_watch_outage.py),
but a cron or CI step reads its exit code: every poll failed (no Read on the topic, the broker away) is
exit 2 with the last poll's cause; a watch that read the cluster only some of the time exits 0 and says how
many polls failed in one line after its last document.
"""

from __future__ import annotations

import json
import socket

from tests.kafkasim import TOPIC_AUTHORIZATION_FAILED, KafkaSim
from tests.support.helpers import eosctl

REFUSED = "Fetch refused: TopicAuthorizationFailed"


def watch(sim: KafkaSim, count: int):
    return eosctl("lag", "--bootstrap", sim.bootstrap, "--topic", "orders", "--group", "billing", "--format",
                  "json", "--watch", "0.1", "--count", str(count), columns=None)


def pipeline(sim: KafkaSim) -> None:
    p = sim.partition("orders", 0)
    p.data(6)
    sim.group("billing", {("orders", 0): 2}, state="Stable")


def refuse_fetches(sim: KafkaSim, times: int | None) -> None:
    """No Read on the topic: every Fetch of it refused (KafkaApis answers TOPIC_AUTHORIZATION_FAILED per
    partition), the probe at the high watermark included."""
    sim.inject("fetch", "orders", error=TOPIC_AUTHORIZATION_FAILED, probe=None, times=times)


def test_a_bounded_watch_whose_polls_all_failed_exits_2_with_the_last_cause(kafka_sim: KafkaSim) -> None:
    pipeline(kafka_sim)
    refuse_fetches(kafka_sim, times=None)
    result = watch(kafka_sim, 3)
    assert result.exit_code == 2, result.output
    docs = [json.loads(line) for line in result.stdout.splitlines()]
    assert len(docs) == 3 and all(d["error"] for d in docs)  # each poll still shown, as ERR
    last = result.stderr.splitlines()[-1]
    assert last.startswith("eosctl: error: lag --watch: all 3 polls failed; the last: "), result.stderr
    assert REFUSED in last and docs[-1]["error"] in last


def test_a_bounded_watch_that_saw_some_polls_fail_says_how_many(kafka_sim: KafkaSim) -> None:
    pipeline(kafka_sim)
    refuse_fetches(kafka_sim, times=1)  # the first poll's
    result = watch(kafka_sim, 3)
    assert result.exit_code == 0, result.output
    docs = [json.loads(line) for line in result.stdout.splitlines()]
    assert [d["error"] is None for d in docs] == [False, True, True], docs
    assert [p["lag_to_lso"] for p in docs[-1]["groups"][0]["partitions"]] == [4]
    last = result.stderr.splitlines()[-1]
    assert last.startswith("eosctl: lag --watch: 1 of 3 polls failed; the last failed one: "), result.stderr
    assert REFUSED in last


def test_a_bounded_watch_that_never_failed_says_nothing(kafka_sim: KafkaSim) -> None:
    pipeline(kafka_sim)
    result = watch(kafka_sim, 2)
    assert result.exit_code == 0, result.output
    assert result.stderr == ""
    assert [json.loads(line)["error"] for line in result.stdout.splitlines()] == [None, None]


def test_a_bounded_watch_of_a_broker_that_is_away_exits_2() -> None:
    """Nothing listens at the address (the broker down, a proxy off): every poll refused."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # free once closed: nobody listens there
    result = eosctl("lag", "--bootstrap", f"127.0.0.1:{port}", "--topic", "orders", "--group", "billing",
                    "--format", "json", "--watch", "0.1", "--count", "2", "--timeout", "1", columns=None)
    assert result.exit_code == 2, result.output
    assert len(result.stdout.splitlines()) == 2  # both polls shown, as outages
    assert result.stderr.splitlines()[-1] == (
        f"eosctl: error: lag --watch: all 2 polls failed; the last: cannot reach Kafka at 127.0.0.1:{port}: "
        "connection refused; check --bootstrap / that the broker is up")
