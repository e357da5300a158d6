"""Secrets out of every line eosctl prints: each value substituted for a ${NAME} of the config this process
read is remembered here, and `redact` hides it wherever a message carries it."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import quote

# Every value substituted for a ${NAME} in a config this process read -> NAME. A message is built from
# such values far from here (a broker address, a sink's path or table, a topic, a URI), so redaction
# follows the value, not the key: `redact` runs over every error and warning line eosctl prints.
_SUBSTITUTED: dict[str, str] = {}
# A value this short is also an ordinary word of a message: it is hidden only where it stands alone.
_SHORT = 4


def remember(value: str, name: str) -> None:
    """``value`` was substituted for ${name}: from now on no printed line shows it."""
    if value:
        _SUBSTITUTED.setdefault(value, name)


def forget_all() -> None:
    """A new config is read: its values are the ones to hide (a process may read another before)."""
    _SUBSTITUTED.clear()


_forms: list[tuple[str, str]] = []  # (a form of a value, what is shown instead), longest first
_forms_of: dict[str, str] = {}  # the _SUBSTITUTED the forms were made from


def _redactions() -> list[tuple[str, str]]:
    if _forms_of != _SUBSTITUTED:
        forms: dict[str, str] = {}
        for value, name in _SUBSTITUTED.items():
            for form in (value, repr(value)[1:-1], quote(value, safe=""), value.replace('"', '\\"')):
                forms.setdefault(form, f"[the value of ${{{name}}}]")
        _forms[:] = sorted(forms.items(), key=lambda kv: -len(kv[0]))
        _forms_of.clear()
        _forms_of.update(_SUBSTITUTED)
    return _forms


class Redacting:
    """A text stream (stdout, stderr, an --out file) through `redact`: whatever code writes to it."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(redact(text) if isinstance(text, str) else text)
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def redact(message: str) -> str:
    """``message`` with every value that came from a ${NAME} in a config (also as repr(), JSON or
    URL-quoting shows it) replaced by ``[the value of ${NAME}]``: a secret never reaches a terminal, a log
    or a pipe (eosctl.cli puts every line eosctl prints through here)."""
    if not _SUBSTITUTED or not message:
        return message
    for form, hidden in _redactions():
        if form not in message:
            continue
        if len(form) >= _SHORT:
            message = message.replace(form, hidden)
        else:
            message = re.sub(rf"(?<![A-Za-z0-9_.-]){re.escape(form)}(?![A-Za-z0-9_.-])", hidden, message)
    return message

