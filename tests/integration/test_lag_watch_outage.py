"""`eosctl lag --watch` through a broker outage (issue 10, item 4): it keeps running, shows ERR with the
reason while the broker is down, and returns to OK when it is back on the same port.

The outage needs a broker of its own: a PRIVATE sandbox with its own state directory, never the session's.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.broker import committed_group

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]


class Watcher:
    """`eosctl lag --watch 1` in a subprocess; its stdout lines arrive on a queue (a reader thread)."""

    def __init__(self, *args: str):
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "eosctl", "lag", "--watch", "1", *args],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "400"})
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)

    def wait_for(self, matches: Callable[[str], bool], what: str, timeout: float = 60.0) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, f"the watch quit (exit {self.proc.returncode}) before {what}: " \
                                             f"{self.proc.stderr.read() if self.proc.stderr else ''}"
            try:
                line = self.lines.get(timeout=0.5)
            except queue.Empty:
                continue
            self.seen.append(line)
            if matches(line):
                return line
        raise AssertionError(f"no {what} within {timeout:.0f}s; last lines: {self.seen[-5:]}")

    def stop(self) -> tuple[int, str]:
        self.proc.terminate()
        try:
            _, err = self.proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _, err = self.proc.communicate()
        return self.proc.returncode, err


def _doc(line: str) -> dict:
    return json.loads(line)


def _status(line: str) -> tuple[str | None, str | None]:
    doc = _doc(line)
    if not doc["groups"]:
        return None, doc.get("error")
    return doc["groups"][0]["status"], doc.get("error")


@pytest.mark.timeout(300)
def test_lag_watch_shows_the_outage_and_recovers(private_broker):
    from eosctl.sandbox import noida

    home, state = private_broker
    topic, group = committed_group(state.bootstrap)
    target = ["--bootstrap", state.bootstrap, "-t", topic, "-g", group]
    as_json = Watcher(*target, "--format", "json")
    as_table = Watcher(*target)
    try:
        first = as_json.wait_for(lambda line: _status(line)[0] == "OK", "an OK poll")
        (partition,) = _doc(first)["groups"][0]["partitions"]
        assert (partition["committed"], partition["lso"], partition["error"]) == (5, 5, None)
        as_table.wait_for(lambda line: f"{group} (empty): OK" in line, "an OK table")

        noida.down(home)  # the broker process is gone; the port refuses connections
        line = as_json.wait_for(lambda line: _status(line)[0] == "ERR", "an ERR poll during the outage")
        doc = _doc(line)
        reason = doc["error"]
        refused = (f"cannot reach Kafka at {state.bootstrap}: connection refused; check --bootstrap / that "
                   "the broker is up")
        assert reason.startswith(f"request to Kafka at {state.bootstrap} failed") or reason == refused, reason
        (g,) = doc["groups"]
        assert (g["status"], g["cause"]) == ("ERR", reason)
        (p,) = g["partitions"]
        assert (p["status"], p["cause"], p["error"], p["committed"]) == ("ERR", reason, reason, 5)
        # It keeps polling through the outage: the next failure is "connection refused".
        as_json.wait_for(lambda line: "connection refused" in (_status(line)[1] or ""), "a refused poll")
        as_table.wait_for(lambda line: f"{group} (empty): ERR: " in line, "an ERR table")

        noida.up(home, port=state.port)  # back on the same port, same data
        line = as_json.wait_for(lambda line: _status(line) == ("OK", None), "an OK poll after the outage")
        (p,) = _doc(line)["groups"][0]["partitions"]
        assert (p["committed"], p["lso"], p["error"], p["status"]) == (5, 5, None, "OK")
        as_table.wait_for(lambda line: f"{group} (empty): OK" in line, "an OK table after the outage")
    finally:
        results = [as_json.stop(), as_table.stop()]
    for code, err in results:
        assert "Traceback" not in err and "Assertion" not in err, err
        # ended by our SIGTERM (exit 143 with one line), not by the outage
        assert (code, err.splitlines()[-1]) == (143, "eosctl: terminated"), (code, err)
