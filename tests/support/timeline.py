"""Where a run's wall time goes, worker by worker (issue 55: the suite under 20 minutes).

EOSCTL_TEST_TIMELINE=DIR makes each pytest process append one line per test to DIR/<worker>.tsv: its worker,
start and end (epoch seconds, set-up and tear-down included) and node id with its xdist group. `python -m
tests.support.timeline DIR [TOP]` then prints each worker's busy time, when it finished, and its TOP
groups by time spent, longest first: the worker that finished last is the one holding the run up.
"""

from __future__ import annotations

import os
import sys
import time
from collections import defaultdict
from collections.abc import Generator
from pathlib import Path

import pytest

ENV = "EOSCTL_TEST_TIMELINE"


class Recorder:
    """A pytest plugin: one line per test protocol (set-up, call, tear-down) into the worker's file."""

    def __init__(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.path = directory / f"{os.environ.get('PYTEST_XDIST_WORKER', 'main')}.tsv"

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> Generator[None, None, None]:
        start = time.time()
        yield
        with self.path.open("a") as out:
            out.write(f"{self.path.stem}\t{start:.3f}\t{time.time():.3f}\t{item.nodeid}\n")


def install(config: pytest.Config) -> None:
    """Registers the recorder when EOSCTL_TEST_TIMELINE names a directory."""
    where = os.environ.get(ENV)
    if where:
        config.pluginmanager.register(Recorder(Path(where)), "eosctl-timeline")


def summary(directory: Path, top: int = 12) -> str:
    """Each worker's busy time, its end, and its ``top`` groups by time, from DIR's files."""
    rows = []
    for path in sorted(directory.glob("*.tsv")):
        for line in path.read_text().splitlines():
            worker, start, end, nodeid = line.split("\t", 3)
            rows.append((worker, float(start), float(end), nodeid))
    if not rows:
        return f"no timeline under {directory}"
    t0 = min(r[1] for r in rows)
    out = [f"run: {max(r[2] for r in rows) - t0:.0f} s from the first test's start to the last's end"]
    by_worker: dict[str, list[tuple[str, float, float, str]]] = defaultdict(list)
    for r in rows:
        by_worker[r[0]].append(r)
    for worker, items in sorted(by_worker.items()):
        busy = sum(e - s for _, s, e, _ in items)
        last = max(e for _, _, e, _ in items) - t0
        groups: dict[str, float] = defaultdict(float)
        for _, s, e, nodeid in items:
            groups[nodeid.rsplit("@", 1)[-1] if "@" in nodeid else nodeid.split("::")[0]] += e - s
        out.append(f"{worker}: {len(items)} tests, busy {busy:.0f} s, done at {last:.0f} s")
        for name, secs in sorted(groups.items(), key=lambda g: -g[1])[:top]:
            out.append(f"    {secs:7.1f} s  {name}")
    return "\n".join(out)


if __name__ == "__main__":
    print(summary(Path(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 12))
