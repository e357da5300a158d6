"""Fixtures for the TUI tests: the fixed incident snapshot (reference pipeline with the hanging, zombie and
duplicate-replay faults, written by `eosctl snapshot --max-age 0 --with-audit`; regenerate it with
make_reference.py) and a helper to drive the app headless."""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.support.tui import MANIFEST, SNAPSHOT, Tmux


@pytest.fixture
def manifest() -> dict:
    return json.loads(MANIFEST.read_text())


@pytest.fixture
def snapshot_app():
    from tui.app import EosApp
    from tui.sources import SnapshotSource

    return EosApp(SnapshotSource(str(SNAPSHOT)))


@pytest.fixture
def tmux():
    t = Tmux()
    yield t
    subprocess.run(["tmux", "-L", t.socket, "kill-server"], capture_output=True)
