"""Text on the HTML page: escaped as on a terminal (control and bidi characters shown as escapes), long
table cells cut in the middle, numbers with thousands separators."""

from __future__ import annotations

import html

from eosctl.base import safetext


def escape(s: str) -> str:
    """Text for the page: HTML-escaped, and control and bidi characters shown as escapes, as on a
    terminal (a browser would hide an ESC and reorder a line at a U+202E)."""
    return html.escape(safetext.term(s))


# A name or value longer than this is cut in the middle in a table cell (the whole is its tooltip), so a
# 20,000-character topic can't push the number columns off the page.
CELL_CHARS = 120


def cell(s: str) -> str:
    """Text from a cluster or a sink for a table cell: control and bidi characters shown as escapes (as
    on a terminal), HTML-escaped, and a very long one cut with its length said."""
    s = safetext.term(s)
    if len(s) <= CELL_CHARS:
        return html.escape(s)
    cut = f"{s[:CELL_CHARS * 2 // 3]}…{s[-CELL_CHARS // 4:]}"
    return (f'<span title="{escape(s)}">{escape(cut)} <span class="muted">({len(s):,} characters)</span>'
            "</span>")


def prose(s: str) -> str:
    """A sentence (a cause, a detail) for a table cell: escaped as cell does, never cut (the producer id a
    middle cut removed is the point of it, and a tooltip is lost on paper); it wraps instead."""
    return html.escape(safetext.term(s))


def number(v: int) -> str:
    return f"{v:,}"
