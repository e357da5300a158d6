"""`eosctl sandbox up --broker kafka`: Apache Kafka (one KRaft node from Maven Central jars,
``eosctl.sandbox.apache_kafka``) as the sandbox broker, recorded in the same state file as the embedded
noida-db sandbox (``eosctl.config.sandboxstate``), so `bootstrap_servers = "sandbox"`, `sandbox status` and
`sandbox down` work for it alike.

It starts empty each time (a fresh KRaft node in ``$EOSCTL_HOME/kafka``): the jars, Java 17+ and, where
the jars are not cached yet, Maven must be there; otherwise one line says what is missing.
"""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import asdict
from pathlib import Path

from eosctl.base.errors import EosctlError
from eosctl.config import sandboxstate
from eosctl.config.sandboxstate import STATE_FILE, SandboxState
from eosctl.sandbox import apache_kafka, maven
from eosctl.sandbox.net import port_open
from eosctl.sandbox.noida import _locked  # one `up`/`down` of a home at a time, whichever broker

# Heap for a user's sandbox: one node beside the demo pipeline and Spark on a small machine.
HEAP = "768m"


def up(home: Path, port: int | None = None, progress=None) -> tuple[SandboxState, bool]:
    """Start Apache Kafka as the sandbox (or return the one running). Returns (state, started_now)."""
    home.mkdir(parents=True, exist_ok=True)
    with _locked(home, 150.0):
        return _up(home, port, progress)


def _up(home: Path, port: int | None, progress) -> tuple[SandboxState, bool]:
    running = sandboxstate.status(home)
    if running is not None:
        if running.broker != "kafka":
            raise EosctlError(f"the {running.describe} sandbox already runs at {running.bootstrap}; "
                              "run `eosctl sandbox down` first to start Apache Kafka instead")
        if port is not None and port != running.port:
            raise EosctlError(f"the sandbox already runs on port {running.port}; "
                              "run `eosctl sandbox down` first to change it")
        return running, False
    if port is not None and port_open(port):
        raise EosctlError(f"port {port} is already in use; choose another with --port or omit it for a "
                          "free one")
    maven.java()  # one line when Java 17+ is missing, before anything is resolved or written
    kafka_home = (home / "kafka").resolve()
    shutil.rmtree(kafka_home, ignore_errors=True)
    cluster = apache_kafka.start(kafka_home, nodes=1, heap=HEAP, port=port, progress=progress)
    node = cluster.nodes[0]
    state = SandboxState(pid=node.pid, port=node.port, data_dir=str(kafka_home), log_file=node.log_file,
                         started_at=time.time(), broker="kafka", version=cluster.version)
    (home / STATE_FILE).write_text(json.dumps(asdict(state), indent=2))
    return state, True
