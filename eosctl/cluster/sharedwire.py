"""One raw wire client per cluster for the phases of one command in this process.

An audit asks Kafka three times in the driver (the survey's metadata and offsets, the group's committed
offsets, the scan of a small audit's partitions run in the driver): each with a WireClient of its own was a
bootstrap each (a connection, ApiVersions, Metadata) and a connection to the leader each, most of a
demo-size audit's Kafka time (issue 49, docs/benchmarks.md). Inside ``sharing()`` the phases get one
client, opened at the first and closed when the block ends, however it ends. Outside it, or in another
thread or process (a forked pool worker inherits the block's state but not the right to its sockets), each
``client()`` is a WireClient of its own, as before. A phase that raises closes the shared client: the next
one starts from a new bootstrap, never from a connection left in the middle of a request.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from eosctl.config.model import Cluster

if TYPE_CHECKING:
    from eosctl.cluster.wire import WireClient

DEFAULT_TIMEOUT_MS = 10_000  # WireClient's own default


class _Scope:
    def __init__(self) -> None:
        self.pid = os.getpid()
        self.thread = threading.get_ident()
        self.clients: dict[tuple[Cluster, int], WireClient] = {}

    def mine(self) -> bool:
        return self.pid == os.getpid() and self.thread == threading.get_ident()


_scopes: list[_Scope] = []


@contextmanager
def sharing() -> Iterator[None]:
    """Inside, ``client(cluster)`` from this thread hands out one open client per cluster and timeout;
    they are closed when the block exits. Nested blocks share the outer one's clients."""
    if _scopes and _scopes[-1].mine():
        yield
        return
    scope = _Scope()
    _scopes.append(scope)
    try:
        yield
    finally:
        _scopes.remove(scope)
        _close_all(scope)


@contextmanager
def client(cluster: Cluster, timeout_ms: int = DEFAULT_TIMEOUT_MS) -> Iterator[WireClient]:
    """A wire client to ``cluster`` for the block: the shared one inside ``sharing()`` (left open), else a
    new one closed at the block's end."""
    from eosctl.cluster.wire import WireClient  # lazy: see docs/imports.md

    scope = _scopes[-1] if _scopes and _scopes[-1].mine() else None
    if scope is None:
        with WireClient(cluster, timeout_ms=timeout_ms) as own:
            yield own
        return
    key = (cluster, timeout_ms)
    shared = scope.clients.get(key)
    if shared is None:
        shared = scope.clients[key] = WireClient(cluster, timeout_ms=timeout_ms)
    try:
        yield shared
    except BaseException:
        scope.clients.pop(key, None)
        shared.close()
        raise


def release() -> None:
    """Close this thread's shared clients now; later phases open a new one. Before forking workers: a
    child must not inherit the sockets of a connection the parent goes on using."""
    if _scopes and _scopes[-1].mine():
        _close_all(_scopes[-1])


def _close_all(scope: _Scope) -> None:
    """Close every client of the scope, each even when closing another raised (the first error raised)."""
    clients, scope.clients = list(scope.clients.values()), {}
    error: BaseException | None = None
    for c in clients:
        try:
            c.close()
        except BaseException as e:  # noqa: BLE001  the others are closed before it is raised
            error = error or e
    if error is not None:
        raise error
