"""What each lazily imported module costs to import: the table in docs/imports.md, measured, not remembered.

An import inside a function keeps a costly module off a path that does not need it and says so with a
``# lazy:`` comment (tests/unit/test_lazy_imports.py). The figures used to sit in those comments and
disagreed with each other (one module was 23, 71, 89, 104 and 165 ms in different places), because each was
measured once, on a different day, under a different load. Here every such module is measured the same way
in the same run: a fresh interpreter per import (nothing cached in the process), the median of a few runs,
once alone and once after ``eosctl.cli`` (what a command pays on top of ``eosctl --help``). The figures vary
with the machine and its load; the table says when and how they were taken.

    python benchmarks/import_costs.py            # measure and rewrite the table in docs/imports.md
    python benchmarks/import_costs.py --runs 7   # more runs per module
    python benchmarks/import_costs.py --print    # measure and print, leave the docs as they are
"""

from __future__ import annotations

import argparse
import ast
import datetime
import platform
import statistics
import subprocess
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("eosctl", "auditors", "tui")
DOC = ROOT / "docs" / "imports.md"
START = "<!-- import-costs: start (benchmarks/import_costs.py writes what stands between these lines) -->"
END = "<!-- import-costs: end -->"
BASE = "eosctl.cli"
# A fresh interpreter per run times one import and prints seconds; the base import, if any, comes first.
PROBE = "import time{base}\nt = time.perf_counter()\nimport {module}\nprint(time.perf_counter() - t)"
TIMEOUT_S = 120


def function_imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    found: dict[int, ast.Import | ast.ImportFrom] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for sub in ast.walk(node):
                if isinstance(sub, ast.Import | ast.ImportFrom):
                    found[sub.lineno] = sub
    return [found[line] for line in sorted(found)]


def _is_module(dotted: str) -> bool:
    """Whether a dotted name is one of this repository's modules or packages (read from the files)."""
    path = ROOT.joinpath(*dotted.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _package_of(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts if path.name == "__init__.py" else parts[:-1]).removesuffix(".__init__")


def imported_modules(node: ast.Import | ast.ImportFrom, path: Path) -> list[str]:
    """The modules an import statement loads: a name taken from one of this repository's packages counts as
    its own module where it is one (``from eosctl.cluster import deadline`` loads eosctl.cluster.deadline)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:
        package = _package_of(path).split(".")
        base = ".".join([*package[:len(package) - node.level + 1], *([base] if base else [])])
    if base.split(".")[0] not in PACKAGES:
        return [base]
    subs = [f"{base}.{alias.name}" for alias in node.names if _is_module(f"{base}.{alias.name}")]
    return subs or [base]


def _optional(lines: list[str], node: ast.AST) -> bool:
    """An import of a module that may be absent (``# lazy: optional, ...``) is not a cost to measure."""
    end = getattr(node, "end_lineno", None) or node.lineno
    return "lazy: optional" in " ".join(lines[node.lineno - 1:end])


def lazy_imports(root: Path = ROOT) -> dict[str, list[str]]:
    """Every module imported inside a function of eosctl/, auditors/ or tui/, with the places (file:line)."""
    places: dict[str, list[str]] = {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            source = path.read_text()
            lines = source.splitlines()
            for node in function_imports(ast.parse(source)):
                if _optional(lines, node):
                    continue
                for module in imported_modules(node, path):
                    places.setdefault(module, []).append(f"{path.relative_to(root)}:{node.lineno}")
    return dict(sorted(places.items()))


def time_import(module: str, base: str | None, runs: int) -> float:
    """The median seconds ``import module`` takes in a fresh interpreter (after ``import base``, if given)."""
    code = PROBE.format(module=module, base=f"\nimport {base}" if base else "")
    seconds = []
    for _ in range(runs):
        done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                              timeout=TIMEOUT_S, check=True)
        seconds.append(float(done.stdout.strip().splitlines()[-1]))
    return statistics.median(seconds)


def _ms(seconds: float) -> str:
    ms = seconds * 1000
    return f"{ms:.0f}" if ms >= 10 else f"{ms:.1f}"


def table(places: dict[str, list[str]], runs: int) -> str:
    files = {module: Counter(place.split(":")[0] for place in where) for module, where in places.items()}
    rows = ["| module | ms alone | ms after `eosctl.cli` | imported lazily in |",
            "| --- | ---: | ---: | --- |"]
    for module, where in files.items():
        alone = time_import(module, None, runs)
        after = time_import(module, BASE, runs)
        named = ", ".join(f"`{path}`" + (f" ({n})" if n > 1 else "") for path, n in sorted(where.items()))
        rows.append(f"| `{module}` | {_ms(alone)} | {_ms(after)} | {named} |")
        print(f"{module:45} {_ms(alone):>7} {_ms(after):>7}", flush=True)
    when = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    head = (f"Measured {when} by `benchmarks/import_costs.py` (`make bench`): Python "
            f"{platform.python_version()}, {platform.machine()}, {len(files)} modules, the median of {runs} "
            "runs each, every run a fresh interpreter.")
    return "\n".join([head, "", *rows])


def write(doc: Path, body: str) -> None:
    text = doc.read_text()
    start, end = text.index(START) + len(START), text.index(END)
    doc.write_text(f"{text[:start]}\n{body}\n{text[end:]}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--runs", type=int, default=3,
                        help="runs per module and column (the median is shown)")
    parser.add_argument("--print", action="store_true",
                        help="print the table, leave docs/imports.md as it is")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs takes a whole number from 1 on")
    body = table(lazy_imports(), args.runs)
    if args.print:
        print(body)
    else:
        write(DOC, body)
        print(f"wrote {DOC.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
