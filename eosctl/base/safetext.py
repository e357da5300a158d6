"""The one rule for text eosctl did not write: names and values from a cluster or a sink.

Topics, group ids, transactional ids, sink keys and topics are chosen by other people. Shown raw, an ESC
starts a terminal command (clear the screen, set the clipboard with OSC 52, draw an OSC 8 link), U+202E
reorders the line, `[/x]` is Rich markup and raises, and a control character makes XML unparseable. So
every such string goes through one of these for its destination; HTML keeps `html.escape`.

A character is shown as itself when Python calls it printable (letters, marks, digits, punctuation,
symbols and the ASCII space, in any script); every other one (C0/C1 controls, DEL, line and paragraph
separators, format characters such as the bidi overrides and isolates, lone surrogates left by invalid
UTF-8, unassigned code points) is shown as its escape, e.g. ``\\x1b`` or ``\\u202e``. Long strings are
left to the caller, which knows how much room it has.

Bytes (a Kafka record's key or value, a sink's BLOB key) become text once, by ``decode``: UTF-8 where it is
valid, and each byte that is not part of valid UTF-8 as ``\\xNN`` with upper-case hex, e.g. ``\\xFF``: the
form DuckDB gives a BLOB key column's bytes (DuckDB writes every byte outside printable ASCII so, even in
valid UTF-8, and the audit compares a DuckDB sink's keys in that form). The result is then escaped for its
destination like any other string (an ESC in a valid key is a character, shown as ``\\x1b`` on a
terminal). A valid key spelling the four characters ``\\xFF`` reads the same as the byte 0xFF: keys are
compared as this text, so two such keys in one sink would be reported as one key.
"""

from __future__ import annotations

import codecs
import re
from functools import lru_cache
from typing import TYPE_CHECKING

from rich.text import Text

if TYPE_CHECKING:  # imported when used: eosctl's one-line errors use term() and must start fast
    from rich.text import Text


@lru_cache(maxsize=4096)
def _escaped(c: str) -> str:
    return repr(c)[1:-1]


def _hex_bytes(e: UnicodeError) -> tuple[str, int]:
    assert isinstance(e, UnicodeDecodeError)
    return "".join(f"\\x{b:02X}" for b in e.object[e.start:e.end]), e.end


codecs.register_error("eosctl.hex", _hex_bytes)


def decode(b: bytes) -> str:
    """Bytes as text: UTF-8 where valid, every other byte as ``\\xNN`` (upper-case hex); never raises."""
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError:
        return b.decode("utf-8", "eosctl.hex")


def term(s: str) -> str:
    """`s` for a terminal: every character a terminal would not print as itself, shown as its escape."""
    if not isinstance(s, str):
        s = str(s)
    if s.isprintable():  # the common case, checked in C
        return s
    return "".join(c if c.isprintable() else _escaped(c) for c in s)


def text(s: str, style: str = "") -> Text:
    """`s` as a Rich Text: escaped for a terminal and never parsed as markup (`[/x]` stays `[/x]`)."""
    return Text(term(s), style=style)


# What XML 1.0 forbids (https://www.w3.org/TR/xml/#charsets: C0 controls but tab, LF and CR; lone
# surrogates; U+FFFE, U+FFFF), plus DEL and the C1 controls it discourages: they would still reach a
# terminal when someone cats the report.
# Also the bidi overrides and isolates, which XML allows: a CI page showing the report would reorder the
# line (Trojan Source, CVE-2021-42574).
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069"
                      "\ud800-\udfff\ufffe\uffff]")


def xml(s: str) -> str:
    """`s` with every character XML 1.0 forbids (and DEL, the C1 controls and the bidi overrides) shown as
    its escape, so the document stays well-formed; the writer still does the usual `&`, `<`, `"` escaping."""
    if not isinstance(s, str):
        s = str(s)
    return _NOT_XML.sub(lambda m: _escaped(m.group()), s)
