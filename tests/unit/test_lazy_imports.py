"""Imports sit at module level, where they show what a module depends on. One inside a function is allowed
only to keep a costly import out of a path that does not need it, and then says so: ``# lazy: ...`` pointing
at docs/imports.md, where the cost is measured (e.g. ``# lazy: only with a registry; see docs/imports.md``),
or ``# lazy: optional, ...`` for a module that may be absent (an extra, a platform's); on the import's line
or on a comment line heading a run of such imports. The comments carry no figures (measured once each, they
disagreed with each other); the table in docs/imports.md, written by benchmarks/import_costs.py, has a row
for every module imported that way. Read from the source with ast.
"""

from __future__ import annotations

import ast
import importlib.util
import re
from functools import cache
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("eosctl", "auditors", "tui")
DOC = "docs/imports.md"
# What a reason must contain: where its cost is measured, or that the module is optional.
COST = re.compile(r"#\s*lazy:(\s*optional\b|.*docs/imports\.md)")
# A figure in a comment about imports (12 ms, 0.4 s, 4-12 ms): the table holds them, measured in one run.
FIGURE = re.compile(r"\b\d+(\.\d+)?(-\d+)?\s?(ms|s)\b")


@cache
def _costs() -> ModuleType:
    """benchmarks/import_costs.py, which finds the imports inside functions for the table as well."""
    spec = importlib.util.spec_from_file_location("import_costs", ROOT / "benchmarks" / "import_costs.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def unexplained(source: str) -> list[int]:
    """The lines of function-level imports without a ``# lazy:`` comment naming a cost."""
    lines = source.splitlines()
    imports = _costs().function_imports(ast.parse(source))
    spans = {n.lineno: n.end_lineno or n.lineno for n in imports}
    import_lines = {i for start, end in spans.items() for i in range(start, end + 1)}
    bad = []
    for node in imports:
        if COST.search(" ".join(lines[node.lineno - 1:spans[node.lineno]])):
            continue
        # Up through the run of imports this one belongs to, to the comment heading it.
        i = node.lineno - 1
        while i >= 1 and i in import_lines:
            i -= 1
        heading = []
        while i >= 1 and lines[i - 1].strip().startswith("#"):
            heading.insert(0, lines[i - 1].strip())
            i -= 1
        if not COST.search(" ".join(heading)):
            bad.append(node.lineno)
    return bad


def test_every_function_level_import_says_what_it_saves():
    bad = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            bad += [f"{path.relative_to(ROOT)}:{line}" for line in unexplained(path.read_text())]
    assert not bad, ("imports inside functions without a `# lazy: ...; see docs/imports.md` comment (move "
                     "them to module level, or say why and run `python benchmarks/import_costs.py`):\n"
                     + "\n".join(bad))


def test_the_rule_reads_comments_on_the_line_and_above_a_run():
    source = '''
import os


def a():
    import json
    return json


def b():
    import duckdb  # lazy: see docs/imports.md
    return duckdb


def c():
    # lazy: only for arrays; see docs/imports.md
    import pyarrow
    from duckdb import connect
    return pyarrow, connect


def d():
    # lazy: because
    import numpy
    x = 1
    import pandas
    return numpy, pandas, x


def e():
    try:
        import fcntl  # lazy: optional, Linux only
    except ImportError:
        fcntl = None
    return fcntl
'''
    assert unexplained(source) == [6, 24, 26]


def _table_rows(doc: str) -> set[str]:
    costs = _costs()
    table = doc[doc.index(costs.START):doc.index(costs.END)]
    return set(re.findall(r"^\| `([\w.]+)` \| [\d.]+ \| [\d.]+ \|", table, re.M))


def test_every_module_imported_lazily_has_a_row_in_the_import_cost_table():
    missing = sorted(set(_costs().lazy_imports()) - _table_rows((ROOT / DOC).read_text()))
    assert not missing, (f"modules imported inside functions with no row in {DOC} (run "
                         "`python benchmarks/import_costs.py` to measure them): " + ", ".join(missing))


def test_lazy_comments_carry_no_figures():
    bad = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            for number, line in enumerate(path.read_text().splitlines(), 1):
                comment = line[line.find("#"):] if "#" in line else ""
                if re.search(r"#\s*lazy\b", comment) and FIGURE.search(comment):
                    bad.append(f"{path.relative_to(ROOT)}:{number}: {comment}")
    assert not bad, f"figures in `# lazy:` comments (they belong in {DOC}):\n" + "\n".join(bad)


def test_the_table_rule_sees_modules_taken_from_a_package_and_skips_optional_ones(tmp_path):
    costs = _costs()
    source = """
def a():
    from eosctl.cluster import deadline, wire  # lazy: see docs/imports.md
    from eosctl.cluster.wire import WireClient  # lazy: see docs/imports.md
    import pyarrow.compute as pc  # lazy: see docs/imports.md
    import noida_db  # lazy: optional, an extra
"""
    (tmp_path / "eosctl").mkdir()
    (tmp_path / "eosctl" / "x.py").write_text(source)
    found = costs.lazy_imports(tmp_path)
    assert found == {"eosctl.cluster.deadline": ["eosctl/x.py:3"],
                     "eosctl.cluster.wire": ["eosctl/x.py:3", "eosctl/x.py:4"],
                     "pyarrow.compute": ["eosctl/x.py:5"]}
    row = "| `duckdb` | 44 | 40 | `eosctl/sink/duckdb.py` |"
    assert _table_rows(f"{costs.START}\n{row}\n{costs.END}") == {"duckdb"}
