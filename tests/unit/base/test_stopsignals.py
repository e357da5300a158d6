"""The stop signals' one line and exit code (eosctl.base.stopsignals), and the event they set."""

from __future__ import annotations

import importlib
import os
import signal
import sys
import time
from pathlib import Path

import pytest

from eosctl.base.stopsignals import STOP_SIGNALS, exit_code, handling, stop_event, stopped_line


@pytest.mark.parametrize(("sig", "line", "code"), [
    (signal.SIGINT, "eosctl: interrupted", 130), (signal.SIGTERM, "eosctl: terminated", 143),
    (signal.SIGHUP, "eosctl: hung up (the terminal was closed)", 129),
    (signal.SIGUSR1, "eosctl: stopped by signal 10", 138)])
def test_each_stop_ends_with_its_line_and_128_plus_its_number(sig, line, code):
    assert (stopped_line(sig), exit_code(sig)) == (line, code)


def test_a_stop_signal_sets_the_event_and_the_handlers_before_come_back():
    before = {s: signal.getsignal(s) for s in STOP_SIGNALS}
    with stop_event() as stop:
        os.kill(os.getpid(), signal.SIGTERM)
        assert stop.wait(10), "SIGTERM never set the event (waited 10 s)"
        assert stop.signum == signal.SIGTERM
    assert {s: signal.getsignal(s) for s in STOP_SIGNALS} == before


# A stop signal that arrives while a module is imported waits for the import: an exception raised inside a
# native module's initialisation aborts the process (duckdb under nanobind: "Critical nanobind error ...
# enum_create", SIGABRT), so Ctrl-C at that moment left no line and nothing cleaned.

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


HELD_PROGRAM = """
import os, signal, threading, time
from eosctl.base.stopsignals import handling, held

ready = threading.Event()

def send():  # a thread that doesn't block the signal: the kernel hands it to this one
    ready.wait()
    os.kill(os.getpid(), signal.SIGTERM)

def on_signal(signum, frame):
    raise KeyboardInterrupt

threading.Thread(target=send, daemon=True).start()
where = "before"
with handling(on_signal):
    try:
        with held():
            ready.set()
            end = time.monotonic() + 1
            while time.monotonic() < end:  # Python runs the main thread's handler between these instructions
                pass
            where = "after the block"
        time.sleep(10)
        print("never handled")
    except KeyboardInterrupt:
        print("handled " + ("inside the block" if where == "before" else where))
"""


def test_a_signal_another_thread_takes_during_a_held_block_is_handled_after_it() -> None:
    """held() holds eosctl's handlers off in the main thread even when the kernel hands the signal to another
    thread (ci12: raised inside os.fork's at-fork callbacks, a traceback printed and the signal lost)."""
    import subprocess

    done = subprocess.run([sys.executable, "-c", HELD_PROGRAM], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "handled after the block", done.stdout + done.stderr


@pytest.mark.parametrize(("sig", "code", "line"), [(signal.SIGTERM, 143, "eosctl: terminated"),
                                                   (signal.SIGINT, 130, "eosctl: interrupted")])
def test_a_signal_whose_exception_a_library_swallowed_still_ends_the_command(sig, code, line, capsys):
    """kafka-python's event loop, driven by the main thread, drops whatever a task step raises (its
    selector's `except BaseException` per step): the command then ran to its end and exited 0 with no line
    (ci10). The signal that came still ends it, with its line and code."""
    from eosctl.cli import unwind_on_signals

    swallowed: list[BaseException] = []
    with pytest.raises(SystemExit) as ended:
        with unwind_on_signals():
            try:
                os.kill(os.getpid(), sig)
                deadline = time.monotonic() + 10
                while time.monotonic() < deadline:
                    time.sleep(0.01)
            except BaseException as e:  # what kafka/net/selector.py does with a task step's exception
                swallowed.append(e)
    assert swallowed, "the signal's exception never came (waited 10 s)"
    assert ended.value.code == code
    assert capsys.readouterr().err.splitlines() == [line]


def test_a_command_whose_signal_was_swallowed_writes_no_output(tmp_path: Path, capsys) -> None:
    """Stop 62's CI: a snapshot's audit stopped by SIGTERM, the exception swallowed, and --out written
    before the line. The output is refused; the command ends with the signal's line and code."""
    from eosctl.base.files import write_replacing
    from eosctl.cli import unwind_on_signals

    out = tmp_path / "report.html"
    swallowed: list[BaseException] = []
    with pytest.raises(SystemExit) as ended:
        with unwind_on_signals():
            try:
                os.kill(os.getpid(), signal.SIGTERM)
                deadline = time.monotonic() + 10
                while time.monotonic() < deadline:
                    time.sleep(0.01)
            except BaseException as e:
                swallowed.append(e)
            write_replacing(str(out), "<html>")
    assert swallowed and ended.value.code == 143
    assert capsys.readouterr().err.splitlines() == ["eosctl: terminated"]
    assert os.listdir(tmp_path) == []
    write_replacing(str(out), "<html>")  # the next command (here: no signal) writes
    assert os.listdir(tmp_path) == ["report.html"]
