"""The embedded sandbox broker: noida-db (Kafka protocol only) on a loopback port (the last one it had).

Its state file (``eosctl.config.sandboxstate``) records the pid, port and data directory so other commands and
the demo config find the broker.
"""

from __future__ import annotations

import fcntl
import json
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path

from eosctl.base import procs
from eosctl.base.errors import EosctlError
from eosctl.base.files import write_replacing
from eosctl.config import sandboxstate
from eosctl.config.sandboxstate import STATE_FILE, SandboxState, bootstrap_or_error, state_dir
from eosctl.sandbox.net import free_port, port_open, wait_for_metadata

__all__ = ["SandboxState", "bootstrap_or_error", "state_dir", "up", "down", "free_port", "port_open"]


def broker_binary() -> Path:
    try:
        import noida_db  # lazy: optional, the [sandbox] extra's noida-db
    except ImportError:
        raise EosctlError(
            "the sandbox broker is not installed; run: pip install 'eosctl[sandbox]' (or `make setup`)"
        ) from None
    binary = Path(noida_db.__file__).parent / "noida-db"
    if not binary.exists():
        raise EosctlError(f"noida-db is installed but its binary is missing at {binary}; reinstall noida-db")
    return binary


# The port the last sandbox of this home listened on: `up` takes it again when it is free, so a config,
# a TUI, an exporter or `lag --watch` pointed at the sandbox finds it after `down` and `up`.
PORT_FILE = "sandbox.port"
LOCK_FILE = "sandbox.lock"


@contextmanager
def _locked(home: Path, timeout: float) -> Iterator[None]:
    """One `up` or `down` of this home at a time: two racing `up`s started two brokers on one data
    directory, and the loser reported the broker's own "already running" (exit 2) although `up` does
    nothing when the sandbox runs. The lock is the kernel's (flock): a killed holder releases it."""
    with open(home / LOCK_FILE, "a+b") as f:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise EosctlError(f"another `eosctl sandbox` command holds {home / LOCK_FILE} for more "
                                      f"than {timeout:.0f}s; wait for it, or stop it") from None
                time.sleep(0.05)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _last_port(home: Path) -> int | None:
    try:
        text = (home / PORT_FILE).read_text().strip()
    except OSError:
        return None
    return int(text) if text.isascii() and text.isdigit() and 0 < int(text) < 65536 else None


def up(home: Path, port: int | None = None, timeout: float = 30.0) -> tuple[SandboxState, bool]:
    """Start the sandbox (or return the one already running). Returns (state, started_now).

    Without ``port``, the last sandbox's port if it is free, else a free one."""
    home.mkdir(parents=True, exist_ok=True)
    with _locked(home, timeout + 5):
        return _up(home, port, timeout)


def _up(home: Path, port: int | None, timeout: float) -> tuple[SandboxState, bool]:
    running = sandboxstate.status(home)
    if running is not None:
        if port is not None and port != running.port:
            raise EosctlError(
                f"the sandbox already runs on port {running.port}; "
                "run `eosctl sandbox down` first to change it"
            )
        return running, False
    if port is None:
        last = _last_port(home)
        port = last if last is not None and not port_open(last) else free_port()
    elif port_open(port):
        raise EosctlError(
            f"port {port} is already in use; choose another with --port or omit it for a free one"
        )
    data_dir = (home / "broker-data").resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    log_file = home / "broker.log"
    # Start the binary itself (the noida-db console script doesn't forward SIGTERM), in its own session
    # so a Ctrl-C in the terminal that started it doesn't kill the sandbox.
    with open(log_file, "ab") as log:
        proc = subprocess.Popen(
            [str(broker_binary()), "start", "--only", "kafka", "--kafka-port", str(port),
             "--host", "127.0.0.1", "--data-dir", str(data_dir)],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
        )
    state = SandboxState(pid=proc.pid, port=port, data_dir=str(data_dir), log_file=str(log_file),
                         started_at=time.time())
    try:
        deadline = time.monotonic() + timeout
        while not port_open(port):
            if proc.poll() is not None:
                tail = log_file.read_text(errors="replace").strip().splitlines()[-1:] or ["no output"]
                raise EosctlError(f"the sandbox broker exited at start ({tail[0]}); see {log_file}")
            if time.monotonic() > deadline:
                raise EosctlError(
                    f"the sandbox broker did not open port {port} within {timeout:.0f}s; see {log_file}"
                )
            time.sleep(0.05)
        wait_for_metadata(state.bootstrap, timeout=max(1.0, deadline - time.monotonic()))
    except BaseException:
        procs.stop(proc.pid)
        raise
    write_replacing(str(home / STATE_FILE), json.dumps(asdict(state), indent=2))
    write_replacing(str(home / PORT_FILE), f"{port}\n")
    return state, True


def down(home: Path) -> SandboxState | None:
    """Stop the sandbox by its recorded pid. Returns what was stopped, or None if nothing ran."""
    if not home.is_dir():
        return None
    with _locked(home, 60.0):
        state = sandboxstate.status(home)
        if state is None:
            return None
        # Apache Kafka's controlled shutdown (SIGTERM) takes longer than noida-db's.
        procs.stop(state.pid, timeout=30.0 if state.broker == "kafka" else 10.0)
        (home / STATE_FILE).unlink(missing_ok=True)
        return state
