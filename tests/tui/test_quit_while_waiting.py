"""`q` and a closed terminal end the live TUI at once whatever a refresh is waiting for (issue 40): here a
broker address that accepts TCP and never answers (a black hole), with --timeout 300, so the first refresh
waits five minutes. Before, `q` waited for the refresh's thread, and a terminal closed meanwhile left the
process running without one (parent 1)."""

from __future__ import annotations

import shutil
import socket
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")

# Far below the refresh's own wait (300 s): the TUI quitting by itself, not the wait ending.
QUIT_DEADLINE_S = 60.0


@pytest.fixture
def black_hole():
    """A loopback port whose connections the kernel accepts (listen backlog) and nobody ever answers."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(64)
        yield f"127.0.0.1:{s.getsockname()[1]}"


def _start(tmux, address: str, then: str = "") -> None:
    eosctl = Path(sys.executable).with_name("eosctl")
    command = (f"{then}{eosctl} tui --bootstrap {address} --topic orders --timeout 300; echo EXITED $?; "
               "sleep 30")
    tmux.run("new-session", "-d", "-s", tmux.session, "-x", "100", "-y", "30", "-e", "TERM=xterm-256color",
             command)
    tmux.wait_for("refreshing", timeout=QUIT_DEADLINE_S)  # the app runs, its first refresh is waiting


def test_q_quits_while_a_refresh_waits(tmux, black_hole):
    _start(tmux, black_hole)
    tmux.run("send-keys", "-t", tmux.session, "q")
    assert "EXITED 0" in tmux.wait_for("EXITED", timeout=QUIT_DEADLINE_S)


def test_a_closed_terminal_ends_it_while_a_refresh_waits(tmux, black_hole):
    _start(tmux, black_hole, then="exec ")  # the pane's process is eosctl itself
    pid = int(tmux.run("display-message", "-p", "-t", tmux.session, "#{pane_pid}").strip())
    tmux.run("kill-session", "-t", tmux.session)  # the terminal closes: SIGHUP
    deadline = time.monotonic() + QUIT_DEADLINE_S
    while Path(f"/proc/{pid}").exists() and _state(pid) != "Z":
        assert time.monotonic() < deadline, f"eosctl tui (pid {pid}) still runs without its terminal"
        time.sleep(0.1)


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "gone"
