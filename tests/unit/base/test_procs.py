"""eosctl.base.procs: a server started with die_with_parent goes when the process that started it is killed
(SIGKILL: no finalizer runs), as the suite's PostgreSQL, Prometheus and brokers rely on."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

from eosctl.base import procs
from tests.support.helpers import wait_until

_STARTER = textwrap.dedent("""
    import subprocess, sys, time
    from eosctl.base import procs
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"],
                             preexec_fn=procs.die_with_parent)
    print(child.pid, flush=True)
    time.sleep(120)
""")


def test_a_child_dies_with_the_process_that_started_it_and_leads_its_own_session() -> None:
    starter = subprocess.Popen([sys.executable, "-c", _STARTER], stdout=subprocess.PIPE, text=True)
    child = int(starter.stdout.readline())
    try:
        assert os.getsid(child) == child  # a kill of its group reaches all it starts
        starter.send_signal(signal.SIGKILL)
        starter.wait(10)
        wait_until("death of the child after its parent's", lambda: not procs.alive(child), 10)
    finally:
        starter.kill()
        starter.stdout.close()
        if procs.alive(child):
            os.kill(child, signal.SIGKILL)


def test_a_session_leader_may_ask_for_it_too() -> None:
    # start_new_session=True has already made the child a session leader: a second setsid() would fail.
    starter = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True,
                               preexec_fn=procs.die_with_parent)
    try:
        assert os.getsid(starter.pid) == starter.pid
    finally:
        starter.kill()
        starter.wait(10)
