"""eosctl.base.stopsignals: a stop signal that arrives while a module is imported waits for the import.

An exception raised inside a native module's initialisation aborts the process (duckdb under nanobind:
"Critical nanobind error ... enum_create", SIGABRT): Ctrl-C at that moment left no line and nothing cleaned.
"""

from __future__ import annotations

import importlib
import signal
import sys
import time
from pathlib import Path

from eosctl.base.stopsignals import handling


def test_a_signal_during_an_import_is_handled_after_it(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "slow_native_init.py").write_text(
        "import signal, time\n"
        "signal.raise_signal(signal.SIGTERM)\n"
        "time.sleep(0.2)\n"  # the handler has had its chance to run inside the import
        "DONE = True\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    seen: list[tuple[int, bool]] = []

    def on_signal(signum: int, frame: object) -> None:
        seen.append((signum, "slow_native_init" in sys.modules and
                     getattr(sys.modules["slow_native_init"], "DONE", False)))

    with handling(on_signal):
        module = importlib.import_module("slow_native_init")
        deadline = time.monotonic() + 10
        while not seen and time.monotonic() < deadline:
            time.sleep(0.01)
    assert module.DONE
    # Handled once, and only once the module was whole.
    assert seen == [(signal.SIGTERM, True)]


def test_a_signal_outside_imports_is_handled_at_once() -> None:
    seen: list[int] = []
    with handling(lambda signum, frame: seen.append(signum)):
        signal.raise_signal(signal.SIGTERM)
    assert seen == [signal.SIGTERM]
