"""The one error type the CLI turns into a single line and exit code 2."""

from __future__ import annotations


class EosctlError(Exception):
    """A problem the user can fix: the message says what is wrong and how to fix it."""

    exit_code = 2


class ConfigError(EosctlError):
    pass


class BrokerError(EosctlError):
    pass


class SinkError(EosctlError):
    pass
