"""eosctl.base.quickexit: a command that allowed it ends without the interpreter's teardown, its atexit
hooks run and its output flushed; otherwise the process exits the usual way. Each case is a new process."""

from __future__ import annotations

import subprocess
import sys

from tests.support.helpers import REPO

PROGRAM = """
import atexit, sys, threading, time
from eosctl.base import quickexit

class Held:
    def __del__(self):
        print("torn down")  # the interpreter's teardown clears the module's globals

held = Held()
atexit.register(print, "atexit hook")
sys.stdout.write("the report, not yet flushed; ")
{setup}
quickexit.end(3)
print("returned")
sys.exit(4)
"""


def run(setup: str) -> tuple[int, str]:
    proc = subprocess.run([sys.executable, "-c", PROGRAM.format(setup=setup)], capture_output=True, text=True,
                          timeout=60, cwd=REPO)
    return proc.returncode, proc.stdout


def test_an_allowed_end_skips_the_teardown_but_runs_the_hooks_and_flushes() -> None:
    assert run("quickexit.allow()") == (3, "the report, not yet flushed; atexit hook\n")


def test_without_allow_the_process_exits_the_usual_way() -> None:
    assert run("") == (4, "the report, not yet flushed; returned\natexit hook\ntorn down\n")


def test_a_thread_still_running_is_waited_for_as_usual() -> None:
    code, out = run("quickexit.allow()\n"
                    "threading.Thread(target=lambda: (time.sleep(0.3), print('thread done'))).start()")
    assert code == 4
    assert out.splitlines() == ["the report, not yet flushed; returned", "thread done", "atexit hook",
                                "torn down"]


def test_a_daemon_thread_does_not_hold_the_end() -> None:
    assert run("quickexit.allow()\nthreading.Thread(target=time.sleep, args=(30,), daemon=True).start()") == \
        (3, "the report, not yet flushed; atexit hook\n")


def test_output_that_cannot_be_written_takes_the_usual_exit() -> None:
    # The command's output buffered for /dev/full: its flush fails, so the process goes on to the usual exit
    # (which reports the failed write and gives status 120, as Python does).
    proc = subprocess.run([sys.executable, "-c", PROGRAM.format(
        setup="sys.stdout = open('/dev/full', 'w', buffering=1 << 16)\nprint('x')\nquickexit.allow()")],
        capture_output=True, text=True, timeout=60, cwd=REPO)
    assert proc.returncode == 120
    assert "No space left on device" in proc.stderr


def test_hooks_output_that_cannot_be_written_is_status_120() -> None:
    code, out = run("sys.stdout.flush()\nsys.stdout = open('/dev/full', 'w', buffering=1 << 16)\n"
                    "quickexit.allow()")
    assert (code, out) == (120, "the report, not yet flushed; ")
