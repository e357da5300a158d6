"""Imports sit at module level, where they show what a module depends on. One inside a function is allowed
only to keep a costly import out of a path that does not need it, and then says so with a measured cost:
``# lazy: ...`` naming milliseconds or seconds (e.g. ``# lazy: duckdb 45 ms to import``), or with
``# lazy: optional, ...`` for a module that may be absent (an extra, a platform's); on the import's line or
on a comment line heading a run of such imports. Read from the source with ast.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("eosctl", "auditors")
# What a reason must contain: a measured cost (12 ms, 0.4 s, 1.4s), or that the module is optional.
COST = re.compile(r"#\s*lazy:(\s*optional\b|.*?\d+(\.\d+)?\s*(ms|s)\b)")


def _function_imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    found: dict[int, ast.Import | ast.ImportFrom] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for sub in ast.walk(node):
                if isinstance(sub, ast.Import | ast.ImportFrom):
                    found[sub.lineno] = sub
    return [found[line] for line in sorted(found)]


def unexplained(source: str) -> list[int]:
    """The lines of function-level imports without a ``# lazy:`` comment naming a cost."""
    lines = source.splitlines()
    imports = _function_imports(ast.parse(source))
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
    assert not bad, ("imports inside functions without a `# lazy: <measured cost>` comment (move them to "
                     "module level, or measure with `python -X importtime` and say what they save):\n"
                     + "\n".join(bad))


def test_the_rule_reads_comments_on_the_line_and_above_a_run():
    source = '''
import os


def a():
    import json
    return json


def b():
    import duckdb  # lazy: duckdb is 45 ms of `eosctl --help`
    return duckdb


def c():
    # lazy: pyarrow and duckdb are 120 ms of `eosctl --help`
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
