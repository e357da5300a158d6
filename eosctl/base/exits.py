"""eosctl's exit statuses (README, "Exit codes"; docs/commands.md): the one list every command exits with."""

from __future__ import annotations

from enum import IntEnum


class Exit(IntEnum):
    """0 ok, 1 findings (or whatever the command checks for: hanging transactions, a fenced id), 2 a usage,
    config, connection or sink error, 128 + the signal's number when a signal stopped the command."""

    OK = 0
    FOUND = 1
    ERROR = 2
    HANGUP = 129  # 128 + SIGHUP: the terminal closed
    INTERRUPTED = 130  # 128 + SIGINT: Ctrl-C
    TERMINATED = 143  # 128 + SIGTERM

    @staticmethod
    def of_signal(signum: int) -> int:
        """The status of a command a signal stopped: 128 + its number (a member for the stop signals)."""
        code = 128 + int(signum)
        return Exit(code) if code in Exit._value2member_map_ else code

    @classmethod
    def of_verdict(cls, verdict: str) -> Exit:
        """An audit's: FOUND when it fails, else OK."""
        return cls.FOUND if verdict == "fail" else cls.OK
