"""Text on the HTML report (eosctl.output.htmltext): escaped as on a terminal, long cells cut in the
middle."""

from __future__ import annotations

from eosctl.output.htmltext import CELL_CHARS, cell, escape, number, prose


def test_markup_control_and_bidi_characters_are_shown_not_obeyed():
    assert escape("<b>\x1b[31m\u202e&") == "&lt;b&gt;\\x1b[31m\\u202e&amp;"


def test_a_long_cell_is_cut_in_the_middle_with_its_length_and_the_whole_as_tooltip():
    name = "a" * 150 + "<z>" + "b" * 47
    shown = cell(name)
    head, tail = name[:CELL_CHARS * 2 // 3], name[-CELL_CHARS // 4:]
    assert shown == (f'<span title="{escape(name)}">{head}…{tail} <span class="muted">(200 characters)</span>'
                     "</span>")
    assert cell("short <x>") == "short &lt;x&gt;"


def test_prose_is_never_cut_and_numbers_have_separators():
    assert prose("p" * 500) == "p" * 500
    assert number(1_234_567) == "1,234,567"
