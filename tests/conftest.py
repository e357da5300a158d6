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


def _start_kafka(tmp_path_factory: pytest.TempPathFactory, name: str, nodes: int, **kw):
    import atexit

    from eosctl.sandbox import apache_kafka

    cluster = apache_kafka.start(tmp_path_factory.mktemp(name), nodes=nodes, die_with_parent=True, **kw)
    atexit.register(apache_kafka.stop, cluster)
    return cluster


@pytest.fixture(scope="session")
def apache_kafka(tmp_path_factory: pytest.TempPathFactory):
    """ONE single-node Apache Kafka (the newest 4.x the pom names) for the session: the KafkaCluster, for
    tests that read its server.log, run Kafka's own tools against it or restart it."""
    from eosctl.sandbox import apache_kafka as ak

    cluster = _start_kafka(tmp_path_factory, "apache-kafka", 1)
    try:
        yield cluster
    finally:
        ak.stop(cluster)


@pytest.fixture(scope="session")
def kafka_cluster3(tmp_path_factory: pytest.TempPathFactory):
    """ONE three-node Apache Kafka cluster (RF 3, min ISR 2), only for the tests that need several brokers."""
    from eosctl.sandbox import apache_kafka as ak

    cluster = _start_kafka(tmp_path_factory, "apache-kafka-3", 3)
    try:
        yield cluster
    finally:
        ak.stop(cluster)


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
def bootstrap(request: pytest.FixtureRequest) -> str:
    """The session's broker: Apache Kafka unless EOSCTL_TEST_BOOTSTRAP or EOSCTL_TEST_BROKER=sandbox say."""
    external = os.environ.get("EOSCTL_TEST_BOOTSTRAP")
    if external:
        return external
    if os.environ.get("EOSCTL_TEST_BROKER") == "sandbox":
        return request.getfixturevalue("sandbox_bootstrap")
    return request.getfixturevalue("apache_kafka").bootstrap


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
    return "t" + uuid.uuid4().hex[:10]


@pytest.fixture(scope="session")
def cluster(bootstrap: str):
    from eosctl.config import Cluster

    return Cluster(name="test", bootstrap_servers=bootstrap)


@pytest.fixture(scope="session")
def spark():
    """ONE SparkSession for the whole suite (Spark takes seconds to start); `eosctl audit` reuses it."""
    from auditors.spark import session

    s = session(master="local[2]", driver_memory="1g", shuffle_partitions=2)
    yield s
    s.stop()


@pytest.fixture(scope="session")
def postgres():
    """ONE PostgreSQL server for the whole suite: initdb in a temp dir, postgres on a Unix socket there
    (password auth) and on a TCP port of 127.0.0.1 (`.tcp_port`, for JDBC clients such as Kafka Connect's
    sink), stopped at the end of the session and, as a backstop, at interpreter exit."""
    import atexit

    from eosctl.errors import EosctlError
    from eosctl.sandbox import pgserver
    from eosctl.sandbox.net import free_port

    try:
        pgserver.bin_dir()
    except EosctlError as e:
        pytest.skip(str(e))
    server = pgserver.start(password="pw-" + uuid.uuid4().hex[:12], tcp_port=free_port())
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
