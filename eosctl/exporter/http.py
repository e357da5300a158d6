"""The exporter's HTTP server: /metrics from the latest exposition, bounded in connections and in time."""

from __future__ import annotations

import socket
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

from eosctl.base.errors import EosctlError
from eosctl.base.safetext import term
from eosctl.exporter.loops import say
from eosctl.exporter.metrics import accepts_gzip

if TYPE_CHECKING:
    from eosctl.exporter.metrics import Exposition

# The HTTP server's bounds: connections served at once (each a thread), and how long one socket operation
# of a request may wait (reading the request line and headers, writing the body).
MAX_CONNECTIONS = 64
REQUEST_TIMEOUT_S = 10.0


def hostport(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def bind(host: str, port: int) -> ThreadingHTTPServer:
    """The HTTP server, bound (not serving yet): a port in use is one line before anything else starts."""
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
    except (OSError, UnicodeError) as e:
        raise EosctlError(f"--listen {hostport(host, port)}: cannot resolve {host!r} ({e}); pass an address "
                          "of this machine, e.g. 127.0.0.1 or 0.0.0.0") from None

    class Server(ThreadingHTTPServer):
        address_family = family
        daemon_threads = True
        request_queue_size = MAX_CONNECTIONS  # the listen backlog

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.slots = threading.BoundedSemaphore(MAX_CONNECTIONS)

        def process_request(self, request: Any, client_address: Any) -> None:
            # At most MAX_CONNECTIONS threads: one more connection is closed at once, unanswered (3,000
            # idle ones each held a thread and wedged the exporter). A scrape retries at its next interval.
            if not self.slots.acquire(blocking=False):
                self.shutdown_request(request)
                return
            try:
                super().process_request(request, client_address)
            except BaseException:
                self.slots.release()
                raise

        def process_request_thread(self, request: Any, client_address: Any) -> None:
            try:
                super().process_request_thread(request, client_address)
            finally:
                self.slots.release()

        def handle_error(self, request: Any, client_address: Any) -> None:
            # A client that went away (a scrape timeout, `curl | head`) or never finished its request is
            # not the exporter's error: nothing to say. Anything else: one line, no traceback.
            e = sys.exc_info()[1]
            if isinstance(e, ConnectionError | TimeoutError):
                return
            say(f"eosctl exporter: a request from {term(str(client_address[0]))} failed: "
                f"{term(type(e).__name__)}: {term(str(e))[:200]}")

    try:
        return Server((host, port), Handler)
    except OSError as e:
        why = "address already in use" if e.errno == 98 else (e.strerror or str(e))
        raise EosctlError(f"--listen {hostport(host, port)}: {why}; pick another with --listen HOST:PORT") \
            from None


class Handler(BaseHTTPRequestHandler):
    server_version = "eosctl-exporter"
    # Per socket operation: a client idle or sending its request slowly is dropped after this long instead
    # of holding its thread for ever (Prometheus' default scrape timeout is 10 s).
    timeout = REQUEST_TIMEOUT_S

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        self._answer(body=True)

    def do_HEAD(self) -> None:  # noqa: N802 (http.server's name)
        self._answer(body=False)

    def _answer(self, body: bool) -> None:
        path = self.path.split("?", 1)[0]
        if path == "/metrics":
            exposition: Exposition | None = getattr(self.server, "exposition", None)
            if exposition is None:
                return self._send(503, [b"not ready\n"], "text/plain; charset=utf-8", body=body)
            gzipped = accepts_gzip(self.headers.get("Accept-Encoding"))
            parts, content_type = exposition.parts(self.headers.get("Accept"), gzipped)
            return self._send(200, parts, content_type, "gzip" if gzipped else None, body=body)
        if path == "/":
            return self._send(200, [b"eosctl exporter: metrics at /metrics\n"], "text/plain; charset=utf-8",
                              body=body)
        self._send(404, [b"not found: metrics are at /metrics\n"], "text/plain; charset=utf-8", body=body)

    def _send(self, code: int, parts: list[bytes], content_type: str, encoding: str | None = None,
              body: bool = True) -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        if encoding:
            self.send_header("Content-Encoding", encoding)
        self.send_header("Vary", "Accept, Accept-Encoding")
        self.send_header("Content-Length", str(sum(len(p) for p in parts)))
        self.end_headers()
        if not body:  # HEAD: the headers a GET would get, no body
            return
        for part in parts:  # not joined: no copy of a 10 MB body per scrape
            self.wfile.write(part)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (http.server's signature)
        pass  # one line per scrape would flood the log of a process that runs for weeks
