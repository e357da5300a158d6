"""Thirty hard restarts of a stateful Apache Kafka under eosctl's long-running commands (issue 35).

The harness of tests/integration/test_broker_restarts.py (tests/support/restarts.py) with more restarts: a
broker
of its own holding a 1,500-partition topic beside the watched one, 200 transactional ids and 300 groups,
SIGKILLed and started again on its data N times while `lag --watch`, the exporter and the TUI (tmux) run
and one-shot `lag --format json` runs in a loop. Prints the counts after each restart and at the end:
restarts, polls, stale polls, exporter scrapes, one-shot exits by code, watchers that died. Exit 1 on a
crash (a watcher died, a one-shot exited other than 0 or 2, or 2 with more than one line).

    PYTHONPATH=. .venv/bin/python benchmarks/broker_restart_bench.py --restarts 30
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from benchbroker import broker  # noqa: E402  benchmarks/ is on the path: run as python benchmarks/NAME.py

from tests.support.restarts import PROPERTIES, Watchers, build_state, hard_restarts  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--restarts", type=int, default=30)
    ap.add_argument("--interval", type=float, default=1.0, help="watch / exporter / TUI refresh, seconds")
    args = ap.parse_args()
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="eosctl-restarts-") as tmp, \
            broker("kafka", properties=PROPERTIES) as kafka:
        watchers = None
        try:
            build_state(kafka.bootstrap)
            watchers = Watchers(kafka.bootstrap, Path(tmp), interval=args.interval)
            watchers.fresh_since(time.time() - 1, timeout=90)
            hard_restarts(kafka.cluster, watchers, args.restarts, log=lambda s: print(s, flush=True))
        finally:
            counts = watchers.close() if watchers is not None else None
    print(f"{kafka.name}, {time.monotonic() - started:.0f}s: {counts.line()}")
    for reason, n in counts.reasons.most_common():
        print(f"  {n} x {reason}")
    crashed = counts.died or set(counts.exits) - {0, 2} or counts.multi_line
    if counts.multi_line:
        print("one-shot failures that were not one line:", *counts.multi_line[:3], sep="\n")
    return 1 if crashed else 0


if __name__ == "__main__":
    raise SystemExit(main())
