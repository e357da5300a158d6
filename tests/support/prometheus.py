"""Helpers of the Prometheus tests: Debian's prometheus tools, a free port, a client of the HTTP API."""

from __future__ import annotations

import json
import os
import queue
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.support.helpers import wait_until

REPO = Path(__file__).resolve().parents[2]
T = TypeVar("T")
RULES = REPO / "sample_configs" / "eosctl.rules.yml"
JOB = "eosctl"


def tool(name: str) -> str:
    """/usr/bin/NAME of Debian's prometheus package; skip (with the fix) only where `make test` couldn't
    have installed it."""
    path = shutil.which(name) or (f"/usr/bin/{name}" if os.access(f"/usr/bin/{name}", os.X_OK) else None)
    if path:
        return path
    if os.geteuid() == 0:
        pytest.fail(f"{name} is missing: run `make system-deps` (apt-get install -y prometheus); `make test` "
                    "does this itself")
    pytest.skip(f"{name} is not installed and we are not root to install it: `sudo apt-get install -y "
                "prometheus`")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Prometheus:
    def __init__(self, url: str, targets: Path) -> None:
        self.url, self.targets = url, targets

    def scrape(self, *addresses: str) -> None:
        """Scrape these exporters (job "eosctl") from now on; written atomically, Prometheus watches it."""
        tmp = self.targets.with_suffix(".tmp")
        tmp.write_text(json.dumps([{"targets": list(addresses), "labels": {}}]))
        tmp.replace(self.targets)

    def query(self, expr: str) -> list[dict[str, Any]]:
        """An instant query's result: [{"metric": {...}, "value": [time, "text"]}, ...]."""
        url = f"{self.url}/api/v1/query?{urllib.parse.urlencode({'query': expr})}"
        with urllib.request.urlopen(url, timeout=10) as r:
            doc = json.load(r)
        assert doc["status"] == "success", doc
        return doc["data"]["result"]

    def wait_for(self, expr: str, ok: Callable[[list[dict[str, Any]]], bool], what: str,
                 timeout: float = 60.0) -> list[dict[str, Any]]:
        return poll(lambda: self.query(expr), ok, f"{what} ({expr})", timeout)


def poll(read: Callable[[], T], ok: Callable[[T], bool], what: str, timeout: float = 60.0) -> T:
    """``read()`` every 0.3 s until ``ok`` says yes; the test fails naming ``what`` and the last answer after
    ``timeout`` seconds (tests.support.helpers.wait_until)."""
    last: list[T] = []

    def ready() -> tuple[T] | None:
        last[:] = [read()]
        return (last[0],) if ok(last[0]) else None  # a tuple: a falsy answer that is ok still ends the wait

    return wait_until(what, ready, timeout, interval=0.3,
                      detail=lambda: f"last: {last[0] if last else None}")[0]


def get_status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return r.status
    except OSError:
        return 0


class Exporter:
    """`eosctl exporter` in a subprocess; its address is read from the line it prints at start."""

    def __init__(self, *args: str, env: dict[str, str] | None = None) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "eosctl", "exporter", *args],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
                                     env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})})
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.put(line)

    def wait_for(self, pattern: str, timeout: float = 60.0) -> re.Match[str]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, f"the exporter quit (exit {self.proc.returncode}): {self.seen}"
            try:
                line = self.lines.get(timeout=0.5)
            except queue.Empty:
                continue
            self.seen.append(line)
            m = re.search(pattern, line)
            if m:
                return m
        raise AssertionError(f"no line matching {pattern!r} within {timeout:.0f}s: {self.seen}")

    def metrics(self, address: str) -> dict[str, list[tuple[dict[str, str], float]]]:
        """One scrape of /metrics: {sample name: [(labels, value), ...]}."""
        with urllib.request.urlopen(f"http://{address}/metrics", timeout=10) as r:
            text = r.read().decode()
        out: dict[str, list[tuple[dict[str, str], float]]] = {}
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                out.setdefault(s.name, []).append((s.labels, s.value))
        return out

    def stop(self, signum: int = signal.SIGTERM) -> int:
        """Send ``signum`` and wait for the exit status."""
        self.proc.send_signal(signum)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
        return self.proc.returncode

    def rest_of_stderr(self) -> list[str]:
        """After stop(): the lines not read by wait_for."""
        self.reader.join(timeout=10)
        rest = []
        while not self.lines.empty():
            rest.append(self.lines.get())
        return rest
