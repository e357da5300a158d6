"""A local PostgreSQL for the sandbox's reference pipeline and the tests: ``initdb`` in a directory,
``postgres`` listening on a Unix socket in that directory (and, if asked, on a TCP port of 127.0.0.1 for
clients that speak only TCP, such as a JDBC driver), stopped by ``stop`` (fast shutdown, then
SIGKILL after a deadline).

PostgreSQL refuses to run as root; under root (a CI container) the server runs as the ``postgres`` user
Debian's package creates, in a directory under /tmp that user can reach.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from urllib.parse import quote

from eosctl.base import procs
from eosctl.base.errors import EosctlError

STATE_FILE = "postgres.json"
PORT = 5432  # only names the socket file (.s.PGSQL.5432) unless a TCP port is asked for
USER = "eosctl"
_SOCKET_MAX = 100  # sun_path holds 107 bytes; the socket file adds "/.s.PGSQL.5432"


@dataclass(frozen=True)
class LocalPostgres:
    pid: int
    root: str  # everything of this server: data/, the socket, the log
    owned_root: bool  # root was made for it (deleted on stop)
    password: str | None = None
    tcp_port: int | None = None  # also listening on 127.0.0.1:tcp_port (its socket file is named for it)

    @property
    def socket_dir(self) -> str:
        return self.root

    @property
    def port(self) -> int:
        return self.tcp_port or PORT

    def uri(self, db: str = "postgres", password: bool = True) -> str:
        secret = f":{quote(self.password, safe='')}" if self.password and password else ""
        return f"postgresql://{USER}{secret}@/{db}?host={quote(self.root, safe='/')}&port={self.port}"

    def tcp_uri(self, db: str = "postgres", password: bool = True) -> str:
        """The URI over 127.0.0.1:tcp_port, for clients that reach no Unix socket (JDBC)."""
        assert self.tcp_port is not None, "started without tcp_port"
        secret = f":{quote(self.password, safe='')}" if self.password and password else ""
        return f"postgresql://{USER}{secret}@127.0.0.1:{self.tcp_port}/{db}"


def bin_dir() -> Path:
    """The directory with initdb and postgres: on PATH, else Debian's newest /usr/lib/postgresql/N/bin."""
    on_path = shutil.which("initdb")
    if on_path and shutil.which("postgres"):
        return Path(on_path).parent
    versions = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"),
                      key=lambda p: int(p.parent.parent.name) if p.parent.parent.name.isdigit() else 0)
    if versions:
        return versions[-1].parent
    raise EosctlError("PostgreSQL's server programs (initdb, postgres) are not installed; install them "
                      "(Debian: apt-get install postgresql, or `make system-deps`)")


def _as_postgres_user() -> dict[str, int]:
    """Popen arguments that run the server as the postgres user when we are root; else none."""
    if os.geteuid() != 0:
        return {}

    try:
        entry = pwd.getpwnam("postgres")
    except KeyError:
        raise EosctlError("PostgreSQL refuses to run as root and there is no postgres user to run it as; "
                          "run as another user, or install Debian's postgresql package") from None
    return {"user": entry.pw_uid, "group": entry.pw_gid}


def start(home: Path | None = None, *, password: str | None = None, timeout: float = 60.0,
          tcp_port: int | None = None, die_with_parent: bool = False) -> LocalPostgres:
    """A new cluster with superuser ``eosctl`` (trust, or ``password`` with scram-sha-256), running;
    ``tcp_port``: listening on 127.0.0.1 at that port too (else on the Unix socket alone);
    ``die_with_parent``: killed when the calling thread dies (tests; the sandbox's server outlives eosctl).

    ``home``: where the server lives (its state file goes there too); None, or a directory PostgreSQL
    can't use (too long a path for a socket, or unreachable for the postgres user under root): a new
    directory under the temp dir, deleted by stop()."""
    binaries = bin_dir()
    run_as = _as_postgres_user()
    owned = home is None or len(str(home)) > _SOCKET_MAX or bool(run_as)
    if owned:
        root = Path(tempfile.mkdtemp(prefix="eosctl-pg-", dir="/tmp" if run_as else None))
    else:
        assert home is not None  # owned whenever there is none
        root = Path(home) / "postgres"
    root.mkdir(parents=True, exist_ok=True)
    if run_as:
        os.chown(root, run_as["user"], run_as["group"])
    os.chmod(root, 0o700)
    data, log = root / "data", root / "server.log"
    pwfile = root / "pw"
    proc = None
    try:
        auth = ["--auth=trust"]
        if (data / "PG_VERSION").exists():
            pass  # a cluster an earlier start() made here (the sandbox keeps its data across down/up)
        elif password is not None:
            pwfile.write_text(password + "\n")
            if run_as:
                os.chown(pwfile, run_as["user"], run_as["group"])
            auth = ["--auth=scram-sha-256", f"--pwfile={pwfile}"]
        if not (data / "PG_VERSION").exists():
            done = subprocess.run([str(binaries / "initdb"), "-D", str(data), "-U", USER, "-E", "UTF8",
                                   "--locale=C", "--no-sync", *auth], capture_output=True, text=True,
                                  timeout=timeout, user=run_as.get("user"), group=run_as.get("group"))
            pwfile.unlink(missing_ok=True)
            if done.returncode != 0:
                raise EosctlError(f"initdb failed: {(done.stderr or done.stdout).strip().splitlines()[-1]}")
        with open(log, "ab") as out:
            if run_as:
                os.chown(log, run_as["user"], run_as["group"])
            # A sandbox's server: no durability settings worth their cost, no TCP port unless asked.
            proc = subprocess.Popen(
                [str(binaries / "postgres"), "-D", str(data), "-k", str(root), "-p", str(tcp_port or PORT),
                 "-c", "listen_addresses=" + ("127.0.0.1" if tcp_port else ""), "-c", "fsync=off",
                 "-c", "synchronous_commit=off", "-c", "full_page_writes=off"],
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
                preexec_fn=procs.die_with_parent if die_with_parent else None, user=run_as.get("user"),
                group=run_as.get("group"))
        server = LocalPostgres(proc.pid, str(root), owned, password, tcp_port)
        _wait_ready(server, proc, log, timeout)
    except BaseException:
        if proc is not None:
            procs.stop(proc.pid, signal.SIGINT)
            proc.wait(timeout=5)
        if owned:
            shutil.rmtree(root, ignore_errors=True)
        raise
    if home is not None:
        Path(home).mkdir(parents=True, exist_ok=True)
        (Path(home) / STATE_FILE).write_text(json.dumps(asdict(server)))
    return server


def _wait_ready(server: LocalPostgres, proc: subprocess.Popen, log: Path, timeout: float) -> None:
    import psycopg  # lazy: see docs/imports.md

    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            raise EosctlError(f"postgres exited at start: {_last_line(log)}")
        try:
            psycopg.connect(server.uri(), connect_timeout=2).close()
            return
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise EosctlError(f"postgres did not accept connections within {timeout:g}s: "
                                  f"{_last_line(log)}") from None
        time.sleep(0.1)


def _last_line(log: Path) -> str:
    try:
        lines = [ln for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return "(no log)"
    return lines[-1] if lines else "(empty log)"


def running(home: Path) -> LocalPostgres | None:
    """The server ``start(home)`` left running, if it still runs."""
    try:
        server = LocalPostgres(**json.loads((Path(home) / STATE_FILE).read_text()))
    except (OSError, ValueError, TypeError):
        return None
    return server if procs.alive(server.pid) and Path(server.root, "data").is_dir() else None


def stop(server: LocalPostgres, home: Path | None = None, timeout: float = 10.0) -> None:
    """Fast shutdown (SIGINT: running transactions are rolled back), SIGKILL after ``timeout``."""
    procs.stop(server.pid, signal.SIGINT, timeout)
    if server.owned_root:
        shutil.rmtree(server.root, ignore_errors=True)
    if home is not None:
        (Path(home) / STATE_FILE).unlink(missing_ok=True)

