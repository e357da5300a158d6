"""How a row's level looks: one rich style per level (ok, bad, a Log view kind...), shared by every table
and headline, parsed once."""

from __future__ import annotations

from functools import lru_cache

from rich.style import Style

# Row levels -> rich styles. Levels that matter (bad/warn) are also bold so they survive NO_COLOR.
STYLES: dict[str | None, str] = {
    None: "",
    "ok": "green",
    "warn": "bold yellow",
    "bad": "bold red",
    "muted": "dim",
    # Log view kinds
    "committed": "green",
    "aborted": "bold red",
    # Cyan, not magenta: Textual's default dark palette (Monokai) draws magenta and red the same pink, so
    # markers looked like aborted records.
    "control": "cyan",
    "open": "bold yellow",
    "hole": "dim",
    "focus": "bold reverse",
}


@lru_cache(maxsize=64)
def parsed(spec: str) -> Style:
    """A style spec parsed once (a table draws thousands of lines with a handful of specs)."""
    return Style.parse(spec) if spec else Style()
