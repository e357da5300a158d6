"""The type checker's ratchet: it checks every module, none with its errors ignored."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_no_module_is_ignored():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    assert [o["module"] for o in config.get("overrides", []) if o.get("ignore_errors")] == []
    assert not config.get("ignore_errors")


def test_make_lint_runs_the_type_checker():
    lint = (ROOT / "Makefile").read_text().split("\nlint:", 1)[1].split("\n\n", 1)[0]
    assert "$(BIN)/mypy" in lint
