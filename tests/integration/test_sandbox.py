from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

import pytest

from eosctl.base import procs
from eosctl.config import sandboxstate
from eosctl.sandbox import noida
from tests.support.helpers import eosctl_process

pytestmark = pytest.mark.integration


def eosctl(home, *args: str) -> subprocess.CompletedProcess:
    return eosctl_process(*args, env={"EOSCTL_HOME": str(home)}, timeout=60)


def test_up_status_down_and_up_twice(tmp_path):
    up = eosctl(tmp_path, "sandbox", "up")
    assert up.returncode == 0, up.stderr
    state = json.loads((tmp_path / "sandbox.json").read_text())
    assert up.stdout.startswith(f"sandbox started: bootstrap 127.0.0.1:{state['port']}")
    try:
        again = eosctl(tmp_path, "sandbox", "up")
        assert again.returncode == 0
        assert again.stdout.startswith(f"sandbox already running: bootstrap 127.0.0.1:{state['port']}")
        status = eosctl(tmp_path, "sandbox", "status")
        assert status.returncode == 0 and f"pid {state['pid']}" in status.stdout
        noida.wait_for_metadata(f"127.0.0.1:{state['port']}", timeout=5)
    finally:
        down = eosctl(tmp_path, "sandbox", "down")
    assert down.stdout.strip() == f"sandbox stopped (pid {state['pid']})"
    assert not procs.alive(state["pid"])
    assert not noida.port_open(state["port"])
    status = eosctl(tmp_path, "sandbox", "status")
    assert status.returncode == 1 and "not running" in status.stdout
    assert eosctl(tmp_path, "sandbox", "down").stdout.strip() == "sandbox was not running"


def test_stale_pid_file_is_replaced(tmp_path):
    # A pid that surely isn't our broker: a finished child process.
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait(timeout=30)
    (tmp_path / "sandbox.json").write_text(json.dumps({
        "pid": dead.pid, "port": 1, "data_dir": str(tmp_path / "gone"), "log_file": "x", "started_at": 0}))
    assert sandboxstate.status(tmp_path) is None
    assert not (tmp_path / "sandbox.json").exists()
    # The recorded pid is alive but is some other program (pid reuse): never signal it.
    (tmp_path / "sandbox.json").write_text(json.dumps({
        "pid": os.getpid(), "port": 1, "data_dir": str(tmp_path / "gone"), "log_file": "x", "started_at": 0}))
    state, started = noida.up(tmp_path)
    try:
        assert started and state.pid != os.getpid()
    finally:
        noida.down(tmp_path)


def test_port_in_use_is_one_clear_line(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        result = eosctl(tmp_path, "sandbox", "up", "--port", str(port))
    assert result.returncode == 2
    assert result.stderr.strip() == (
        f"eosctl: error: port {port} is already in use; choose another with --port or omit it for a free one"
    )
    assert not (tmp_path / "sandbox.json").exists()


def test_up_after_down_keeps_the_port(tmp_path):
    """Issue 34, item 10: a config, TUI, exporter or `lag --watch` on bootstrap_servers = "sandbox" keeps
    finding the broker after `down` and `up` (before, `up` took a new free port each time)."""
    first = eosctl(tmp_path, "sandbox", "up")
    assert first.returncode == 0, first.stderr
    port = json.loads((tmp_path / "sandbox.json").read_text())["port"]
    try:
        assert eosctl(tmp_path, "sandbox", "down").returncode == 0
        again = eosctl(tmp_path, "sandbox", "up")
        assert again.returncode == 0, again.stderr
        assert again.stdout.startswith(f"sandbox started: bootstrap 127.0.0.1:{port} ")
    finally:
        eosctl(tmp_path, "sandbox", "down")
    assert not noida.port_open(port)


def test_racing_ups_start_one_broker_and_all_succeed(tmp_path):
    """Issue 34, item 16: before, the losers exited 2 with the broker's own "already running"."""
    env = dict(os.environ, EOSCTL_HOME=str(tmp_path))
    racers = [subprocess.Popen([sys.executable, "-m", "eosctl", "sandbox", "up"], env=env, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(3)]
    try:
        results = [(p.wait(timeout=90), *p.communicate(timeout=10)) for p in racers]
    finally:
        for p in racers:
            if p.poll() is None:
                p.kill()
        state = sandboxstate.read_state(tmp_path)
        eosctl(tmp_path, "sandbox", "down")
    assert [code for code, _, _ in results] == [0, 0, 0], results
    verbs = sorted(out.split(":")[0] for _, out, _ in results)
    assert verbs == ["sandbox already running", "sandbox already running", "sandbox started"], results
    assert state is not None and all(f"pid {state.pid}" in out for _, out, _ in results)
    assert not procs.alive(state.pid)


def test_lag_watch_follows_the_sandbox_to_its_new_port(tmp_path):
    """Issue 34, item 10: `up` after `down` while the old port is taken listens elsewhere; a watcher on
    bootstrap_servers = "sandbox" follows it there (before, it retried the old port for ever)."""
    import json as jsonlib
    import queue
    import threading

    from confluent_kafka import Consumer, Producer, TopicPartition

    assert eosctl(tmp_path, "sandbox", "up").returncode == 0
    port = json.loads((tmp_path / "sandbox.json").read_text())["port"]
    watch = None
    taken = socket.socket()
    try:
        bootstrap = f"127.0.0.1:{port}"
        producer = Producer({"bootstrap.servers": bootstrap})
        producer.produce("t", value=b"v")
        assert producer.flush(30) == 0
        del producer  # its background thread would retry the old port once the broker is down
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "g", "enable.auto.commit": False})
        consumer.commit(offsets=[TopicPartition("t", 0, 1)], asynchronous=False)
        consumer.close()
        config = tmp_path / "c.toml"
        config.write_text('[clusters.c]\nbootstrap_servers = "sandbox"\n'
                          '[pipelines.p]\nsource_topics = ["t"]\ngroup = "g"\n')
        env = dict(os.environ, EOSCTL_HOME=str(tmp_path))
        watch = subprocess.Popen([sys.executable, "-m", "eosctl", "lag", "-c", str(config), "-p", "p",
                                  "--watch", "0.5", "--count", "200", "--format", "json"], env=env, text=True,
                                 stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        polls: queue.Queue[dict] = queue.Queue()
        threading.Thread(target=lambda: [polls.put(jsonlib.loads(ln)) for ln in watch.stdout],
                         daemon=True).start()
        assert polls.get(timeout=60)["error"] is None
        assert eosctl(tmp_path, "sandbox", "down").returncode == 0
        taken.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        taken.bind(("127.0.0.1", port))  # the old port is someone else's now
        taken.listen()
        up = eosctl(tmp_path, "sandbox", "up")
        assert up.returncode == 0, up.stderr
        assert f"127.0.0.1:{port} " not in up.stdout
        deadline = time.monotonic() + 60
        errors = 0
        while True:
            poll = polls.get(timeout=max(0.1, deadline - time.monotonic()))
            errors += poll["error"] is not None
            if poll["error"] is None and errors:
                break
            assert time.monotonic() < deadline, poll
        assert [p["committed"] for g in poll["groups"] for p in g["partitions"]] == [1]
    finally:
        if watch is not None:
            watch.kill()
            watch.wait(10)
        taken.close()
        eosctl(tmp_path, "sandbox", "down")
