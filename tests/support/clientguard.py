"""A test leaves no Kafka client of this process running.

kafka-python 3 runs each client's network loop in a thread of its own (``kafka-io-<client id>``) until the
client is closed. One a test leaves open keeps reconnecting to a broker that is gone for the rest of the
worker's life: its errors fill later tests' logs and its loop competes with them (ci9: a scripted broker in
the same process answered a later test's FindCoordinator only after 19 s). Clients of module and session
fixtures are set up before a test starts and are not its own.
"""

from __future__ import annotations

import threading
import time

PREFIX = "kafka-io-"
HINT = ("the test left {n} Kafka client(s) running ({names}): close what it opened (a LiveSource or "
        "LiveModel with .close(), Admins and WireClient as context managers, KafkaAdminClient.close())")


def running() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name.startswith(PREFIX) and t.is_alive()}


def left_since(before: set[threading.Thread], grace_s: float = 2.0) -> list[str]:
    """Client threads started since ``before`` still running after ``grace_s`` (a close from another
    thread may still be joining)."""
    deadline = time.monotonic() + grace_s
    while (left := running() - before) and time.monotonic() < deadline:
        time.sleep(0.05)
    return sorted(t.name for t in left)
