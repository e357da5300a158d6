"""Issue 35: a broker whose group coordinator is loading, moving or away never kills eosctl.

Committed offsets and group states come from raw FindCoordinator / OffsetFetch / ListGroups requests
(eosctl.cluster.offsets), not librdkafka's admin client (which dies with SIGSEGV on NOT_COORDINATOR). Each
answer
a restarting Apache Kafka gives is scripted here: the read retries within its deadline and then fails with
one line naming the coordinator and what it is doing; `eosctl lag` exits 2 with that line; `lag --watch`
shows the last values marked stale and recovers by itself.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from eosctl.base.errors import BrokerError
from eosctl.cluster import deadline
from eosctl.cluster.offsets import committed_positions, group_offsets, group_states
from eosctl.cluster.wire import WireClient
from eosctl.config.model import Cluster
from tests.kafkasim import (
    COORDINATOR_LOAD_IN_PROGRESS,
    COORDINATOR_NOT_AVAILABLE,
    NOT_COORDINATOR,
    KafkaSim,
)
from tests.support.helpers import eosctl

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def sim(kafka_sim: KafkaSim) -> KafkaSim:
    p = kafka_sim.partition("orders", 0)
    p.data(10)
    kafka_sim.group("billing", {("orders", 0): 4}, state="Stable")
    kafka_sim.group("shipping", {("orders", 0): 7}, state="Empty")
    return kafka_sim


def asked(sim: KafkaSim, api: str) -> int:
    return sum(1 for _, name, _ in sim.requests if name == api)


def test_not_coordinator_looks_the_coordinator_up_again_and_reads_the_offsets(sim: KafkaSim) -> None:
    sim.inject("offset_fetch", error=NOT_COORDINATOR, times=2)
    with WireClient(sim.bootstrap, timeout_ms=2000) as client:
        assert group_offsets(client, ["billing"]) == {"billing": {("orders", 0): 4}}
    # Asked three times, and its coordinator looked up before each (it moved: NOT_COORDINATOR).
    assert (asked(sim, "OffsetFetch"), asked(sim, "FindCoordinator")) == (3, 3)


def test_load_in_progress_asks_the_same_coordinator_again(sim: KafkaSim) -> None:
    sim.inject("offset_fetch", error=COORDINATOR_LOAD_IN_PROGRESS, times=3)
    with WireClient(sim.bootstrap, timeout_ms=2000) as client:
        assert group_offsets(client, ["billing", "shipping"]) == {
            "billing": {("orders", 0): 4}, "shipping": {("orders", 0): 7}}
    assert asked(sim, "FindCoordinator") == 2  # once per group: a loading coordinator is still the one


def test_a_coordinator_loading_past_the_deadline_is_one_line_naming_it(sim: KafkaSim) -> None:
    sim.inject("offset_fetch", error=COORDINATOR_LOAD_IN_PROGRESS, times=None)
    started = time.monotonic()
    with WireClient(sim.bootstrap, timeout_ms=2000) as client, pytest.raises(BrokerError) as e:
        group_offsets(client, ["billing"], timeout=1.0)
    assert time.monotonic() - started < 10  # its own deadline, not a hang
    assert str(e.value) == (f"cannot read committed offsets of group 'billing' from Kafka at "
                            f"{sim.bootstrap}: the group coordinator at {sim.bootstrap} is loading "
                            "(COORDINATOR_LOAD_IN_PROGRESS); try again in a few seconds")


def test_no_coordinator_yet_is_retried_then_named(sim: KafkaSim) -> None:
    sim.inject("find_coordinator", error=COORDINATOR_NOT_AVAILABLE, times=2)
    with WireClient(sim.bootstrap, timeout_ms=2000) as client:
        assert group_offsets(client, ["billing"]) == {"billing": {("orders", 0): 4}}
    sim.inject("find_coordinator", error=COORDINATOR_NOT_AVAILABLE, times=None)
    with WireClient(sim.bootstrap, timeout_ms=2000) as client, pytest.raises(BrokerError) as e:
        group_offsets(client, ["billing"], timeout=0.5)
    assert str(e.value).endswith(f"Kafka at {sim.bootstrap} has no group coordinator for 'billing' yet "
                                 "(CoordinatorNotAvailableError); try again in a few seconds")


def test_a_coordinator_still_away_at_the_commands_deadline_ends_the_read_there(sim: KafkaSim) -> None:
    """The read's own timeout (committed_positions' 10 s) never outlasts the command's --timeout: the
    rounds after a failed FindCoordinator ran on to their own end, 7.6 s past `audit --timeout 30s`
    through 4.5 s of latency (test_network_faults)."""
    sim.inject("find_coordinator", error=COORDINATOR_NOT_AVAILABLE, times=None)
    d = deadline.start(1.5)
    try:
        with pytest.raises(BrokerError) as e:
            committed_positions(Cluster("sim", sim.bootstrap), "billing", timeout=10.0)
        took = d.waited_s()
    finally:
        deadline.finish()
    assert "has no group coordinator for 'billing' yet" in str(e.value), e.value
    assert took < 2.5, f"{took:.1f} s for a 1.5 s deadline"


def test_a_connection_dropped_mid_answer_is_asked_again(sim: KafkaSim) -> None:
    sim.inject("offset_fetch", hang_up=True, times=1)
    with WireClient(sim.bootstrap, timeout_ms=2000) as client:
        assert group_offsets(client, ["billing"]) == {"billing": {("orders", 0): 4}}
    assert asked(sim, "OffsetFetch") == 2
    sim.inject("list_groups", hang_up=True, times=2)
    with WireClient(sim.bootstrap, timeout_ms=2000) as client:
        assert group_states(client) == {"billing": "STABLE", "shipping": "EMPTY"}


def test_list_groups_while_loading_is_retried(sim: KafkaSim) -> None:
    sim.inject("list_groups", error=COORDINATOR_LOAD_IN_PROGRESS, times=2)
    with WireClient(sim.bootstrap, timeout_ms=2000) as client:
        assert group_states(client) == {"billing": "STABLE", "shipping": "EMPTY"}


def lag(sim: KafkaSim, *args: str):
    return eosctl("lag", "--bootstrap", sim.bootstrap, "--format", "json", *args, columns=None)


@pytest.mark.parametrize(("api", "error", "doing"), [
    ("offset_fetch", COORDINATOR_LOAD_IN_PROGRESS, "is loading (COORDINATOR_LOAD_IN_PROGRESS)"),
    ("offset_fetch", NOT_COORDINATOR, "is not the group's coordinator yet (NOT_COORDINATOR)"),
    ("list_groups", COORDINATOR_LOAD_IN_PROGRESS, "is loading (COORDINATOR_LOAD_IN_PROGRESS)"),
])
def test_lag_exits_2_with_one_line_naming_the_coordinator(sim: KafkaSim, api: str, error: int,
                                                           doing: str) -> None:
    sim.inject(api, error=error, times=None)
    result = lag(sim, "--group", "billing")
    assert result.exit_code == 2
    assert result.stdout == ""
    assert len(result.stderr.splitlines()) == 1
    # ListGroups goes to every broker: the line names whichever is loading (either node of the sim).
    nodes = [f"127.0.0.1:{s.port}" for s in sim._servers]
    assert any(f"the group coordinator at {n} {doing}; try again in a few seconds" in result.stderr
               for n in nodes), result.stderr


def test_lag_on_a_leaderless_partition_exits_2_with_one_line(sim: KafkaSim) -> None:
    sim.move_leader("orders", 0, node=-1)
    result = lag(sim, "--group", "billing")
    assert (result.exit_code, result.stderr) == (2, (
        f"eosctl: error: orders-0 has no leader on {sim.bootstrap} right now (LEADER_NOT_AVAILABLE: its "
        "broker is down or restarting); try again in a few seconds\n"))


def test_lag_reads_through_the_coordinator_answers_it_can_wait_for(sim: KafkaSim) -> None:
    sim.inject("list_groups", error=COORDINATOR_LOAD_IN_PROGRESS, times=1)
    sim.inject("find_coordinator", error=COORDINATOR_NOT_AVAILABLE, times=1)
    sim.inject("offset_fetch", error=NOT_COORDINATOR, times=1)
    sim.inject("offset_fetch", hang_up=True, times=1)
    result = lag(sim, "--group", "billing")
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert [(g["group"], g["state"], [(p["committed"], p["lag_to_lso"]) for p in g["partitions"]])
            for g in doc["groups"]] == [("billing", "STABLE", [(4, 6)])]


def watch_lines(proc: subprocess.Popen, want, deadline_s: float = 30.0) -> dict:
    """Read the watch's JSON lines until one satisfies ``want``; that document."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            raise AssertionError(f"the watch ended (exit {proc.wait(5)}): {proc.stderr.read()}")
        doc = json.loads(line)
        if want(doc):
            return doc
    raise AssertionError("no such poll before the deadline")


@pytest.mark.parametrize("outage", ["coordinator_loading", "leaderless"])
def test_watch_shows_the_last_values_stale_and_recovers(sim: KafkaSim, outage: str) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "eosctl", "lag", "--bootstrap", sim.bootstrap, "--group", "billing",
         "--format", "json", "--watch", "0.3"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        first = watch_lines(proc, lambda d: d["error"] is None)
        assert first["groups"][0]["partitions"][0]["committed"] == 4
        if outage == "leaderless":
            sim.move_leader("orders", 0, node=-1)
        else:
            sim.inject("offset_fetch", error=COORDINATOR_LOAD_IN_PROGRESS, times=None)
        stale = watch_lines(proc, lambda d: d["error"] is not None)
        part = stale["groups"][0]["partitions"][0]
        # The last good values, marked stale: ERR with the reason, and when they were read.
        assert (part["committed"], part["lag_to_lso"], part["status"]) == (4, 6, "ERR")
        assert stale["stale_since"] == first["taken_at"]
        assert ("is loading" if outage != "leaderless" else "has no leader") in stale["error"]
        sim.faults.clear()
        sim.move_leader("orders", 0, node=0)
        sim.group("billing", {("orders", 0): 9}, state="Stable")
        fresh = watch_lines(proc, lambda d: d["error"] is None)
        assert fresh["groups"][0]["partitions"][0]["committed"] == 9
        assert fresh["stale_since"] is None
        assert proc.poll() is None
    finally:
        proc.terminate()
        proc.wait(10)
