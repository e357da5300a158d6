"""Smoke check in a real terminal: `eosctl tui --snapshot FILE` in tmux at 80x24, keys in, screen out."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from tests.support.tui import CAPTURED, MANIFEST, SNAPSHOT

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")


def test_snapshot_in_a_real_terminal(tmux, tmp_path: Path):
    eosctl = Path(sys.executable).with_name("eosctl")
    env = {**os.environ, "TERM": "xterm-256color"}
    tmux.run(
        "new-session",
        "-d",
        "-s",
        tmux.session,
        "-x",
        "80",
        "-y",
        "24",
        "-e",
        f"TERM={env['TERM']}",
        f"{eosctl} tui --snapshot {SNAPSHOT}; echo EXITED $?; sleep 30",
    )
    (hang,) = json.loads(MANIFEST.read_text())["hanging"]
    lso, hw = hang["first_offset"], hang["last_offset"] + 1
    span = f"{lso}..{hw - 1}"
    # The status line says "captured ?" until the snapshot is read (a worker): wait for the time itself.
    screen = tmux.wait_for(f"captured {CAPTURED}")
    assert screen.splitlines()[0].startswith("  SNAPSHOT  tuiref")
    assert "RED because:" in tmux.wait_for("RED because:")
    tmux.run("send-keys", "-t", tmux.session, "4")
    # The tab header paints before the table rows on a slow machine: wait for the row itself.
    tmux.wait_for("blocked by open transactions")
    tmux.wait_for(f"tuiref.enriched[0]        {lso}  {lso}  {hw}")
    tmux.run("send-keys", "-t", tmux.session, "5")
    screen = tmux.wait_for(span)
    assert "open" in screen.split(span, 1)[1].splitlines()[0]
    for line in screen.splitlines():
        assert len(line) <= 80
    # What is typed in the filter is on screen while it is typed (issue 32: the input's border hid it).
    tmux.run("send-keys", "-t", tmux.session, "6", "/")
    tmux.wait_for("filter rows")  # the input's placeholder: it has the keys now
    tmux.run("send-keys", "-t", tmux.session, "-l", "ched[1")
    tmux.wait_until(lambda s: "ched[1" in [line.strip() for line in s.splitlines()], "the typed filter")
    tmux.run("send-keys", "-t", tmux.session, "Escape")  # alone: Escape and q at once read as alt+q
    tmux.wait_until(lambda s: "ched[1" not in [line.strip() for line in s.splitlines()], "the filter cleared")
    tmux.run("send-keys", "-t", tmux.session, "q")
    assert "EXITED 0" in tmux.wait_for("EXITED")
