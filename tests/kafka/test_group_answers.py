"""Streams and share groups on brokers that cannot (or no longer) describe them, on the scripted broker
(issue 52, "every group type"): who consumes is context, so a group its type's describe API does not
describe still shows its type, state and progress, with no members (`members: null`), and `lag` exits 0.

What the scripted broker answers is Apache Kafka 4.4.0's, measured with raw requests (tests/kafkasim/
server.py, ``_typed_group``): StreamsGroupDescribe and ShareGroupDescribe answer a group that vanished (or
changed type) with GROUP_ID_NOT_FOUND for it; DescribeShareGroupOffsets answers a missing group with no
topics. A broker that lists a group's type (ListGroups v5) but not its describe API, ShareGroupDescribe v1
or DescribeShareGroupOffsets, is the "unsupported version" case: eosctl does not send what it does not
list. The real broker's answers for live groups: tests/integration/test_group_types.py.
"""

from __future__ import annotations

import json

import pytest

from tests.kafkasim import KafkaSim
from tests.support.helpers import eosctl

LIST_GROUPS_V5 = {16: (0, 5)}  # ListGroups v5 names each group's type (KIP-848)
STREAMS, SHARE, SHARE_OFFSETS = 89, 77, 90


def lag(sim: KafkaSim, *args: str) -> dict:
    result = eosctl("lag", "--bootstrap", sim.bootstrap, "--format", "json", *args, columns=None)
    assert result.exit_code == 0, result.output
    return {g["group"]: g for g in json.loads(result.stdout)["groups"]}


@pytest.fixture
def sim(kafka_sim: KafkaSim) -> KafkaSim:
    kafka_sim.partition("orders", 0).data(10)
    kafka_sim.extra_api_keys.update(LIST_GROUPS_V5)
    return kafka_sim


def asked(sim: KafkaSim, api: str) -> int:
    return sum(1 for _, name, _ in sim.requests if name == api)


def test_a_streams_group_that_vanished_shows_its_offsets_without_members(sim: KafkaSim) -> None:
    sim.extra_api_keys[STREAMS] = (0, 1)
    sim.group("app", {("orders", 0): 7}, state="Stable", group_type="streams")
    # Between ListGroups and the describe, the group is gone (deleted, or recreated as another type):
    # StreamsGroupDescribe answers GROUP_ID_NOT_FOUND for it.
    original = sim._typed_group
    sim._typed_group = lambda gid, kind: None  # type: ignore[method-assign]
    try:
        groups = lag(sim, "-t", "orders")
    finally:
        sim._typed_group = original  # type: ignore[method-assign]
    app = groups["app"]
    assert (app["type"], app["state"], app["members"], app["topology"], app["epoch"]) == (
        "streams", "STABLE", None, None, None)
    assert [(p["committed"], p["consumer"]) for p in app["partitions"]] == [(7, None)]
    assert asked(sim, "StreamsGroupDescribe") == 1


def test_a_stable_streams_group_is_described(sim: KafkaSim) -> None:
    sim.extra_api_keys[STREAMS] = (0, 1)
    sim.group("app", {("orders", 0): 7}, state="NotReady", group_type="streams")
    app = lag(sim, "-t", "orders")["app"]
    # No topology yet (the scripted group has none): NOT_READY, as KIP-1071 names it.
    assert (app["type"], app["state"], app["members"], app["topology"]) == (
        "streams", "NOT_READY", [], {"epoch": None, "subtopologies": None})


def test_a_share_group_on_a_broker_without_its_apis_shows_its_type_without_progress(sim: KafkaSim) -> None:
    sim.group("readers", {("orders", 0): 4}, state="Stable", group_type="share")
    groups = lag(sim, "-g", "readers", "-t", "orders")
    readers = groups["readers"]
    assert (readers["type"], readers["state"], readers["members"]) == ("share", "STABLE", None)
    # No DescribeShareGroupOffsets listed: no progress (never OffsetFetch's answer for a share group);
    # no DescribeConfigs: the isolation is not said.
    assert [(p["committed"], p["share_progress"]) for p in readers["partitions"]] == [(None, None)]
    assert readers["share"] == {"isolation_level": None, "warning": None}
    assert (asked(sim, "ShareGroupDescribe"), asked(sim, "DescribeShareGroupOffsets"),
            asked(sim, "OffsetFetch")) == (0, 0, 0)


def test_a_share_group_s_progress_and_members_where_the_broker_answers(sim: KafkaSim) -> None:
    sim.extra_api_keys.update({SHARE: (1, 1), SHARE_OFFSETS: (0, 1)})
    sim.group("readers", {("orders", 0): 4}, state="Stable", group_type="share")
    readers = lag(sim, "-t", "orders")["readers"]
    assert (readers["type"], readers["state"], readers["members"], readers["epoch"]) == (
        "share", "STABLE", [], 1)
    # The start offset is the group's progress; the broker's lag -1 (unknown) is null.
    assert [(p["committed"], p["share_progress"], p["lag_to_lso"]) for p in readers["partitions"]] == [
        (4, {"start_offset": 4, "lag": None}, 6)]


def test_a_share_group_that_vanished_has_no_progress_and_lag_still_answers(sim: KafkaSim) -> None:
    sim.extra_api_keys.update({SHARE: (1, 1), SHARE_OFFSETS: (0, 1)})
    sim.group("readers", {("orders", 0): 4}, state="Stable", group_type="share")
    sim.group("billing", {("orders", 0): 9}, state="Stable")
    original = sim._typed_group
    sim._typed_group = lambda gid, kind: None  # type: ignore[method-assign]
    try:
        groups = lag(sim, "-g", "readers", "-g", "billing", "-t", "orders")
    finally:
        sim._typed_group = original  # type: ignore[method-assign]
    assert groups["readers"]["members"] is None
    assert [p["share_progress"] for p in groups["readers"]["partitions"]] == [None]
    assert [p["committed"] for p in groups["billing"]["partitions"]] == [9]


def test_a_share_group_reading_a_transactional_topic_is_warned_of_a_plain_one_not(sim: KafkaSim) -> None:
    """The warning reads the topic's recent log: an aborted transaction's batches make it transactional;
    the plain `orders` is not. Where the broker does not say the group's isolation (no DescribeConfigs
    listed), Kafka's default read_uncommitted is what its consumers read with: warned, saying so."""
    sim.extra_api_keys.update({SHARE: (1, 1), SHARE_OFFSETS: (0, 1)})
    payments = sim.partition("payments", 0)
    payments.data(3)
    payments.txn(7, records=2)
    payments.abort(7)
    payments.data(2)
    sim.group("readers", {("orders", 0): 4, ("payments", 0): 0}, state="Stable", group_type="share")
    sim.group("plain", {("orders", 0): 4}, state="Stable", group_type="share")
    groups = lag(sim, "-g", "readers", "-g", "plain")
    assert groups["plain"]["share"] == {"isolation_level": None, "warning": None}
    assert groups["readers"]["share"]["warning"].startswith(
        "share group readers reads transactional topic payments with share.isolation.level unsaid "
        "(default read_uncommitted): its consumers process aborted records")
