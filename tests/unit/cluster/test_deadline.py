"""eosctl.cluster.deadline: retries within one deadline, timeouts that grow per try, the line at the end."""

from __future__ import annotations

import time

import pytest

from eosctl.base.errors import BrokerError
from eosctl.cluster import deadline
from eosctl.cluster.deadline import Deadline, Transient


def test_a_dropped_connection_costs_a_retry_not_the_answer():
    tries: list[int] = []

    def read(attempt: int) -> str:
        tries.append(attempt)
        if attempt == 0:
            raise Transient("KafkaConnectionError: socket disconnected")
        return "answer"

    assert deadline.reads("Fetch to Kafka at h:1", read, deadline=Deadline(5)) == "answer"
    assert tries == [0, 1]


def test_timeouts_are_retried_until_the_deadline_and_the_line_says_how_long_it_waited():
    d = Deadline(0.6)
    with pytest.raises(BrokerError) as e:
        deadline.reads("Fetch to Kafka at h:1", lambda _: (_ for _ in ()).throw(
            Transient("no answer within 200 ms", timed_out=True)), deadline=d)
    line = str(e.value)
    assert line.startswith("Fetch to Kafka at h:1: no answer within the deadline: waited 0.")
    assert "(--timeout 0.6s); last: no answer within 200 ms" in line
    assert d.waited_s() < 1.0


def test_a_connection_that_keeps_dropping_fails_after_reconnect_for_s(monkeypatch):
    monkeypatch.setattr(deadline, "RECONNECT_FOR_S", 0.3)
    began = time.monotonic()
    lost = r"failed: KafkaConnectionError: refused \(connection lost for 0\.\d s"
    with pytest.raises(BrokerError, match=lost):
        deadline.reads("Metadata to Kafka at h:1", lambda _: (_ for _ in ()).throw(
            Transient("KafkaConnectionError: refused")), deadline=Deadline(30))
    assert time.monotonic() - began < 2


def test_each_try_waits_twice_the_last_within_what_is_left():
    d = Deadline(10)
    tries = [deadline.request_timeout_ms(3000, n, d) for n in range(3)]
    assert tries == [3000, 6000, pytest.approx(10_000, abs=50)]
    assert deadline.request_timeout_ms(3000, 0, Deadline(0)) == deadline.MIN_TRY_MS


def test_a_command_deadline_reaches_threads_and_ends_with_the_command():
    import threading

    deadline.start(7)
    seen: list[float] = []
    t = threading.Thread(target=lambda: seen.append(deadline.current().remaining_s()))
    t.start()
    t.join()
    assert 6 < seen[0] <= 7
    deadline.finish()
    assert deadline.configured_s() == deadline.DEFAULT_TIMEOUT_S
    assert deadline.current().seconds == deadline.DEFAULT_TIMEOUT_S


def test_a_bootstrap_may_take_what_is_left_of_the_deadline_and_its_line_names_the_deadline():
    # No fixed cap below the deadline (it was 10 s whatever --timeout said).
    assert deadline.connect_timeout_ms(Deadline(120)) == pytest.approx(120_000, abs=50)
    assert deadline.connect_timeout_ms(Deadline(0)) == deadline.MIN_TRY_MS
    d = Deadline(30, started=time.monotonic() - 30.2)
    assert deadline.ended_by(d) and not deadline.ended_by(Deadline(30))
    line = deadline.at_deadline("cannot connect to Kafka at h:1", "the Kafka handshake", d)
    assert line.startswith("cannot connect to Kafka at h:1: no answer within the deadline: waited 30.2 s "
                           "(--timeout 30s), waiting for the Kafka handshake; "), line
    assert "that the broker is up" not in line


def test_a_clusters_configured_timeout_lengthens_the_default_never_a_given_one():
    deadline.start(30)
    try:
        deadline.defaulted(True)
        deadline.prefer(10)  # shorter than the default: not taken
        assert deadline.current().seconds == 30
        deadline.prefer(120)
        assert deadline.current().seconds == 120 and deadline.configured_s() == 120
        deadline.start(5)
        deadline.defaulted(False)  # --timeout 5s on the command line
        deadline.prefer(120)
        assert deadline.current().seconds == 5
    finally:
        deadline.finish()


def test_timeout_on_the_command_line_wins_over_the_clusters(tmp_path):
    """A listener that accepts TCP and never answers: `--timeout 1s` ends the command, not the config's 2m."""
    import socket
    import subprocess
    import sys

    server = socket.create_server(("127.0.0.1", 0))
    config = tmp_path / "c.toml"
    config.write_text(f'[clusters.c]\nbootstrap_servers = "127.0.0.1:{server.getsockname()[1]}"\n'
                      'timeout = "2m"\n[pipelines.p]\ncluster = "c"\nsource_topics = ["t"]\ngroup = "g"\n')
    try:
        done = subprocess.run([sys.executable, "-m", "eosctl", "lag", "-c", str(config), "-p", "p",
                               "--timeout", "1s"], capture_output=True, text=True, timeout=60,
                              stdin=subprocess.DEVNULL)
    finally:
        server.close()
    assert done.returncode == 2, done.stderr
    assert "no answer within the deadline" in done.stderr and "(--timeout 1s)" in done.stderr, done.stderr
