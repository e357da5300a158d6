"""Every core module has tests a reader can find: a test file named for it, or a row in tests/README.md's
map naming files that exist."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("base", "config", "cluster", "txn", "report", "sink", "rules", "inspection", "output", "exporter")


def test_every_core_module_is_named_by_a_test_file_or_the_map():
    stems = {p.stem for p in (REPO / "tests").rglob("test_*.py")}
    rows = dict(re.findall(r"^\| (eosctl/\S+\.py) \| (.+) \|$", (REPO / "tests/README.md").read_text(), re.M))
    missing, stale = [], []
    for package in PACKAGES:
        for module in sorted((REPO / "eosctl" / package).glob("*.py")):
            if module.stem == "__init__":
                continue
            path = f"eosctl/{package}/{module.name}"
            named = {f"test_{module.stem}", f"test_{package}_{module.stem}"} & stems
            if not named and path not in rows:
                missing.append(path)
            stale += [t for t in rows.get(path, "").split() if not (REPO / t).is_file()]
    assert not missing, ("no test file named for these modules and no row in tests/README.md's map: "
                         + ", ".join(missing))
    assert not stale, "tests/README.md's map names files that don't exist: " + ", ".join(stale)
    assert not [r for r in rows if not (REPO / r).is_file()], "the map names modules that don't exist"
