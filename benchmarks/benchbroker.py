"""The broker a benchmark runs on when not given --bootstrap: a throwaway noida-db sandbox (the default) or,
with ``--broker kafka``, one Apache Kafka KRaft node from the Maven Central jars. Figures are printed with the
broker's name, so docs/benchmarks.md can say which broker each was measured on."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def broker(kind: str, bootstrap: str | None = None) -> Iterator[tuple[str, str]]:
    """(bootstrap, broker name); stopped on every exit path when started here."""
    if bootstrap is not None:
        yield bootstrap, f"the cluster at {bootstrap}"
        return
    home = Path(tempfile.mkdtemp(prefix="eosctl-bench-"))
    if kind == "kafka":
        from eosctl.sandbox import apache_kafka

        cluster = apache_kafka.start(home, die_with_parent=True)
        try:
            yield cluster.bootstrap, f"Apache Kafka {cluster.version} (one KRaft node)"
        finally:
            apache_kafka.stop(cluster)
        return
    from eosctl.sandbox import noida

    state, _ = noida.up(home)
    try:
        yield state.bootstrap, "noida-db (the sandbox)"
    finally:
        noida.down(home)
