"""Toxiproxy between eosctl and a broker, for the network fault tests.

Why Toxiproxy: it is the standard TCP fault proxy (Shopify's; used by the Kafka client projects' own
tests, e.g. librdkafka's and franz-go's), one static Go binary the suite builds with `go install` (the
Makefile's `toxiproxy` target), and it injects exactly the faults issue 40 names per connection and
direction, changed at run time over its HTTP API: latency, a bandwidth limit, a black hole (the `timeout`
toxic: data is swallowed, the connection stays open), resets (`reset_peer`) and a proxy switched off
(connections refused). tc/netem needs root and a network namespace; a Python proxy would be ours to
trust.

The broker advertises the proxy's address on a listener of its own (``eosctl.sandbox.apache_kafka.start``'s
``advertised``), so every connection a client makes after bootstrapping (to "node 1") goes through the
proxy too; the broker's own traffic (inter-broker, controller) never does.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from eosctl.base import procs
from eosctl.sandbox.net import free_port

VERSION = "v2.12.0"  # the Makefile's TOXIPROXY_VERSION
BINARY = Path(os.environ.get("EOSCTL_TOXIPROXY",
                             Path.home() / ".cache" / "eosctl" / "bin" / f"toxiproxy-server-{VERSION}"))


class Toxiproxy:
    """One toxiproxy-server on a free port (its API) and its proxies; stop() on every exit path (it also
    dies with the test process: PR_SET_PDEATHSIG)."""

    def __init__(self, log: Path) -> None:
        if not BINARY.exists():
            raise RuntimeError(f"{BINARY} is missing: run `make toxiproxy` (go install of Shopify's "
                               f"toxiproxy {VERSION})")
        self.port = free_port()
        self.api = f"http://127.0.0.1:{self.port}"
        with open(log, "ab") as out:
            self.proc = subprocess.Popen([str(BINARY), "-host", "127.0.0.1", "-port", str(self.port)],
                                         stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         preexec_fn=procs.die_with_parent)
        deadline = time.monotonic() + 20
        while True:
            try:
                self._call("GET", "/version")
                return
            except (urllib.error.URLError, ConnectionError):
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"toxiproxy-server did not start; see {log}") from None
                time.sleep(0.1)

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.api + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as r:
            text = r.read()
        return json.loads(text) if text else None

    def proxy(self, name: str, listen_port: int, upstream: str) -> None:
        self._call("POST", "/proxies", {"name": name, "listen": f"127.0.0.1:{listen_port}",
                                         "upstream": upstream, "enabled": True})

    def toxic(self, proxy: str, kind: str, stream: str = "downstream", **attributes: int) -> str:
        """Add a toxic (``kind``: latency, bandwidth, timeout, reset_peer, ...); its name."""
        name = f"{kind}_{stream}"
        self._call("POST", f"/proxies/{proxy}/toxics", {"name": name, "type": kind, "stream": stream,
                                                         "toxicity": 1.0, "attributes": attributes})
        return name

    def remove(self, proxy: str, toxic: str) -> None:
        self._call("DELETE", f"/proxies/{proxy}/toxics/{toxic}")

    def enabled(self, proxy: str, on: bool) -> None:
        """Off: every connection through it is closed and new ones are refused."""
        self._call("POST", f"/proxies/{proxy}", {"enabled": on})

    def reset(self) -> None:
        """Every proxy on, every toxic gone (between tests)."""
        self._call("POST", "/reset")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
