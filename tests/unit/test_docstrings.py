"""Docstrings are whole and name what is there: a package's face (its __init__.py docstring) names no module
that lives in another package, a face that lists its modules lists every one, a dotted name or a path in
any docstring of eosctl/, auditors/ or tui/ points at a module, a name or a file that exists, and no
sentence stops short (a paragraph ending mid-clause, a word left alone on a line by a rewrap). A package
move used to leave all four behind. Read from the source with ast; nothing is imported.
"""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("eosctl", "auditors", "tui")
# The faces that list their modules (the others say what the package is for, in prose): each names all.
LISTING = ("auditors", "eosctl/config", "eosctl/exporter", "eosctl/output", "eosctl/rules")
# A file a docstring names by a dotted-looking name (eosctl.toml), not a module.
# A path a docstring names, from the repository's root.
PATH = re.compile(r"(?<![\w./-])((?:eosctl|auditors|tui|tests|benchmarks|docs|sample_configs)/[\w/.-]*\w)")
FILE_ENDINGS = re.compile(r"\.(toml|json|md|duckdb|parquet|yaml|txt|csv)$")


def _faces() -> dict[str, str]:
    """Package folder (relative) -> its face."""
    return {str(init.parent.relative_to(ROOT)): ast.get_docstring(ast.parse(init.read_text())) or ""
            for package in PACKAGES for init in sorted((ROOT / package).rglob("__init__.py"))}


def members(folder: Path) -> set[str]:
    """The modules and subpackages of a package folder, by their last name."""
    return ({p.stem for p in folder.glob("*.py") if p.stem != "__init__"}
            | {p.name for p in folder.iterdir() if (p / "__init__.py").is_file()})


def _defined(tree: ast.AST) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names |= {(alias.asname or alias.name).split(".")[0] for alias in node.names}
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
    return names


@cache
def _module_file(dotted: str) -> Path | None:
    path = ROOT.joinpath(*dotted.split("."))
    for candidate in (path.with_suffix(".py"), path / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


@cache
def _names_in(dotted: str) -> frozenset[str]:
    path = _module_file(dotted)
    return frozenset(_defined(ast.parse(path.read_text()))) if path else frozenset()


@cache
def _every_module_name() -> frozenset[str]:
    return frozenset(name for package in PACKAGES for init in (ROOT / package).rglob("__init__.py")
                     for name in members(init.parent) | {init.parent.name})


def _command_names() -> set[str]:
    """eosctl's commands, one module each (audit_cmd.py: `audit`): a face may name `report` meaning the
    command."""
    return {path.stem.removesuffix("_cmd") for path in (ROOT / "eosctl" / "commands").glob("*_cmd.py")}


def named_words(face: str) -> set[str]:
    """The names a face writes as code (``x`` or `x`) or as the first word of an indented listing line."""
    quoted = set(re.findall(r"``(\w+)``", face)) | set(re.findall(r"(?<!`)`(\w+)`(?!`)", face))
    listed = set(re.findall(r"^ {2,}(\w+) {2,}\S", face, re.M))
    return quoted | listed


def elsewhere(face: str, here: set[str], defined: set[str], commands: set[str]) -> list[str]:
    """Names in a face that are modules of some other package, and neither a module of this one, a name
    defined in it, nor a command."""
    return sorted(word for word in named_words(face) if word in _every_module_name()
                  and word not in here | defined | commands)


def unnamed(face: str, here: set[str]) -> list[str]:
    """The modules of a package its face does not name (as a word, alone or at the end of a dotted name)."""
    return sorted(m for m in here if not re.search(rf"(?<![\w/]){re.escape(m)}(?!\w)", face))


def broken_references(doc: str) -> list[str]:
    """Dotted names (eosctl.x.y, auditors.x, tui.x) that are no module, nor a name defined in the module
    they start with, and paths (eosctl/x.py, docs/x.md, ...) to no file or folder."""
    bad = []
    for ref in re.findall(r"(?<![\w./`-])((?:eosctl|auditors|tui)(?:\.\w+)+)", doc):
        if FILE_ENDINGS.search(ref):
            continue
        parts = ref.split(".")
        known = len(parts)
        while known > 1 and _module_file(".".join(parts[:known])) is None:
            known -= 1
        if known < len(parts) and parts[known] not in _names_in(".".join(parts[:known])):
            bad.append(ref)
    for ref in re.findall(PATH, doc):
        if not (ROOT / ref).exists():
            bad.append(ref)
    return bad


def _prose(paragraph: str) -> bool:
    """Prose, not a listing, a table, an example or a click help block (``\\b``)."""
    last = paragraph.rstrip().split("\n")[-1]
    return not (paragraph.startswith("\b") or last.startswith((" ", "-", "*", "|", "$"))
                or re.match(r"\S+ {2,}", last) or re.match(r"\d+\. ", last))


def cut_short(doc: str) -> list[str]:
    """Where a docstring stops short: a prose paragraph that does not end a sentence, and a word or two
    left alone on a line between a full line and the rest of its sentence (what a rewrap leaves)."""
    bad = []
    for paragraph in re.split(r"\n\s*\n", doc.strip()):
        if paragraph.strip() and _prose(paragraph) and paragraph.rstrip()[-1] not in ".!?:;)`'\"]":
            bad.append(f"ends mid-sentence: ...{paragraph.rstrip()[-50:]!r}")
        if "\b" in paragraph:
            continue
        lines = paragraph.split("\n")
        for before, line, after in zip(lines, lines[1:], lines[2:], strict=False):
            words = line.strip()
            rest = after.strip()
            if (len(before) >= 85 and words and len(words.split()) <= 2 and rest
                    and not words.endswith(".") and not words.startswith(("-", "*", "|"))
                    and not rest.startswith(("-", "*", "|")) and not re.match(r"\d+\. ", rest)):
                bad.append(f"a word left alone: {words!r}")
    return bad


def _docstrings() -> list[tuple[str, str]]:
    """(file:line, docstring) of every module, class and function of the packages."""
    found = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            tree = ast.parse(path.read_text())
            nodes = [tree, *(n for n in ast.walk(tree)
                             if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef))]
            where = str(path.relative_to(ROOT))
            found += [(f"{where}:{getattr(node, 'lineno', 1)}", ast.get_docstring(node) or "")
                      for node in nodes]
    return found


def test_no_docstring_stops_short():
    bad = [f"{where}: {problem}" for where, doc in _docstrings() for problem in cut_short(doc)]
    assert not bad, "docstrings cut short:\n" + "\n".join(bad)


def test_faces_name_no_module_of_another_package():
    commands = _command_names()
    bad = {}
    for folder, face in _faces().items():
        here = members(ROOT / folder)
        defined = set().union(*(_names_in(f"{folder.replace('/', '.')}.{m}") for m in here),
                              _names_in(folder.replace("/", ".")))
        if found := elsewhere(face, here, defined, commands):
            bad[folder] = found
    assert not bad, f"package faces naming modules that live elsewhere (moved?): {bad}"


def test_a_face_that_lists_its_modules_lists_every_one():
    faces = _faces()
    bad = {folder: found for folder in LISTING if (found := unnamed(faces[folder], members(ROOT / folder)))}
    assert not bad, f"modules their package's face does not name: {bad}"


def test_every_docstring_names_modules_and_files_that_exist():
    bad = [f"{where}: {ref}" for where, doc in _docstrings() for ref in broken_references(doc)]
    assert not bad, "docstrings naming modules, names or files that don't exist:\n" + "\n".join(bad)


def test_the_rules_catch_a_moved_module_a_missing_one_and_a_stale_reference():
    assert elsewhere("the root causes (``rootcauses``) and ``reconcile``", {"reconcile"}, set(), set()) == [
        "rootcauses"]
    assert elsewhere("`audit` is the entry point", set(), {"audit"}, set()) == []
    assert elsewhere("    terminal    the console\n    findings    moved", {"terminal"}, set(), set()) == [
        "findings"]
    assert unnamed("``http`` and eosctl.exporter.metrics", {"http", "metrics", "loops"}) == ["loops"]
    assert broken_references("islands as eosctl.sink.OffsetIslands or eosctl.sink.base.OffsetIsland") == [
        "eosctl.sink.OffsetIslands"]
    assert broken_references("see eosctl/rules/rootcauses.py, eosctl/report/rootcauses.py, eosctl.toml") == [
        "eosctl/rules/rootcauses.py"]


def test_the_rule_catches_a_sentence_cut_and_a_word_left_alone():
    full = "x" * 90
    assert cut_short("One line.\n\nA sentence that stops at the") == [
        "ends mid-sentence: ...'A sentence that stops at the'"]
    assert cut_short(f"{full}\npartition's\nlog scanned.") == ["a word left alone: \"partition's\""]
    assert cut_short(f"{full}\n- a list item\n- and another.\n\n\\b\n    eosctl audit -c eosctl.toml") == []
    assert cut_short(f"{full}\nbehind.\nNext sentence.") == []
