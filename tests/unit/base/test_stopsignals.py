"""The stop signals' one line and exit code (eosctl.base.stopsignals), and the event they set."""

from __future__ import annotations

import os
import signal

import pytest

from eosctl.base.stopsignals import STOP_SIGNALS, exit_code, stop_event, stopped_line


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
