"""How `make test` splits the suite between xdist workers (three by default; issue 42: the whole suite under
20 minutes on 2 cores; run alone, one pytest process left a core idle about half the time, waiting on brokers
and children).

Each worker is a pytest session of its own, with its own session fixtures. The reference broker (Apache
Kafka, one KRaft node) is the one server each worker starts for itself, because nearly every test needs it.
Every other session server stays one per run: the tests that use one are put in one xdist group, merged with
every group of another server a test needs beside it, so a single worker runs them all and starts it once.
Every other test shares the group of its module (its module fixtures are set up once). Groups are handed
out in an order both workers agree on: those that start a JVM first, largest first, so the long ones do not
start last.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support import nojvm

# Session fixtures one run starts once, whatever the number of workers: a test that asks for one (directly
# or through another fixture) runs on the worker holding the group of that server. PostgreSQL is not one:
# its initdb and start take ~2 s, and three of its modules need the session's Spark too, which once joined
# every PostgreSQL test to the Spark group, the run's longest (ci24: 742 s on one worker, the others done
# at ~690 s). Each worker that runs a PostgreSQL test starts its own, as each starts its own broker.
SHARED = ("kafka_cluster3", "kafka39", "secured_kafka", "kafka_dr", "spark", "prometheus",
          "tansu", "sandbox_bootstrap", "_toxiproxy")


def active(config: pytest.Config) -> bool:
    """True in a worker of a run with several workers (``-n``), and in its controller."""
    return bool(os.environ.get("PYTEST_XDIST_WORKER")) or bool(getattr(config.option, "numprocesses", None))


def servers(item: pytest.Item) -> set[str]:
    """The shared session servers a test needs (tests/support/nojvm.py knows the dynamic ones: the ``spark``
    marker,
    a version-set parameter "3.9")."""
    names = set(getattr(item, "fixturenames", ()))
    out = {s for s in SHARED if s in names} | (nojvm.needs([item]) & set(SHARED))
    # A test whose every Spark is a child process of its own (an `eosctl audit --engine spark` subprocess, a
    # standalone cluster) never touches the session's: it need not run beside it.
    if item.get_closest_marker("own_spark") and "spark" not in names:
        out.discard("spark")
    return out


def group(items: list[pytest.Item]) -> dict[str, list[pytest.Item]]:
    """Items by group name: a test that needs shared servers joins the group of those servers (servers one
    test needs together share a group: union-find); any other test the group of its module."""
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    def union(a: str, b: str) -> None:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)

    needs = {item.nodeid: sorted(servers(item)) for item in items}
    for names in needs.values():
        for other in names[1:]:
            union(names[0], other)
    # A module whose own module fixtures (a pipeline run, a streaming job: up to 97 s) serve tests of a
    # server's group and others stays whole in that group: split, each worker would set them up.
    for item in items:
        module = _module(item)
        if _module_fixtures(item):
            find(module)
            for name in needs[item.nodeid]:
                union(name, module)
    groups: dict[str, list[pytest.Item]] = {}
    for item in items:
        names = needs[item.nodeid]
        module = _module(item)
        if names:
            key = "server." + find(names[0])
        elif module in parent and find(module) != module:
            key = "server." + find(module)
        else:
            key = module
        groups.setdefault(key, []).append(item)
    return groups


def _module(item: pytest.Item) -> str:
    return item.nodeid.split("::", 1)[0]


def _module_fixtures(item: pytest.Item) -> bool:
    """Whether the test uses a module-scoped fixture of its own module (not the conftests' autouse ones)."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return False
    return any(defs[-1].scope == "module" and defs[-1].baseid == _module(item)
               for defs in info.name2fixturedefs.values())


def assign(items: list[pytest.Item]) -> None:
    """Mark each test with its group (``xdist_group``, for ``--dist loadgroup``) and order the items
    largest group first, keeping the order inside a group."""
    groups = group(items)
    # The groups that start a JVM hold the long tests: first, so that the last ones handed out are short.
    ordered = sorted(groups.items(), key=lambda kv: (not any(i.get_closest_marker("jvm") for i in kv[1]),
                                                     -len(kv[1]), kv[0]))
    items[:] = [item for _, members in ordered for item in members]
    for name, members in ordered:
        for item in members:
            item.add_marker(pytest.mark.xdist_group(name.replace("/", ".")))


# Each shared server's set-up, as this run's workers did them: a line "<fixture> <worker>" in a file beside
# the workers' temp dirs, read by the controller at the end (``starts_twice``: a grouping rule that failed in
# a real run shows there, not only in tests/unit/test_workers.py).
STARTS = "shared-server-starts.txt"


def _starts_file(config: pytest.Config) -> Path:
    base = Path(config._tmp_path_factory.getbasetemp())  # type: ignore[attr-defined]
    return (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / STARTS


def record_start(config: pytest.Config, fixture: str) -> None:
    if fixture in SHARED and active(config):
        with open(_starts_file(config), "a") as f:  # one short line a write: appends don't interleave
            f.write(f"{fixture} {os.environ.get('PYTEST_XDIST_WORKER', 'controller')}\n")


class StartsRecorder:
    @pytest.hookimpl(wrapper=True)
    def pytest_fixture_setup(self, fixturedef: pytest.FixtureDef, request: pytest.FixtureRequest):
        value = yield
        record_start(request.config, fixturedef.argname)
        return value


def starts_twice(config: pytest.Config) -> dict[str, list[str]]:
    """Shared servers this run set up more than once: fixture -> the workers that did."""
    try:
        lines = _starts_file(config).read_text().split()
    except FileNotFoundError:
        return {}
    seen: dict[str, list[str]] = {}
    for fixture, worker in zip(lines[::2], lines[1::2], strict=True):
        seen.setdefault(fixture, []).append(worker)
    return {f: w for f, w in seen.items() if len(w) > 1}
