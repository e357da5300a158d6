"""Apache Kafka in KRaft mode, launched from Maven Central jars (``eosctl.sandbox.maven``): one node or a
small cluster on loopback ports, each node a ``kafka.Kafka`` JVM with properties written here (the tarball's
``bin/`` and ``config/`` are not on Central).

``start(home, nodes=3)`` formats each node's log directory with one cluster id and starts them; ``stop``
ends them; ``kill_node``/``restart_node`` give the hard restarts (SIGKILL, start again on the same data) and
outages tests need; ``tool`` runs Kafka's own command-line classes (``TransactionsCommand``,
``DumpLogSegments``...) against the cluster as oracles.
"""

from __future__ import annotations

import base64
import json
import os
import re
import signal
import subprocess
import time
import uuid
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from eosctl.base import procs
from eosctl.base.errors import BrokerError, EosctlError
from eosctl.sandbox import maven
from eosctl.sandbox.net import free_port, port_open, wait_for_metadata

STATE_FILE = "apache-kafka.json"
# Heap per node: tests run one broker (or three) beside Spark and PostgreSQL on two cores.
HEAP = "512m"
_JVM_FLAGS = ["-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xss512k", "-Djava.awt.headless=true",
              "-XX:-UsePerfData"]


@dataclass
class KafkaNode:
    node_id: int
    port: int
    controller_port: int
    log_dir: str
    properties: str
    log_file: str
    pid: int = 0
    # Client listeners beside the PLAINTEXT one (e.g. a secured node's SASL_SSL and SSL): name -> port.
    listener_ports: dict[str, int] = field(default_factory=dict)
    # Listeners advertised at another port than their own (a fault proxy in front of them): name -> port.
    advertised_ports: dict[str, int] = field(default_factory=dict)

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def address(self, listener: str) -> str:
        """host:port of one of ``listener_ports``."""
        return f"127.0.0.1:{self.listener_ports[listener]}"


@dataclass
class KafkaCluster:
    home: str
    version: str
    cluster_id: str
    jars: str
    nodes: list[KafkaNode] = field(default_factory=list)
    heap: str = HEAP
    die_with_parent: bool = False  # tests: the JVMs die with the process that started them

    @property
    def bootstrap(self) -> str:
        return ",".join(n.bootstrap for n in self.nodes)

    def node(self, node_id: int) -> KafkaNode:
        for n in self.nodes:
            if n.node_id == node_id:
                return n
        raise KeyError(node_id)

    def bootstrap_of(self, listener: str) -> str:
        """The bootstrap list of one extra listener (``start(listeners=...)``)."""
        return ",".join(n.address(listener) for n in self.nodes)

    @property
    def server_logs(self) -> list[Path]:
        return [Path(n.log_file) for n in self.nodes]


def cluster_id() -> str:
    """A Kafka Uuid as StorageTool's random-uuid prints it (base64url, no padding, never a leading '-')."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


def default_properties(count: int) -> dict[str, str]:
    """Settings that make transactional behaviour show in seconds on a small machine (see
    docs/brokers.md): internal topics replicated as widely as the cluster allows, quick housekeeping."""
    rf = str(min(3, count))
    isr = str(min(2, count))
    return {
        "offsets.topic.replication.factor": rf, "offsets.topic.num.partitions": "10",
        "transaction.state.log.replication.factor": rf, "transaction.state.log.min.isr": isr,
        "transaction.state.log.num.partitions": "1",
        "share.coordinator.state.topic.replication.factor": rf, "share.coordinator.state.topic.min.isr": isr,
        "default.replication.factor": rf, "min.insync.replicas": isr, "num.partitions": "1",
        "group.initial.rebalance.delay.ms": "0",
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000",
        "num.network.threads": "2", "num.io.threads": "2", "background.threads": "2",
        "num.recovery.threads.per.data.dir": "1", "num.replica.fetchers": "1",
        "log.cleaner.threads": "1", "log.cleaner.dedupe.buffer.size": str(16 * 1024 * 1024),
        "log.cleaner.backoff.ms": "1000",
    }


def _node_properties(node: KafkaNode, voters: str, props: dict[str, str],
                     listeners: dict[str, str] | None = None) -> str:
    """``listeners``: extra client listeners, name -> security protocol; the PLAINTEXT one stays the
    inter-broker listener (and the one readiness checks and Kafka's tools use)."""
    extra = listeners or {}
    names = "".join(f",{name}://127.0.0.1:{node.listener_ports[name]}" for name in extra)
    shown = "".join(f",{name}://127.0.0.1:{node.advertised_ports.get(name, node.listener_ports[name])}"
                    for name in extra)
    base = {
        "process.roles": "broker,controller", "node.id": str(node.node_id),
        "controller.quorum.voters": voters,
        "listeners": f"PLAINTEXT://127.0.0.1:{node.port}{names},CONTROLLER://127.0.0.1:{node.controller_port}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{node.port}{shown}",
        "controller.listener.names": "CONTROLLER", "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT"
        + "".join(f",{name}:{protocol}" for name, protocol in extra.items()),
        "log.dirs": node.log_dir,
    }
    base.update(props)
    return "".join(f"{k}={v}\n" for k, v in base.items())


def _log4j(home: Path, tool: bool = False) -> Path:
    """The broker logs INFO to its stdout (its server.log); a tool logs warnings to stderr only, so its stdout
    is the table it prints."""
    path = home / ("log4j2-tools.properties" if tool else "log4j2.properties")
    path.write_text(
        "status = warn\n"
        "appender.out.type = Console\nappender.out.name = OUT\n"
        f"appender.out.target = {'SYSTEM_ERR' if tool else 'SYSTEM_OUT'}\n"
        "appender.out.layout.type = PatternLayout\nappender.out.layout.pattern = [%d] %p %m (%c)%n\n"
        f"rootLogger.level = {'WARN' if tool else 'INFO'}\nrootLogger.appenderRef.out.ref = OUT\n"
        # The state-change and request loggers are the chattiest and say nothing tests read.
        "logger.sc.name = state.change.logger\nlogger.sc.level = WARN\n"
        "logger.req.name = kafka.request.logger\nlogger.req.level = WARN\n"
    )
    return path


def _java_cmd(cluster: KafkaCluster, main: str, *args: str, heap: str | None = None,
              tool: bool = False) -> list[str]:
    home = Path(cluster.home)
    return [maven.java(), f"-Xmx{heap or cluster.heap}", *_JVM_FLAGS,
            f"-Dlog4j2.configurationFile=file:{_log4j(home, tool)}", f"-Dkafka.logs.dir={home}",
            "-cp", maven.classpath(Path(cluster.jars)), main, *args]


def tool(cluster: KafkaCluster, main: str, *args: str, timeout: float = 120.0,
         check: bool = True) -> subprocess.CompletedProcess:
    """Run one of Kafka's command-line classes (e.g. ``org.apache.kafka.tools.TransactionsCommand``) from the
    cluster's jars; its stdout and stderr as text."""
    done = subprocess.run(_java_cmd(cluster, main, *args, heap="256m", tool=True), capture_output=True,
                          text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    if check and done.returncode != 0:
        # Arguments may carry passwords (StorageTool's --add-scram): never in a message.
        shown = re.sub(r"password=[^,\]]*", "password=***", " ".join(args))
        raise EosctlError(f"{main.rsplit('.', 1)[-1]} {shown} exited {done.returncode}: "
                          f"{(done.stderr or done.stdout).strip()[-500:]}")
    return done


def start(home: Path, nodes: int = 1, version: str | None = None, properties: dict[str, str] | None = None,
          heap: str = HEAP, die_with_parent: bool = False, timeout: float = 90.0,
          progress=None, port: int | None = None, listeners: dict[str, str] | None = None,
          format_args: Sequence[str] = (), advertised: dict[str, int] | None = None) -> KafkaCluster:
    """Format and start ``nodes`` combined broker+controller nodes under ``home``; wait until every broker
    answers Metadata. ``properties`` are added to (and override) ``default_properties``; ``port`` is the
    first node's client port (default: a free one). ``listeners`` adds client listeners (name -> security
    protocol, each on a free port: ``KafkaCluster.bootstrap_of(name)``); ``format_args`` go to StorageTool
    format (e.g. ``--add-scram``, so SCRAM users exist when the broker starts); ``advertised``: one of
    ``listeners`` advertised at another port (name -> port) on the first node, e.g. a fault proxy's that
    forwards to it, so that clients reach the broker only through the proxy."""
    home = Path(home).resolve()
    home.mkdir(parents=True, exist_ok=True)
    jar_dir = maven.jars("kafka", version, progress=progress)
    version = (jar_dir / ".complete").read_text().strip()
    cluster = KafkaCluster(home=str(home), version=version, cluster_id=cluster_id(), jars=str(jar_dir),
                           heap=heap, die_with_parent=die_with_parent)
    for i in range(1, nodes + 1):
        node_home = home / f"node{i}"
        node_home.mkdir(parents=True, exist_ok=True)
        cluster.nodes.append(KafkaNode(
            node_id=i, port=port if (port and i == 1) else free_port(), controller_port=free_port(),
            log_dir=str(node_home / "data"),
            properties=str(node_home / "data" / ".." / "server.properties"),
            log_file=str(node_home / "server.log"),
            listener_ports={name: free_port() for name in (listeners or {})},
            advertised_ports=dict(advertised or {}) if i == 1 else {}))
    voters = ",".join(f"{n.node_id}@127.0.0.1:{n.controller_port}" for n in cluster.nodes)
    props = {**default_properties(nodes), **(properties or {})}
    for n in cluster.nodes:
        n.properties = str(Path(n.log_dir).parent / "server.properties")
        Path(n.properties).write_text(_node_properties(n, voters, props, listeners))
        tool(cluster, "kafka.tools.StorageTool", "format", "-t", cluster.cluster_id, "-c", n.properties,
             "--ignore-formatted", *format_args, timeout=120)
    try:
        for n in cluster.nodes:
            _launch(cluster, n)
        wait_ready(cluster, timeout=timeout)
    except BaseException:
        stop(cluster)
        raise
    (home / STATE_FILE).write_text(json.dumps(asdict(cluster), indent=2))
    return cluster


def _launch(cluster: KafkaCluster, node: KafkaNode) -> None:
    with open(node.log_file, "ab") as log:
        proc = subprocess.Popen(
            _java_cmd(cluster, "kafka.Kafka", node.properties), stdout=log, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            # Its own session, so a Ctrl-C in the terminal that started it reaches eosctl, not the broker.
            preexec_fn=procs.die_with_parent if cluster.die_with_parent else os.setsid)
    node.pid = proc.pid


def wait_ready(cluster: KafkaCluster, timeout: float = 90.0, nodes: list[KafkaNode] | None = None) -> None:
    """Until each node's port is open and Metadata lists the brokers of ``nodes`` (default: all)."""
    deadline = time.monotonic() + timeout
    waiting = nodes if nodes is not None else cluster.nodes
    for n in waiting:
        while not port_open(n.port):
            if n.pid and not procs.alive(n.pid):
                procs.reap(n.pid)
                raise EosctlError(f"Apache Kafka node {n.node_id} exited at start; see {n.log_file}: "
                                  f"{_last_error(Path(n.log_file))}")
            if time.monotonic() > deadline:
                raise EosctlError(f"Apache Kafka node {n.node_id} did not open port {n.port} within "
                                  f"{timeout:.0f}s; see {n.log_file}")
            time.sleep(0.1)
    for n in waiting:
        wait_for_metadata(n.bootstrap, timeout=max(1.0, deadline - time.monotonic()),
                          brokers=len(cluster.nodes) if nodes is None else 1)
    if nodes is None:
        _wait_group_coordinator(cluster.bootstrap, deadline)


def _wait_group_coordinator(bootstrap: str, deadline: float) -> None:
    """Until the group coordinator has loaded (a started broker answers COORDINATOR_LOAD_IN_PROGRESS for a
    while): reading the committed offsets of a group nobody uses succeeds only then. Writes nothing.

    Asked on the wire client, as eosctl reads every group: librdkafka's admin client aborted the process
    (SIGABRT in one of its threads, no Python error to catch) while a starting broker answered its
    DescribeConsumerGroups, once in a full run (ci14 of stop 46); its OffsetFetch path crashes likewise
    (eosctl.cluster.offsets)."""
    from eosctl.cluster.offsets import group_offsets  # lazy: see docs/imports.md
    from eosctl.cluster.wire import WireClient  # lazy: see docs/imports.md

    left = max(1.0, deadline - time.monotonic())
    try:
        with WireClient(bootstrap, timeout_ms=int(left * 1000)) as client:
            group_offsets(client, ["eosctl-readiness-probe"], timeout=left)
    except BrokerError as e:
        raise EosctlError(f"Apache Kafka at {bootstrap}: the group coordinator did not load in time ({e})") \
            from None


def _last_error(log: Path) -> str:
    try:
        lines = log.read_text(errors="replace").splitlines()
    except OSError:
        return "no log"
    errors = [ln for ln in lines if " ERROR " in ln or "Exception" in ln]
    return (errors or lines or ["no output"])[-1].strip()[:300]


def stop_node(cluster: KafkaCluster, node_id: int, sig: int = signal.SIGTERM, timeout: float = 30.0) -> None:
    """Stop one node: SIGTERM is Kafka's controlled shutdown; SIGKILL a crash (see ``kill_node``)."""
    node = cluster.node(node_id)
    if node.pid:
        procs.stop(node.pid, sig=sig, timeout=timeout)
        node.pid = 0


def kill_node(cluster: KafkaCluster, node_id: int) -> None:
    stop_node(cluster, node_id, sig=signal.SIGKILL, timeout=10.0)


def restart_node(cluster: KafkaCluster, node_id: int, wait: bool = True, timeout: float = 90.0) -> None:
    """Start a stopped node again on the same data (the same command line as its first start)."""
    node = cluster.node(node_id)
    if node.pid and procs.alive(node.pid):
        raise EosctlError(f"Apache Kafka node {node_id} is still running (pid {node.pid})")
    _launch(cluster, node)
    if wait:
        wait_ready(cluster, timeout=timeout, nodes=[node])


def stop(cluster: KafkaCluster) -> None:
    """Stop every node (controlled shutdown, SIGKILL after a deadline); nothing is left running."""
    for n in cluster.nodes:
        if n.pid:
            # A controlled shutdown of the last nodes can wait on a quorum that is gone: keep it short.
            procs.stop(n.pid, sig=signal.SIGTERM, timeout=15.0)
            n.pid = 0
    (Path(cluster.home) / STATE_FILE).unlink(missing_ok=True)


def read(home: Path) -> KafkaCluster | None:
    """The cluster ``start`` recorded under ``home``, or None."""
    try:
        raw = json.loads((Path(home) / STATE_FILE).read_text())
        raw["nodes"] = [KafkaNode(**n) for n in raw["nodes"]]
        return KafkaCluster(**raw)
    except (OSError, ValueError, TypeError, KeyError):
        return None
