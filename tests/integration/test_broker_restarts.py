"""Issue 35: hard restarts of a stateful Apache Kafka never kill eosctl.

A broker of the test's own (never the session's) holds a 1,500-partition topic beside the watched one,
200 transactional ids and 300 groups, so its group coordinator takes seconds to load after a restart: the
window in which librdkafka's admin client died with SIGSEGV (eosctl.cluster.offsets). It is SIGKILLed and
started
again three times while `lag --watch`, the exporter and the TUI (in tmux) run and one-shot
`lag --format json` runs in a loop. Every watcher must be alive at the end with fresh values; every
one-shot must exit 0 or 2, and 2 with one line. The counts are printed (`-s` shows them);
benchmarks/broker_restart_bench.py runs thirty restarts.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from eosctl.sandbox import apache_kafka as ak
from tests.support.restarts import PROPERTIES, Watchers, build_state, hard_restarts

# Its own Apache Kafka (a JVM): not a scripted-broker test, so not in `make check` (its guard found it there).
pytestmark = [pytest.mark.integration, pytest.mark.jvm]


@pytest.mark.timeout(420)
def test_three_hard_restarts_leave_every_watcher_alive_and_fresh(tmp_path: Path) -> None:
    cluster = ak.start(tmp_path / "kafka", nodes=1, properties=PROPERTIES, die_with_parent=True)
    watchers = None
    try:
        build_state(cluster.bootstrap)
        watchers = Watchers(cluster.bootstrap, tmp_path)
        watchers.fresh_since(time.time() - 1, timeout=90)
        counts = hard_restarts(cluster, watchers, 3)
        last = time.time()
        time.sleep(3)  # a few polls after the last recovery
    finally:
        counts = watchers.close() if watchers is not None else None
        ak.stop(cluster)
    print(f"\nApache Kafka {cluster.version}: {counts.line()}")
    for reason, n in counts.reasons.most_common():
        print(f"  {n} x {reason}")
    assert counts.died == {}
    assert counts.restarts == 3
    assert set(counts.exits) <= {0, 2}, counts.exits
    assert counts.multi_line == []
    assert counts.exits[0] > 0
    assert watchers.last_watch["error"] is None and watchers.last_watch["taken_ms"] / 1000 >= last
