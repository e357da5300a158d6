"""A client made early in a command whose wait begins late still ends at the command's deadline
(eosctl.cluster.deadline.bound): kafka-python's clients keep the timeouts they were made with, so a request
sent 1.5 s into a 3 s deadline on an admin client made at its start waited 3 s more (`lag --timeout 6s`
through a black hole: "waited 10.5 s", a clean-clone run of 2026-12-02)."""

from __future__ import annotations

import time

import pytest

from eosctl.cluster import deadline
from eosctl.cluster.clients import kafka_admin
from eosctl.config.model import Cluster
from eosctl.txn.transactions import describe_producers
from tests.kafkasim import KafkaSim


@pytest.mark.timeout(60)
def test_an_admin_call_begun_late_ends_at_the_commands_deadline(kafka_sim: KafkaSim) -> None:
    kafka_sim.partition("orders", 0, leader=0)
    d = deadline.start(3.0)
    admin = kafka_admin(Cluster("sim", kafka_sim.bootstrap))
    try:
        assert describe_producers(admin, [("orders", 0)])[1] == "ok"
        time.sleep(1.5)  # the command's other phases
        # The broker stops answering (it holds every request for 8 s: a black hole with the connection open).
        kafka_sim.inject("describe_producers", "orders", 0, before=lambda: time.sleep(8))
        _, status = describe_producers(admin, [("orders", 0)])
        took = d.waited_s()
    finally:
        admin.close()
        deadline.finish()
    assert "DescribeProducers: no answer within the deadline: waited " in status, status
    assert "(--timeout 3s)" in status, status
    # The deadline's 3 s and a try's scheduling, not 1.5 s + another 3 s.
    assert took < 3.6, f"{took:.1f} s for a 3 s deadline: {status}"
