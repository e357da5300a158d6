"""The import graph of eosctl, auditors and tui, read from the source with ast (nothing is imported).

Layering: the core (``eosctl.*`` but the command line, ``eosctl.cli`` and ``eosctl.commands.*``, which
wires everything together) is what the auditors and the TUI build on, so it never imports them; the
auditors and the TUI are two independent front ends, so neither imports the other. These hold for
imports at any depth (inside functions, under TYPE_CHECKING): a lazy import is still a dependency.

No cycle among the imports that run: top-level ones (when a module is imported) and those inside
functions (when the function runs) alike, so any module can be imported first and no module depends on
itself through a lazy import. Imports under ``if TYPE_CHECKING:`` never run, but they still say which
module's names another one needs: no cycle through them either (a type-only cycle is two modules that
should be one, or a third that both need).
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("eosctl", "auditors", "tui")
COMMAND_LINE = ("eosctl.cli", "eosctl.__main__", "eosctl.commands")
# The servers eosctl starts (brokers, PostgreSQL) and the reference pipeline: built on the core, wired in by
# the command line, never imported by the core, the auditors or the TUI.
SANDBOX = "eosctl.sandbox"


@dataclass(frozen=True)
class Edge:
    source: str  # the importing module
    target: str  # the imported module (x.y for `from x import y` when y is a submodule)
    line: int
    top_level: bool  # runs when the source module is imported
    runs: bool = True  # False only under TYPE_CHECKING (a function-level import runs when called)

    def __str__(self) -> str:
        return f"{self.source}:{self.line} imports {self.target}"


def modules(root: Path, packages: tuple[str, ...] = PACKAGES) -> dict[str, Path]:
    """Module name -> file, for every .py file of the packages (a package is its __init__.py)."""
    found = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def edges(root: Path, packages: tuple[str, ...] = PACKAGES) -> list[Edge]:
    """Every import statement of the packages' modules, as edges to the modules it names."""
    known = modules(root, packages)
    out = []
    for name, path in known.items():
        is_package = path.name == "__init__.py"
        tree = ast.parse(path.read_text(), str(path))
        for node, top, runs in _imports(tree.body, top=True):
            for target in _targets(node, name, is_package, known):
                out.append(Edge(name, target, node.lineno, top, runs))
    return out


Found = Iterator[tuple[ast.Import | ast.ImportFrom, bool, bool]]


@functools.cache
def _project_edges() -> tuple[Edge, ...]:
    return tuple(edges(ROOT))


def project_edges() -> list[Edge]:
    """The project's edges, parsed once per test session (each parse of every file took ~3 s)."""
    return list(_project_edges())


def _imports(body: list[ast.stmt], top: bool, runs: bool = True) -> Found:
    """Import statements at any depth, with (top, runs): ``top`` stays True only through module-level
    statements that run at import time (if / try / with blocks), not through functions, classes' methods
    or TYPE_CHECKING; ``runs`` is False only under TYPE_CHECKING."""
    for stmt in body:
        if isinstance(stmt, ast.Import | ast.ImportFrom):
            yield stmt, top, runs
            continue
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
            inner_top = False
        elif isinstance(stmt, ast.If) and _is_type_checking(stmt.test):
            yield from _imports(stmt.body, False, False)
            yield from _imports(stmt.orelse, top, runs)
            continue
        else:
            inner_top = top
        for child in ast.iter_child_nodes(stmt):
            if isinstance(child, ast.stmt):
                yield from _imports([child], inner_top, runs)
            else:
                yield from _nested(child, inner_top, runs)


def _nested(node: ast.AST, top: bool, runs: bool) -> Found:
    """Statements hidden inside expression-level nodes (except handlers, match cases, ...)."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.stmt):
            yield from _imports([child], top, runs)
        else:
            yield from _nested(child, top, runs)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _targets(node: ast.Import | ast.ImportFrom, module: str, is_package: bool,
             known: dict[str, Path]) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:
        # Relative to the importing module's package: its own name for an __init__, else its parent.
        package = module.split(".") if is_package else module.split(".")[:-1]
        anchor = package[:len(package) - (node.level - 1)] if node.level > 1 else package
        base = ".".join([*anchor, *([base] if base else [])])
    targets = []
    for alias in node.names:
        sub = f"{base}.{alias.name}"
        targets.append(sub if sub in known else base)
    return list(dict.fromkeys(targets))


def layer(module: str) -> str:
    """"core", "cli", "sandbox", "auditors", "tui", or the top-level name of a module outside the project."""
    top = module.split(".")[0]
    if top != "eosctl":
        return top
    if module == SANDBOX or module.startswith(SANDBOX + "."):
        return "sandbox"
    return "cli" if any(module == m or module.startswith(m + ".") for m in COMMAND_LINE) else "core"


def crossings(all_edges: list[Edge], source: str, forbidden: set[str]) -> list[str]:
    """The imports from layer ``source`` into any of the ``forbidden`` layers."""
    return [str(e) for e in all_edges if layer(e.source) == source and layer(e.target) in forbidden]


def cycles(all_edges: list[Edge], layers: set[str], lazy: bool = False,
           typed: bool = False) -> list[list[str]]:
    """Cycles among the modules of ``layers`` through top-level imports, or with ``lazy`` through every
    import that runs (function-level ones too), or with ``typed`` through every import, TYPE_CHECKING ones
    included (Tarjan's strongly connected components with more than one
    module, or a module importing itself), each sorted."""
    graph: dict[str, set[str]] = {}
    for e in all_edges:
        counted = typed or (e.runs if lazy else e.top_level)
        if counted and layer(e.source) in layers and layer(e.target) in layers:
            graph.setdefault(e.source, set()).add(e.target)
            graph.setdefault(e.target, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1 or v in graph[v]:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


# The core's packages from the bottom up: each imports only packages below it (and itself), so the
# architecture reads in one direction. The top of eosctl/ holds only the command line and these packages.
CORE_LAYERS = (
    "base", "config", "cluster", "txn", "report", "sink", "rules", "inspection", "output", "exporter",
)
TOP_LEVEL_MODULES = {"eosctl", "eosctl.cli", "eosctl.__main__"}


def core_package(module: str) -> str | None:
    """The core package (one of CORE_LAYERS) a module of eosctl belongs to, or None."""
    parts = module.split(".")
    return parts[1] if parts[0] == "eosctl" and len(parts) > 1 and parts[1] in CORE_LAYERS else None


def upward(all_edges: list[Edge]) -> list[str]:
    """Imports from a core package into a package above it in CORE_LAYERS (at any depth, lazy or typed)."""
    out = []
    for e in all_edges:
        src, dst = core_package(e.source), core_package(e.target)
        if src and dst and CORE_LAYERS.index(dst) > CORE_LAYERS.index(src):
            out.append(f"{e} ({src} is below {dst})")
    return out


# --- the project ---------------------------------------------------------------------------------------


def test_the_graph_sees_the_project() -> None:
    """The parser finds the modules and the imports it must judge (else the checks below pass vacuously)."""
    all_edges = project_edges()
    names = {(e.source, e.target) for e in all_edges}
    # from eosctl.cluster.wire import WireClient
    assert ("eosctl.inspection.capture", "eosctl.cluster.wire") in names
    # from eosctl.inspection import lag as lag_mod (a submodule)
    assert ("eosctl.inspection.capture", "eosctl.inspection.lag") in names
    assert ("tui.sources", "eosctl.inspection.capture") in names
    assert ("eosctl.exporter.http", "eosctl.exporter.metrics") in names
    assert ("eosctl.commands.tui_cmd", "tui.app") in names  # inside a function: the command line may
    assert ("eosctl.commands.sandbox_cmd", "eosctl.sandbox.noida") in names
    assert {layer(e.source) for e in all_edges} == {"core", "cli", "sandbox", "auditors", "tui"}


def test_the_core_never_imports_the_auditors_the_tui_or_the_sandbox() -> None:
    assert crossings(project_edges(), "core", {"auditors", "tui", "cli", "sandbox"}) == []


def test_the_sandbox_builds_on_the_core_only() -> None:
    assert crossings(project_edges(), "sandbox", {"auditors", "tui", "cli"}) == []
    all_edges = project_edges()
    assert crossings(all_edges, "auditors", {"sandbox"}) == []
    assert crossings(all_edges, "tui", {"sandbox"}) == []


def test_the_auditors_and_the_tui_never_import_each_other() -> None:
    all_edges = project_edges()
    assert crossings(all_edges, "auditors", {"tui"}) == []
    assert crossings(all_edges, "tui", {"auditors"}) == []


def test_the_core_has_no_import_cycle() -> None:
    assert cycles(project_edges(), {"core"}) == []


def test_the_whole_project_has_no_import_cycle() -> None:
    assert cycles(project_edges(), {"core", "cli", "sandbox", "auditors", "tui"}) == []


def test_no_cycle_either_through_imports_inside_functions() -> None:
    """A lazy import only hides a cycle from the interpreter (e.g. the command line's completion asking
    eosctl.cli, which imports it, for the root command)."""
    assert cycles(project_edges(), {"core", "cli", "sandbox", "auditors", "tui"}, lazy=True) == []


def test_no_cycle_either_through_type_only_imports() -> None:
    assert cycles(project_edges(), {"core", "cli", "sandbox", "auditors", "tui"}, typed=True) == []


# --- the checks themselves, on planted trees -----------------------------------------------------------


def plant(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_a_lazy_or_type_checking_import_of_the_tui_is_a_crossing(tmp_path: Path) -> None:
    root = plant(tmp_path, {
        "eosctl/__init__.py": "",
        "eosctl/a.py": "def f():\n    from tui import app\n",
        "eosctl/b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import auditors.job\n",
        "eosctl/c.py": "from . import a\n",
        "eosctl/cli.py": "from tui import app\n",  # the command line may
        "eosctl/d.py": "from .commands import x_cmd\n",
        "eosctl/commands/__init__.py": "", "eosctl/commands/x_cmd.py": "",
        "tui/__init__.py": "", "tui/app.py": "",
        "auditors/__init__.py": "", "auditors/job.py": "from ..tui import app\n",
    })
    all_edges = edges(root)
    assert crossings(all_edges, "core", {"auditors", "tui", "cli"}) == [
        "eosctl.a:2 imports tui.app", "eosctl.b:3 imports auditors.job",
        "eosctl.d:1 imports eosctl.commands.x_cmd"]
    assert crossings(all_edges, "auditors", {"tui"}) == ["auditors.job:1 imports tui.app"]
    assert crossings(all_edges, "tui", {"auditors"}) == []


def test_a_cycle_through_top_level_imports_is_named(tmp_path: Path) -> None:
    root = plant(tmp_path, {
        "eosctl/__init__.py": "",
        "eosctl/a.py": "from eosctl import b\n",  # b is a submodule: eosctl.b
        "eosctl/b.py": "try:\n    from .sub.c import x\nexcept ImportError:\n    pass\n",
        "eosctl/sub/__init__.py": "",
        "eosctl/sub/c.py": "import eosctl.a\n",
        "eosctl/d.py": "def f():\n    import eosctl.e\n",  # lazy: d <-> e is no cycle
        "eosctl/e.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from eosctl import d\n",
        "eosctl/f.py": "def f():\n    import eosctl.g\n",  # lazy both ways: a cycle that runs
        "eosctl/g.py": "import eosctl.f\n",
    })
    assert cycles(edges(root), {"core"}) == [["eosctl.a", "eosctl.b", "eosctl.sub.c"]]
    assert cycles(edges(root), {"core"}, lazy=True) == [["eosctl.a", "eosctl.b", "eosctl.sub.c"],
                                                        ["eosctl.f", "eosctl.g"]]
    # d -> e lazily, e -> d for its types only: a cycle of what each needs
    assert cycles(edges(root), {"core"}, typed=True) == [["eosctl.a", "eosctl.b", "eosctl.sub.c"],
                                                         ["eosctl.d", "eosctl.e"], ["eosctl.f", "eosctl.g"]]


def test_the_core_packages_import_only_downwards() -> None:
    assert upward(project_edges()) == []


# The rules only decide (eosctl/rules/__init__.py): what they judge is read by the auditors' driver
# (auditors.passes) and handed in. Of the cluster package they may import its model, of the sink package
# nothing, and no client of Kafka or reader of a sink (types under TYPE_CHECKING aside).
RULES_MAY_IMPORT_OF_CLUSTER = {"eosctl.cluster", "eosctl.cluster.model"}
READERS = ("eosctl.sink", "eosctl.cluster", "confluent_kafka", "duckdb", "pyarrow", "pyspark", "deltalake",
           "pyiceberg", "psycopg")


def reads_in_rules(all_edges: list[Edge]) -> list[str]:
    """Imports that run from a module of eosctl/rules/ into a client of Kafka or a reader of a sink."""
    return [str(e) for e in all_edges
            if e.runs and (e.source == "eosctl.rules" or e.source.startswith("eosctl.rules."))
            and e.target not in RULES_MAY_IMPORT_OF_CLUSTER
            and any(e.target == r or e.target.startswith(r + ".") for r in READERS)]


def test_no_module_in_rules_imports_a_client_or_a_sink_reader() -> None:
    assert reads_in_rules(project_edges()) == []


def test_a_reader_imported_by_a_rule_is_named(tmp_path: Path) -> None:
    root = plant(tmp_path, {"eosctl/__init__.py": "", "eosctl/rules/__init__.py": "",
                            "eosctl/rules/hop.py": "from eosctl.cluster.model import TP\n"
                                                   "def f():\n"
                                                   "    from eosctl.sink.kafka_topic import HopRows\n",
                            "eosctl/sink/__init__.py": "", "eosctl/sink/kafka_topic.py": "",
                            "eosctl/cluster/__init__.py": "", "eosctl/cluster/model.py": ""})
    assert reads_in_rules(edges(root, ("eosctl",))) == ["eosctl.rules.hop:3 imports eosctl.sink.kafka_topic"]


def test_no_core_module_sits_at_the_top_but_the_command_line() -> None:
    loose = sorted(name for name, path in modules(ROOT, ("eosctl",)).items()
                   if name.count(".") == 1 and path.name != "__init__.py" and name not in TOP_LEVEL_MODULES)
    assert loose == [], f"core modules outside a package: {loose}"
    packages = {p.name for p in (ROOT / "eosctl").iterdir() if (p / "__init__.py").exists()}
    assert packages == {*CORE_LAYERS, "commands", "sandbox"}


def test_an_upward_import_is_named(tmp_path: Path) -> None:
    root = plant(tmp_path, {"eosctl/__init__.py": "", "eosctl/base/__init__.py": "",
                            "eosctl/base/errors.py": "from eosctl.report import findings\n",
                            "eosctl/report/__init__.py": "", "eosctl/report/findings.py": ""})
    assert upward(edges(root, ("eosctl",))) == [
        "eosctl.base.errors:1 imports eosctl.report.findings (base is below report)"]
