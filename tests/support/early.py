"""The session's second and third Apache Kafka started early, beside the tests (issue 42: the suite's time
went to JVM start-ups).

Once collection knows which session clusters the selected tests need beyond the session's broker (Apache
Kafka 3.9.1 for the version set, the three-node cluster), one background thread starts them one after the
other while the first tests run, so at most two JVMs start at a time on the suite's two cores, and the
fixture that asks for one waits only for what is left of its start. Still one of each per session: the
fixtures take the started one (``take``) instead of starting their own, and one no test took is stopped at
the session's end (``discard``). Spark is not started here: its start swaps the process's stderr (fd 2) for
a while (auditors.spark), which a test running meanwhile would see.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

_POOL: ThreadPoolExecutor | None = None
_STARTED: dict[str, Future] = {}
_STOPS: dict[str, Callable[[Any], None]] = {}


def begin(name: str, start: Callable[[], Any], stop: Callable[[Any], None]) -> None:
    """Queue ``start()`` on the background thread (in the order asked); ``stop`` ends it if no test takes
    it."""
    global _POOL
    if name in _STARTED:
        return
    if _POOL is None:
        _POOL = ThreadPoolExecutor(max_workers=1, thread_name_prefix="early-jvm")
    _STARTED[name] = _POOL.submit(start)
    _STOPS[name] = stop


def take(name: str, timeout: float = 600) -> Any | None:
    """What the background thread started for ``name`` (waiting for it, ``timeout`` s at most; its error is
    raised here, in the fixture that asked), or None when nothing was started early."""
    future = _STARTED.pop(name, None)
    _STOPS.pop(name, None)
    return None if future is None else future.result(timeout=timeout)


def discard() -> None:
    """Stop what was started early and never taken (a test deselected or skipped after collection)."""
    for name, future in list(_STARTED.items()):
        stop = _STOPS.pop(name)
        del _STARTED[name]
        if future.cancel():
            continue
        try:
            started = future.result(timeout=600)
        except Exception:
            continue  # it never started: nothing to stop
        stop(started)
    if _POOL is not None:
        _POOL.shutdown(wait=False, cancel_futures=True)
