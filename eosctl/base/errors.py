"""The one error type the CLI turns into a single line and exit code 2."""

from __future__ import annotations

from eosctl.base.exits import Exit


class EosctlError(Exception):
    """A problem the user can fix: the message says what is wrong and how to fix it."""

    exit_code = int(Exit.ERROR)


class ConfigError(EosctlError):
    pass


class BrokerError(EosctlError):
    pass


class SinkError(EosctlError):
    pass


def first_line(e: BaseException | str, default: str | None = None) -> str:
    """The first non-blank line of an error (library messages often carry SQL or a JVM stack below it)."""
    text = str(e).strip()
    if text:
        return text.splitlines()[0]
    return default or (type(e).__name__ if isinstance(e, BaseException) else "unknown error")
