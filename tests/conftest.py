"""Session-wide fixtures: one broker per test session.

With EOSCTL_TEST_BOOTSTRAP=host:port the suite runs against that cluster (e.g. real Apache Kafka);
otherwise it starts the noida-db sandbox on a free loopback port with its own state directory.
"""

from __future__ import annotations

import os
import uuid

import pytest

from tests.kafkasim.fixtures import kafka_sim  # noqa: F401  (the scripted Kafka-protocol broker)


@pytest.fixture(scope="session")
def bootstrap(tmp_path_factory: pytest.TempPathFactory) -> str:
    external = os.environ.get("EOSCTL_TEST_BOOTSTRAP")
    if external:
        yield external
        return
    from eosctl.sandbox import noida

    home = tmp_path_factory.mktemp("sandbox")
    state, _ = noida.up(home)
    try:
        yield state.bootstrap
    finally:
        noida.down(home)


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
    (password auth), stopped at the end of the session and, as a backstop, at interpreter exit."""
    import atexit

    from eosctl.errors import EosctlError
    from eosctl.sandbox import pgserver

    try:
        pgserver.bin_dir()
    except EosctlError as e:
        pytest.skip(str(e))
    server = pgserver.start(password="pw-" + uuid.uuid4().hex[:12])
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
