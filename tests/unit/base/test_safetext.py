"""eosctl.base.safetext: the one rule for names and values from a cluster or a sink (issue 20)."""

from __future__ import annotations

import io
import xml.etree.ElementTree as ET
from xml.sax.saxutils import escape, quoteattr

import pytest
from rich.console import Console

from eosctl.base import safetext

HOSTILE = [
    "\x1b[2J\x1b[Hx",                                # clear screen, cursor home
    "\x1b]8;;http://evil.example\x07click\x1b]8;;\x07",  # OSC 8 hyperlink
    "\x1b]52;c;cHduZWQ=\x07",                        # OSC 52: set the clipboard
    "\x9b31mred",                                    # C1 CSI
    "abc\u202edcba",                                 # right-to-left override
    "a\u2066b\u2069",                                # isolates
    "nul\x00bel\x07del\x7f",
    "line\nbreak\rcr\ttab",
    "bad\udcffutf8",                                 # invalid UTF-8 decoded with surrogateescape
]


@pytest.mark.parametrize("s", HOSTILE)
def test_term_leaves_no_control_character(s: str) -> None:
    out = safetext.term(s)
    assert out.isprintable()
    assert "\x1b" not in out and "\u202e" not in out


def test_term_shows_escapes_visibly_and_keeps_printable_text() -> None:
    assert safetext.term("\x1b[2J\x1b[Hx") == "\\x1b[2J\\x1b[Hx"
    assert safetext.term("abc\u202edcba") == "abc\\u202edcba"
    assert safetext.term("a\nb") == "a\\nb"
    plain_names = ("orders-v2", "Zürich.Bestellungen", "注文", "grüße 😀", "[/x]",
                   "[link=http://e]x[/link]", "")
    for plain in plain_names:
        assert safetext.term(plain) == plain


def test_text_is_never_parsed_as_markup() -> None:
    buf = io.StringIO()
    console = Console(file=buf, force_terminal=True, color_system="truecolor", width=200)
    console.print(safetext.text("[/x]"))
    console.print(safetext.text("[link=http://evil.example]richlink[/link]", style="bold"))
    out = buf.getvalue()
    assert "[/x]" in out
    assert "[link=http://evil.example]richlink[/link]" in out
    assert "\x1b]8;" not in out  # no hyperlink was made


@pytest.mark.parametrize("s", HOSTILE)
def test_xml_always_parses(s: str) -> None:
    cleaned = safetext.xml(s)
    doc = f"<testcase name={quoteattr(cleaned)}><failure>{escape(cleaned)}</failure></testcase>"
    root = ET.fromstring(doc)
    assert root.get("name") is not None
    assert "\x1b" not in root.find("failure").text


def test_xml_keeps_allowed_characters() -> None:
    assert safetext.xml("a\tb\nc\rd 注文 😀 <&>") == "a\tb\nc\rd 注文 😀 <&>"
    assert safetext.xml("bad\x1b[31mtopic") == "bad\\x1b[31mtopic"
    assert safetext.xml("x\ufffe\udcff") == "x\\ufffe\\udcff"
