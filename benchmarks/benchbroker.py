"""The broker a benchmark runs on when not given --bootstrap: one Apache Kafka KRaft node from the Maven
Central jars (``kind="kafka"``, eosctl.sandbox.apache_kafka) or a throwaway noida-db sandbox
(``kind="noida"``, also spelt "sandbox"). Figures are printed with the broker's name, so docs/benchmarks.md
can say which broker each was measured on. Every benchmark starts its broker here, so that each one is
stopped on every exit path: an exception, Ctrl-C (KeyboardInterrupt) and SIGTERM (turned into SystemExit
while the broker runs); a SIGKILLed benchmark takes its Apache Kafka with it (die_with_parent)."""

from __future__ import annotations

import signal
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HEAP = "768m"  # the JVM heap of a benchmark's Apache Kafka: capped, the machine is shared


@dataclass(frozen=True)
class Broker:
    bootstrap: str
    name: str  # printed beside each figure, e.g. "Apache Kafka 4.4.0 (one KRaft node, 768m heap)"
    cluster: Any = None  # the apache_kafka.KafkaCluster started here (to restart its node), else None


@contextmanager
def broker(kind: str = "kafka", bootstrap: str | None = None, heap: str = HEAP,
           properties: dict[str, str] | None = None) -> Iterator[Broker]:
    """The cluster at ``bootstrap`` if given (nothing started), else a broker of ``kind`` started for the
    ``with`` block in a temporary directory, stopped and removed when the block exits, however it exits.
    ``heap`` and ``properties`` (server.properties overrides) are for Apache Kafka."""
    if bootstrap is not None:
        yield Broker(bootstrap, f"the cluster at {bootstrap}")
        return
    with tempfile.TemporaryDirectory(prefix="eosctl-bench-broker-", ignore_cleanup_errors=True) as tmp, \
            _sigterm_unwinds():
        home = Path(tmp)
        if kind == "kafka":
            from eosctl.sandbox import apache_kafka

            # start() stops what it launched if it fails or is interrupted before returning.
            cluster = apache_kafka.start(home / "kafka", nodes=1, heap=heap, properties=properties,
                                         die_with_parent=True)
            name = f"Apache Kafka {cluster.version} (one KRaft node, {heap} heap)"
            try:
                yield Broker(cluster.bootstrap, name, cluster)
            finally:
                apache_kafka.stop(cluster)
            return
        if kind not in ("noida", "sandbox"):
            raise ValueError(f"unknown broker kind {kind!r}: kafka, noida or sandbox")
        from eosctl.sandbox import noida

        try:
            state, _ = noida.up(home)
            yield Broker(state.bootstrap, "noida-db (the sandbox)")
        finally:  # also when up() is interrupted after launching it: down() stops what the state file names
            noida.down(home)


@contextmanager
def _sigterm_unwinds() -> Iterator[None]:
    """SIGTERM's default kills Python without running ``finally``: while the broker runs it raises
    SystemExit(143) instead, so the broker is stopped. Only the main thread can set a handler."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
