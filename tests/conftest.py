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
    from eosctl import sandbox

    home = tmp_path_factory.mktemp("sandbox")
    state, _ = sandbox.up(home)
    try:
        yield state.bootstrap
    finally:
        sandbox.down(home)


@pytest.fixture
def private_broker(tmp_path_factory: pytest.TempPathFactory):
    """(home, state) of a sandbox of the test's own, for tests that stop the broker (outages): never the
    session's."""
    from eosctl import sandbox

    home = tmp_path_factory.mktemp("private-sandbox")
    state, _ = sandbox.up(home)
    try:
        yield home, state
    finally:
        sandbox.down(home)


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
