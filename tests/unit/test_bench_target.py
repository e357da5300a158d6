"""`make bench` and docs/benchmarks.md name the same benchmarks: every script is run and documented."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _long() -> set[str]:
    makefile = (ROOT / "Makefile").read_text()
    return set(re.search(r"^BENCH_LONG := (.*)$", makefile, re.M).group(1).split())


def _scripts() -> set[str]:
    return {p.name for p in (ROOT / "benchmarks").glob("*_bench.py")}


def _doc_table() -> set[str]:
    doc = (ROOT / "docs" / "benchmarks.md").read_text()
    start = doc.index("`make bench` runs:")
    table = doc[start:doc.index("`make bench-long` runs `", start)]
    return set(re.findall(r"^\| `([a-z_]+_bench\.py)` \|", table, re.M))


def test_make_bench_runs_every_benchmark_the_docs_list_as_run():
    assert _doc_table() == _scripts() - _long()


def test_the_long_benchmarks_are_named_in_the_docs_and_exist():
    doc = (ROOT / "docs" / "benchmarks.md").read_text()
    line = doc[doc.index("`make bench-long` runs `"):].split("\n", 1)[0]
    assert _long() and _long() <= _scripts()
    assert set(re.findall(r"`([a-z_]+_bench\.py)`", line)) == _long()


def test_make_bench_measures_the_import_cost_table_too():
    makefile = (ROOT / "Makefile").read_text()
    recipe = makefile[makefile.index("\nbench: "):makefile.index("\nbench-long:")]
    assert "$(BIN)/python benchmarks/import_costs.py" in recipe
    assert (ROOT / "benchmarks" / "import_costs.py").is_file()
