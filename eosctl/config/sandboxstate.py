"""Where a running sandbox broker listens, read from the state file ``eosctl sandbox up`` leaves.

The state lives in a project state directory (``$EOSCTL_HOME`` or ``./.eosctl``): ``sandbox.json`` records
the pid, port, data directory and which broker runs (the embedded noida-db, or Apache Kafka from Maven
Central jars with `eosctl sandbox up --broker kafka`). The core reads it to resolve
``bootstrap_servers = "sandbox"``; starting and stopping the broker is ``eosctl.sandbox``'s.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from eosctl.base import procs
from eosctl.base.errors import EosctlError

STATE_FILE = "sandbox.json"


@dataclass(frozen=True)
class SandboxState:
    pid: int
    port: int
    data_dir: str
    log_file: str
    started_at: float
    broker: str = "noida"  # or "kafka" (Apache Kafka, one KRaft node)
    version: str | None = None  # Apache Kafka's version; None for noida-db

    @property
    def describe(self) -> str:
        return f"Apache Kafka {self.version}" if self.broker == "kafka" else "noida-db"

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"


def state_dir(explicit: str | Path | None = None) -> Path:
    if explicit is not None:
        return Path(explicit)
    return Path(os.environ.get("EOSCTL_HOME") or Path.cwd() / ".eosctl")


def _is_our_broker(state: SandboxState) -> bool:
    """The pid is alive and is the broker for this data dir (pids are reused after a crash)."""
    if not procs.alive(state.pid):
        return False
    try:
        cmdline = Path(f"/proc/{state.pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return True  # no /proc (not Linux): trust the pid
    # noida-db names its data dir as an argument; Kafka's JVM names files under it (its server.properties).
    return any(state.data_dir.encode() in arg for arg in cmdline)


def read_state(home: Path) -> SandboxState | None:
    path = home / STATE_FILE
    try:
        return SandboxState(**json.loads(path.read_text()))
    except (OSError, ValueError, TypeError):
        return None


def status(home: Path) -> SandboxState | None:
    """The running sandbox, or None; a stale state file (dead or reused pid) is removed."""
    state = read_state(home)
    if state is None:
        return None
    if _is_our_broker(state):
        return state
    (home / STATE_FILE).unlink(missing_ok=True)
    return None


def bootstrap_or_error(home: Path | None = None) -> str:
    state = status(state_dir(home))
    if state is None:
        raise EosctlError("the sandbox broker is not running; start it with `eosctl sandbox up`")
    return state.bootstrap
