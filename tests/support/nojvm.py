"""`make check`'s promise: no test it runs starts a JVM (Apache Kafka, Spark, Kafka Connect, Flink, Streams).

Tests are marked ``jvm`` at collection when they ask for a fixture that starts one (JVM_FIXTURES, directly or
through another fixture); `make check` deselects them (``-m "not jvm"``). With EOSCTL_TEST_NO_JVM=1 (set by
`make check`) a guard backs the marker up: starting ``java`` or Spark's launcher from the test process fails
the test at once, and a test that leaves a JVM below the test process (a CLI child that started Spark)
fails at its teardown, each naming what to mark.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

# The session fixtures (tests/conftest.py and the folders' own) that start a JVM, or hand out one's address.
JVM_FIXTURES = frozenset({"apache_kafka", "kafka_cluster3", "kafka39", "kafka_version", "bootstrap",
                          "cluster", "spark"})
ENV = "EOSCTL_TEST_NO_JVM"
_LAUNCHERS = ("java", "spark-submit", "spark-class", "pyspark")
HINT = ("a test run by `make check` started a JVM ({what}): mark it @pytest.mark.jvm, or ask for the JVM "
        "through a fixture named in tests/support/nojvm.py's JVM_FIXTURES")


def on() -> bool:
    return os.environ.get(ENV) == "1"


def mark(items: list[pytest.Item]) -> None:
    """The ``jvm`` marker on every test that asks for a JVM fixture."""
    for item in items:
        if needs([item]):
            item.add_marker(pytest.mark.jvm)


def needs(items: list[pytest.Item]) -> set[str]:
    """The JVM fixtures these tests ask for: by name, through another fixture, through the ``spark`` marker
    or an engine parameter "spark" (tests that ask for the session's Spark at run time), or through a
    version-set parameter "3.9"."""
    out: set[str] = set()
    for item in items:
        out |= {n for n in JVM_FIXTURES & set(getattr(item, "fixturenames", ())) if _is_fixture(item, n)}
        callspec = getattr(item, "callspec", None)
        # An engine parameter "spark": the test asks for the session's Spark at run time (getfixturevalue).
        if item.get_closest_marker("spark") or (callspec is not None and "spark" in callspec.params.values()):
            out.add("spark")
        if "kafka_version" in out or (callspec is not None and "3.9" in callspec.params.values()):
            out.add("kafka39")
    return out


def _is_fixture(item: pytest.Item, name: str) -> bool:
    """The name is the fixture, not a test's own parameter of that name (``bootstrap`` in a parametrize)."""
    info = getattr(item, "_fixtureinfo", None)
    defs = info.name2fixturedefs.get(name) if info is not None else None
    return bool(defs) and defs[-1].func.__name__ != "get_direct_param_fixture_func"


def launcher(args: object) -> str | None:
    """The JVM launcher an argv starts, if it starts one."""
    argv = [args] if isinstance(args, str | bytes | os.PathLike) else list(args or [])  # type: ignore[arg-type]
    words = os.fsdecode(argv[0]).split() if argv else []
    name = os.path.basename(words[0]) if words else ""
    return name if name in _LAUNCHERS else None


def install() -> None:
    """Fail any start of a JVM launcher from this process (the guard's first half)."""
    original = subprocess.Popen.__init__
    if getattr(original, "_nojvm", False):
        return

    def guarded(self, args, *a, **kw):  # type: ignore[no-untyped-def]
        what = launcher(args)
        if what is not None:
            raise AssertionError(HINT.format(what=what))
        original(self, args, *a, **kw)

    guarded._nojvm = True  # type: ignore[attr-defined]
    subprocess.Popen.__init__ = guarded  # type: ignore[method-assign]


def jvms_below(pid: int) -> list[str]:
    """The command lines of the JVMs among pid's descendants (Linux /proc; elsewhere none found)."""
    found, todo = [], _children(pid)
    while todo:
        child = todo.pop()
        todo.extend(_children(child))
        try:
            argv = Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if launcher([argv[0]]):
            found.append(b" ".join(argv).decode(errors="replace")[:200])
    return found


def _children(pid: int) -> list[int]:
    out: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            out.extend(int(c) for c in (task / "children").read_text().split())
        except (OSError, ValueError):
            pass
    return out
