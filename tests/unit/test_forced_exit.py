"""The TUI ends with os._exit once its grace is over (tui.ending): a thread still inside a
temp_dir block (an audit waiting on its dead pool, its frozen sink copy open) runs no `finally`, so the
copy is removed before the process ends (ci9 found one left under three xdist workers' load)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

PROGRAM = textwrap.dedent("""
    import sys, threading
    from eosctl.base.files import temp_dir
    from tui.ending import end_now

    inside = threading.Event()

    def audit():
        with temp_dir("eosctl-frozen-") as tmp:
            open(tmp + "/sink.duckdb", "w").close()
            inside.set()
            threading.Event().wait()  # never unwinds: its pool is gone

    threading.Thread(target=audit, daemon=True).start()
    assert inside.wait(10), "the thread never entered its temp dir"
    end_now(143)
""")


def test_a_forced_exit_removes_the_temp_dirs_threads_still_hold(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-c", PROGRAM], env={**os.environ, "TMPDIR": str(tmp_path)},
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 143, done.stderr
    assert os.listdir(tmp_path) == []
