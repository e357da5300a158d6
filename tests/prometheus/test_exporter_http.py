"""The exporter's HTTP server is bounded and quiet (issue 34, items 8 and 13, and the smaller HTTP items):
a request that never completes is dropped after the request timeout, connections beyond the limit don't
each take a thread, a client that goes away is no traceback, HEAD answers, the asked OpenMetrics version is
never echoed, and `gzip;q=0` gets no gzip.

One exporter (a subprocess) against the session's broker; every wait has its own deadline; no request loop
leaves the loopback address.
"""

from __future__ import annotations

import http.client
import os
import socket
import struct
import time
from collections.abc import Iterator

import pytest

from eosctl.exporter.http import MAX_CONNECTIONS, REQUEST_TIMEOUT_S
from tests.support.broker import committed_group
from tests.support.prometheus import Exporter, poll

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def served(bootstrap: str) -> Iterator[tuple[Exporter, str, int]]:
    topic, group = committed_group(bootstrap)
    exporter = Exporter("--bootstrap", bootstrap, "-t", topic, "-g", group, "--listen", "127.0.0.1:0",
                        "--interval", "5", "--audit-every", "0")
    try:
        address = exporter.wait_for(r"serving http://(127\.0\.0\.1:\d+)/metrics")[1]
        host, port = address.rsplit(":", 1)
        yield exporter, host, int(port)
    finally:
        exporter.stop()


def request(host: str, port: int, method: str = "GET", headers: dict[str, str] | None = None):
    conn = http.client.HTTPConnection(host, port, timeout=20)
    try:
        conn.request(method, "/metrics", headers=headers or {})
        r = conn.getresponse()
        return r.status, dict(r.getheaders()), r.read()
    finally:
        conn.close()


def threads(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/task"))


def test_head_answers_with_the_headers_of_a_get(served):
    _, host, port = served
    status, headers, body = request(host, port, "HEAD")
    assert (status, body) == (200, b"")
    assert headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
    assert int(headers["Content-Length"]) > 0


def test_an_unknown_openmetrics_version_is_never_echoed(served):
    _, host, port = served
    _, headers, body = request(host, port, headers={"Accept": "application/openmetrics-text; version=9.9.9"})
    assert headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
    assert b"eosctl_up" in body
    _, headers, _ = request(host, port, headers={"Accept": "application/openmetrics-text; version=1.0.0"})
    assert headers["Content-Type"].startswith("application/openmetrics-text; version=1.0.0")


@pytest.mark.parametrize("accept", ["gzip;q=0", "identity", "*;q=0", "gzip; q=0.000"])
def test_gzip_refused_by_the_client_is_not_sent(served, accept):
    _, host, port = served
    _, headers, body = request(host, port, headers={"Accept-Encoding": accept})
    assert "Content-Encoding" not in headers
    assert b"eosctl_up" in body
    _, headers, _ = request(host, port, headers={"Accept-Encoding": "gzip;q=0.5"})
    assert headers["Content-Encoding"] == "gzip"


def test_a_client_that_goes_away_is_no_traceback(served):
    exporter, host, port = served
    for _ in range(20):
        with socket.create_connection((host, port), timeout=10) as s:
            s.sendall(b"GET /metr")  # half a request line, then a reset (SO_LINGER 0): ECONNRESET
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    for _ in range(20):  # a full request, then gone before the answer is read
        with socket.create_connection((host, port), timeout=10) as s:
            s.sendall(b"GET /metrics HTTP/1.0\r\n\r\n")
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    assert request(host, port)[0] == 200
    time.sleep(0.5)
    lines = []
    while not exporter.lines.empty():
        lines.append(exporter.lines.get())
    assert not [ln for ln in lines if "Traceback" in ln or "Error" in ln], lines


def test_idle_connections_are_dropped_and_bounded(served):
    exporter, host, port = served
    idle = [socket.create_connection((host, port), timeout=10) for _ in range(MAX_CONNECTIONS * 3)]
    try:
        # Connections beyond the limit take no thread (before: one each, for ever).
        time.sleep(1.0)
        assert threads(exporter.proc.pid) <= MAX_CONNECTIONS + 16
        # An idle connection is closed by the exporter after the request timeout (before: held for ever).
        first = idle[0]
        first.settimeout(REQUEST_TIMEOUT_S + 20)
        started = time.monotonic()
        assert first.recv(1024) == b""
        assert time.monotonic() - started < REQUEST_TIMEOUT_S + 20
    finally:
        for s in idle:
            s.close()
    # And the exporter answers again as soon as they are gone.
    assert poll(lambda: request(host, port)[0], lambda status: status == 200, "an answer to /metrics",
                timeout=REQUEST_TIMEOUT_S + 20) == 200
