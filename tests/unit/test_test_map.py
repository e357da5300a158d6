"""Every module of eosctl/ (each package, commands/ and sandbox/ too), auditors/ and tui/ has tests a
reader can find: a test file named for it (test_<module>.py or test_<package>_<module>.py), a row in
tests/README.md's map, or a declared family there (a glob of modules, the files that test them, and why
they go together)."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ROOTS = ("eosctl", "auditors", "tui")
README = (REPO / "tests/README.md").read_text()


def fnmatch(path: str, glob: str) -> bool:
    """A family's glob: `*` stays within one folder (`eosctl/sandbox/*.py` is not `sandbox/pipeline/`)."""
    return re.fullmatch(re.escape(glob).replace(r"\*", "[^/]*"), path) is not None


def modules() -> list[str]:
    return sorted(str(m.relative_to(REPO)) for root in ROOTS for m in (REPO / root).rglob("*.py")
                  if m.stem != "__init__")


def families() -> list[tuple[str, list[str], str]]:
    """(module glob, test files, why) of the README's family table."""
    rows = re.findall(r"^\| `((?:eosctl|auditors|tui)/[^`]+)` \| (.+?) \| (.*) \|$", README, re.M)
    return [(glob, tests.split(), why.strip()) for glob, tests, why in rows]


def test_every_module_is_named_by_a_test_file_the_map_or_a_family():
    stems = {p.stem for p in (REPO / "tests").rglob("test_*.py")}
    rows = dict(re.findall(r"^\| ((?:eosctl|auditors|tui)/\S+\.py) \| (.+) \|$", README, re.M))
    fams = families()
    missing, stale = [], []
    for path in modules():
        module = Path(path)
        named = {f"test_{module.stem}", f"test_{module.parent.name}_{module.stem}"} & stems
        if not named and path not in rows and not any(fnmatch(path, glob) for glob, _, _ in fams):
            missing.append(path)
        stale += [t for t in rows.get(path, "").split() if not (REPO / t).is_file()]
    assert not missing, ("no test file named for these modules, no row in tests/README.md's map and no "
                         "family: " + ", ".join(missing))
    assert not stale, "tests/README.md's map names files that don't exist: " + ", ".join(stale)
    assert not [r for r in rows if not (REPO / r).is_file()], "the map names modules that don't exist"


def test_each_family_names_modules_and_test_files_that_exist_and_says_why():
    assert families(), "tests/README.md has no family table"
    every = modules()
    for glob, tests, why in families():
        assert [m for m in every if fnmatch(m, glob)], f"the family {glob} matches no module"
        assert not [t for t in tests if not (REPO / t).is_file()], f"the family {glob} names a missing file"
        assert len(why.split()) >= 3, f"the family {glob} does not say why its modules go together"
