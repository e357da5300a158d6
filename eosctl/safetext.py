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
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported when used: eosctl's one-line errors use term() and must start fast
    from rich.text import Text


@lru_cache(maxsize=4096)
def _escaped(c: str) -> str:
    return repr(c)[1:-1]


def term(s: str) -> str:
    """`s` for a terminal: every character a terminal would not print as itself, shown as its escape."""
    if not isinstance(s, str):
        s = str(s)
    if s.isprintable():  # the common case, checked in C
        return s
    return "".join(c if c.isprintable() else _escaped(c) for c in s)


def text(s: str, style: str = "") -> Text:
    """`s` as a Rich Text: escaped for a terminal and never parsed as markup (`[/x]` stays `[/x]`)."""
    from rich.text import Text

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
