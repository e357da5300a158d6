"""Session-wide fixtures: one broker per test session.

The reference broker is Apache Kafka: one KRaft node from Maven Central jars
(``eosctl.sandbox.apache_kafka``), started once per session and stopped on every exit path (its JVM also
dies with the test process).
EOSCTL_TEST_BOOTSTRAP=host:port runs the suite against another cluster; EOSCTL_TEST_BROKER=sandbox against
the noida-db sandbox instead. Tests that need the embedded sandbox itself use ``sandbox_bootstrap``; those
that need three brokers ``kafka_cluster3`` (started only when such a test runs).
"""

from __future__ import annotations

import os
import uuid

import pytest

from tests.kafkasim.fixtures import kafka_sim  # noqa: F401  (the scripted Kafka-protocol broker)
from tests.support import clientguard, early, jvm, nojvm, timeline, txnguard, workers


def _record_pipeline_prefixes() -> None:
    """Every reference-pipeline run records its prefix (see tests/support/txnguard.py); done at import,
    before the
    test modules bind ``run_pipeline``."""
    from eosctl.sandbox.pipeline import run as pipeline_run

    original = pipeline_run.run_pipeline
    if getattr(original, "_txnguard", False):
        return

    def run_pipeline(cluster, prefix, *args, **kwargs):
        txnguard.register(prefix)
        return original(cluster, prefix, *args, **kwargs)

    run_pipeline._txnguard = True  # type: ignore[attr-defined]
    run_pipeline.__doc__ = original.__doc__
    pipeline_run.run_pipeline = run_pipeline


_record_pipeline_prefixes()

# Spark's JVMs in the suite (the session's, every `eosctl audit --engine spark` a test runs, the test jobs'
# spark-submit, a Connect server, a standalone cluster's daemons) run seconds on small data, where C2's
# compiles are CPU spent and never repaid: C1 alone took a local session's CPU from 15.3 to 9.2 s for the
# same queries. The brokers and the tests' own JVMs have it already (apache_kafka._JVM_FLAGS,
# tests/support/jvm.py). SPARK_SUBMIT_OPTS reaches a driver through Spark's launcher; the daemons read
# SPARK_DAEMON_JAVA_OPTS. The product keeps the JVM's default: a real audit's tasks run long enough for C2.
for _var in ("SPARK_SUBMIT_OPTS", "SPARK_DAEMON_JAVA_OPTS"):
    os.environ.setdefault(_var, " ".join(jvm.SMALL_JVM))


def pytest_configure(config: pytest.Config) -> None:
    _one_finding_per_row_file()
    # A plugin, not a hook here: a session fixture's set-up calls only the hooks of conftests at the root.
    config.pluginmanager.register(workers.StartsRecorder(), "eosctl-server-starts")
    timeline.install(config)  # EOSCTL_TEST_TIMELINE=DIR: each test's start and end, worker by worker
    if nojvm.on():  # `make check`: starting a JVM fails the test that did (tests/support/nojvm.py)
        nojvm.install()


# First: xdist's own hook turns the xdist_group marks set here into its groups (a suffix of each test's id).
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    nojvm.mark(items)
    # `make test`: xdist workers, each shared server on one (tests/support/workers.py)
    if workers.active(config):
        workers.assign(items)


def pytest_collection_finish(session: pytest.Session) -> None:
    """The session JVMs the selected tests need, started early on a background thread
    (tests/support/early.py)."""
    if nojvm.on() or session.config.option.collectonly or os.environ.get("EOSCTL_TEST_EARLY") == "0":
        return  # EOSCTL_TEST_EARLY=0: each JVM starts when its first test asks (to compare, to debug)
    if workers.active(session.config):
        return  # a worker learns which groups it runs only as they come: each server starts when asked
    factory = session.config._tmp_path_factory  # type: ignore[attr-defined]
    needs = nojvm.needs(session.items)
    if "kafka39" in needs:
        early.begin("apache-kafka-39", lambda: _start_kafka(factory.mktemp("apache-kafka-39"), 1,
                                                            version="3.9.1"), _end_kafka)
    if "kafka_cluster3" in needs:
        early.begin("apache-kafka-3", lambda: _start_kafka(factory.mktemp("apache-kafka-3"), 3), _end_kafka)


def pytest_sessionfinish(session: pytest.Session) -> None:
    early.discard()
    if workers.active(session.config) and not os.environ.get("PYTEST_XDIST_WORKER"):
        twice = workers.starts_twice(session.config)  # the controller, once every worker is done
        if twice:
            reporter = session.config.pluginmanager.get_plugin("terminalreporter")
            reporter.ensure_newline()
            for fixture, by in sorted(twice.items()):
                reporter.write_line(f"shared server {fixture} started {len(by)} times in this run (by "
                                    f"{', '.join(by)}): its tests were split between workers "
                                    "(tests/support/workers.py)", red=True)
            session.exitstatus = pytest.ExitCode.TESTS_FAILED


def _one_finding_per_row_file() -> None:
    """Every audit this process and its children run appends the rows two of its findings name to this
    file (eosctl.report.onerow); the fixture below fails the test that ran it. One file per process: a
    worker's (each xdist worker makes its own, not the controller's it inherited), never read by another."""
    import atexit
    import tempfile

    from eosctl.report import onerow

    fd, path = tempfile.mkstemp(prefix="eosctl-onerow-", suffix=".log")
    os.close(fd)
    os.environ[onerow.ENV] = path
    atexit.register(lambda: os.path.exists(path) and os.unlink(path))


@pytest.fixture(autouse=True)
def _one_finding_per_row():
    """No audit a test runs (in this process or a child, either engine, incremental or not) names one sink
    row (topic, partition, offset) in two findings (docs/audit.md, "One finding per row")."""
    from eosctl.report import onerow

    path = os.environ.get(onerow.ENV)
    before = os.path.getsize(path) if path and os.path.exists(path) else 0
    yield
    if path and os.path.exists(path) and os.path.getsize(path) > before:
        with open(path, encoding="utf-8") as f:
            f.seek(before)
            found = f.read().strip()
        pytest.fail(f"an audit named a sink row in two findings (eosctl/report/onerow.py):\n{found}",
                    pytrace=False)


@pytest.fixture(autouse=True)
def _no_kafka_client_left():
    """A Kafka client a test opened is closed by its end (tests/support/clientguard.py)."""
    before = clientguard.running()
    yield
    left = clientguard.left_since(before)
    assert not left, clientguard.HINT.format(n=len(left), names=", ".join(left))


@pytest.fixture(autouse=True)
def _no_jvm_left_below():
    """Under `make check`: a test that leaves a JVM below the test process (a CLI child's Spark) fails."""
    yield
    if nojvm.on():
        left = nojvm.jvms_below(os.getpid())
        assert not left, nojvm.HINT.format(what="; ".join(left))
# The session broker's address once a test asked for it: the module and session checks below use it.
_SESSION_BOOTSTRAP: list[str] = []


def _start_kafka(home, nodes: int, **kw):
    """A cluster stopped, as a backstop, at interpreter exit (its JVMs also die with this process)."""
    import atexit

    from eosctl.sandbox import apache_kafka

    cluster = apache_kafka.start(home, nodes=nodes, die_with_parent=True, **kw)
    atexit.register(apache_kafka.stop, cluster)
    return cluster


def _end_kafka(cluster) -> None:
    from eosctl.sandbox import apache_kafka

    # Killed, not shut down: its data is thrown away, and a controlled shutdown of three nodes waits up
    # to 15 s each on a quorum that is leaving (22 s of the three-node tests' time, measured).
    for n in cluster.nodes:
        apache_kafka.kill_node(cluster, n.node_id)
    apache_kafka.stop(cluster)


def _kafka(tmp_path_factory: pytest.TempPathFactory, name: str, nodes: int, **kw):
    """A cluster for a session fixture to yield from (the one started early, if it was), stopped at the
    fixture's end."""
    cluster = early.take(name) or _start_kafka(tmp_path_factory.mktemp(name), nodes, **kw)
    try:
        yield cluster
    finally:
        _end_kafka(cluster)


# The port the session broker's PROXIED listener is advertised at: Toxiproxy's, when a network fault test
# starts it (``faults``); nothing listens there otherwise, and only those tests use that listener.
_PROXY_PORT: list[int] = []


def _proxy_port() -> int:
    if not _PROXY_PORT:
        from eosctl.sandbox.net import free_port

        _PROXY_PORT.append(free_port())
    return _PROXY_PORT[0]


@pytest.fixture(scope="session")
def apache_kafka(tmp_path_factory: pytest.TempPathFactory):
    """ONE single-node Apache Kafka (the newest 4.x the pom names) for the session: the KafkaCluster, for
    tests that read its server.log, run Kafka's own tools against it or restart it. Its PROXIED listener
    is advertised at Toxiproxy's port (the ``faults`` fixture): clients bootstrapping there stay behind
    the proxy."""
    yield from _kafka(tmp_path_factory, "apache-kafka", 1, listeners={"PROXIED": "PLAINTEXT"},
                      advertised={"PROXIED": _proxy_port()})


@pytest.fixture(scope="session")
def _toxiproxy(apache_kafka, tmp_path_factory: pytest.TempPathFactory):
    """Toxiproxy (tests/support/toxiproxy.py) in front of the session broker's PROXIED listener, started by
    the
    first network fault test and stopped at the session's end."""
    from tests.support.toxiproxy import Toxiproxy

    proxy = Toxiproxy(tmp_path_factory.mktemp("toxiproxy") / "toxiproxy.log")
    try:
        proxy.proxy("kafka", _proxy_port(), apache_kafka.nodes[0].address("PROXIED"))
        yield proxy
    finally:
        proxy.stop()


@pytest.fixture
def faults(_toxiproxy):
    """(toxiproxy, the broker's address through it): every toxic is gone and the proxy on after the test."""
    _toxiproxy.reset()
    try:
        yield _toxiproxy, f"127.0.0.1:{_proxy_port()}"
    finally:
        _toxiproxy.reset()


@pytest.fixture(scope="session")
def kafka_cluster3(tmp_path_factory: pytest.TempPathFactory):
    """ONE three-node Apache Kafka cluster (RF 3, min ISR 2), only for the tests that need several brokers."""
    yield from _kafka(tmp_path_factory, "apache-kafka-3", 3)


@pytest.fixture(scope="session")
def secured_kafka(tmp_path_factory: pytest.TempPathFactory):
    """ONE secured Apache Kafka node (SASL_SSL with SCRAM and PLAIN, mTLS, ACLs denying by default; see
    tests/support/securekafka.py), started only when a test of secured clusters runs."""
    import atexit

    from eosctl.sandbox import apache_kafka
    from tests.support import securekafka

    secured = securekafka.start(tmp_path_factory.mktemp("secured-kafka"))
    atexit.register(apache_kafka.stop, secured.cluster)
    try:
        yield secured
    finally:
        for n in secured.cluster.nodes:
            apache_kafka.kill_node(secured.cluster, n.node_id)
        apache_kafka.stop(secured.cluster)


@pytest.fixture(scope="session")
def kafka_dr(tmp_path_factory: pytest.TempPathFactory):
    """ONE more single-node Apache Kafka, the "dr" cluster MirrorMaker 2 copies to (tests/support/mirror.py),
    only for the replica tests."""
    yield from _kafka(tmp_path_factory, "apache-kafka-dr", 1)


@pytest.fixture(scope="session")
def kafka39(tmp_path_factory: pytest.TempPathFactory):
    """ONE single-node Apache Kafka 3.9.1 (transactions v1 only), only for the version set's tests."""
    yield from _kafka(tmp_path_factory, "apache-kafka-39", 1, version="3.9.1")


@pytest.fixture(params=["4.4", "3.9"])
def kafka_version(request: pytest.FixtureRequest):
    """The version set: the test runs on the session's Apache Kafka 4.4 and on a 3.9.1 broker of its own
    (where behaviour differs by version: transactions v1 vs v2, the abort API)."""
    if request.param == "3.9":
        return request.getfixturevalue("kafka39")
    return request.getfixturevalue("apache_kafka")


@pytest.fixture(scope="session")
def sandbox_bootstrap(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The noida-db sandbox, for tests of the sandbox itself and where only it is fast."""
    from eosctl.sandbox import noida

    home = tmp_path_factory.mktemp("sandbox")
    state, _ = noida.up(home)
    try:
        yield state.bootstrap
    finally:
        noida.down(home)


@pytest.fixture(scope="session")
def bootstrap(request: pytest.FixtureRequest):
    """The session's broker: Apache Kafka unless EOSCTL_TEST_BOOTSTRAP or EOSCTL_TEST_BROKER=sandbox say."""
    external = os.environ.get("EOSCTL_TEST_BOOTSTRAP")
    if external:
        address = external
    elif os.environ.get("EOSCTL_TEST_BROKER") == "sandbox":
        address = request.getfixturevalue("sandbox_bootstrap")
    else:
        address = request.getfixturevalue("apache_kafka").bootstrap
    _SESSION_BOOTSTRAP.append(address)
    yield address
    # The session's end: nothing this session began may stay open (a shared cluster keeps it for
    # transaction.timeout.ms, up to 15 minutes, holding every read_committed reader of the partition).
    left = txnguard.still_ongoing(address)
    if left:
        txnguard.end_ongoing(address)  # leave the cluster clean, then say which test forgot to
        raise AssertionError(f"the session left open transactions on {address}: "
                             + ", ".join(f"{t} ({s})" for t, s in left))


@pytest.fixture(scope="module", autouse=True)
def _end_open_transactions():
    """A module's teardown ends the open transactions its tests began (the `hanging` fault leaves one on
    purpose, with the broker's maximum timeout)."""
    before = set(txnguard.prefixes())
    yield
    mine = [p for p in txnguard.prefixes() if p not in before]
    if mine and _SESSION_BOOTSTRAP:
        txnguard.end_ongoing(_SESSION_BOOTSTRAP[0], mine)


@pytest.fixture
def private_broker(tmp_path_factory: pytest.TempPathFactory):
    """(home, state) of a sandbox of the test's own, for tests that stop the broker (outages): never the
    session's."""
    from eosctl.sandbox import noida

    home = tmp_path_factory.mktemp("private-sandbox")
    state, _ = noida.up(home)
    try:
        yield home, state
    finally:
        noida.down(home)


@pytest.fixture
def unique() -> str:
    """A short unique prefix, so tests sharing one broker never share topics or groups."""
    return txnguard.register("t" + uuid.uuid4().hex[:10])


@pytest.fixture(scope="session")
def cluster(bootstrap: str):
    from eosctl.config.model import Cluster

    return Cluster(name="test", bootstrap_servers=bootstrap)


@pytest.fixture(scope="session")
def spark():
    """ONE SparkSession for the whole suite (Spark takes seconds to start); `eosctl audit` reuses it."""
    from auditors.spark import session
    from tests.support.streaming import spark_jars

    # PostgreSQL's JDBC driver: Spark's JDBC source reads a PostgreSQL sink's keys (auditors.spark_sink).
    s = session(master="local[2]", driver_memory="1g", shuffle_partitions=2,
                extra={"spark.jars": spark_jars("spark-jdbc")})
    yield s
    s.stop()


@pytest.fixture(scope="session")
def postgres():
    """ONE PostgreSQL server for the whole suite: initdb in a temp dir, postgres on a Unix socket there
    (password auth) and on a TCP port of 127.0.0.1 (`.tcp_port`, for JDBC clients such as Kafka Connect's
    sink); stopped at the end of the session, as a backstop at interpreter exit, and killed with pytest."""
    import atexit

    from eosctl.base.errors import EosctlError
    from eosctl.sandbox import pgserver
    from eosctl.sandbox.net import free_port

    try:
        pgserver.bin_dir()
    except EosctlError as e:
        pytest.skip(str(e))
    server = pgserver.start(password="pw-" + uuid.uuid4().hex[:12], tcp_port=free_port(),
                            die_with_parent=True)
    atexit.register(pgserver.stop, server)
    try:
        yield server
    finally:
        pgserver.stop(server)
        atexit.unregister(pgserver.stop)


@pytest.fixture
def pg_db(postgres, unique: str) -> str:
    """A fresh schema on the session's PostgreSQL, first on the search path of the URI returned (with the
    password); dropped afterwards. (A schema, not a database: creating one costs ~1 s on a busy machine.)"""
    import psycopg

    with psycopg.connect(postgres.uri(), autocommit=True) as con:
        con.execute(f'CREATE SCHEMA "{unique}"')
    yield postgres.uri() + f"&options=-csearch_path%3D{unique}"
    with psycopg.connect(postgres.uri(), autocommit=True) as con:
        con.execute(f'DROP SCHEMA "{unique}" CASCADE')
