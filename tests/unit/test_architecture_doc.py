"""docs/architecture.md's table says where each question is answered: every module or package it names exists
(a move that forgets the table fails here)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "architecture.md"


def named_paths(text: str) -> list[str]:
    """The paths the table's second column names: `eosctl/x.py`, `eosctl/sink/`, and a package's files
    listed after it in parentheses (`eosctl/report/` (`segments.py`, `svg.py`))."""
    out = []
    for line in text.splitlines():
        if not line.startswith("| ") or line.startswith("| question") or line.startswith("|---"):
            continue
        where = line.rstrip(" |").split(" | ", 1)[1]
        package = None
        for name in re.findall(r"`([A-Za-z0-9_./]+)`", where):
            if "/" in name and name.split("/")[0] in ("eosctl", "auditors", "tui"):
                out.append(name)
                package = name if name.endswith("/") else package
            elif name.endswith(".py") and package is not None:
                out.append(package + name)
    return out


def test_every_module_the_table_names_exists():
    paths = named_paths(DOC.read_text())
    assert len(paths) > 30
    missing = [p for p in paths if not (ROOT / p).exists()]
    assert not missing, f"docs/architecture.md names modules that do not exist: {missing}"


def test_a_package_s_listed_files_are_read_inside_it():
    line = "| report | `eosctl/report/` (`segments.py`, `rootcauses.py`; the page `eosctl/output/html.py`) |"
    assert named_paths(line) == ["eosctl/report/", "eosctl/report/segments.py", "eosctl/report/rootcauses.py",
                                 "eosctl/output/html.py"]
