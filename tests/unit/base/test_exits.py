"""eosctl's exit statuses (eosctl.base.exits): the numbers README's "Exit codes" promises, one list."""

from __future__ import annotations

import signal

from eosctl.base.errors import EosctlError
from eosctl.base.exits import Exit
from eosctl.base.stopsignals import exit_code


def test_the_statuses_are_the_numbers_the_readme_promises() -> None:
    assert [int(e) for e in (Exit.OK, Exit.FOUND, Exit.ERROR)] == [0, 1, 2]
    assert [int(e) for e in (Exit.HANGUP, Exit.INTERRUPTED, Exit.TERMINATED)] == [129, 130, 143]
    assert EosctlError.exit_code == 2


def test_a_signal_exits_128_plus_its_number_and_a_verdict_its_status() -> None:
    assert exit_code(signal.SIGINT) == Exit.INTERRUPTED and exit_code(signal.SIGTERM) == 143
    assert Exit.of_signal(3) == 131  # not a stop signal: still 128 + its number
    assert (Exit.of_verdict("fail"), Exit.of_verdict("pass")) == (Exit.FOUND, Exit.OK)
