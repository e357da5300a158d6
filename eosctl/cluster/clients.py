"""The one place that builds Kafka admin clients, with eosctl's timeouts and quiet logging.

kafka-python's KafkaAdminClient for the transaction APIs (ListTransactions, DescribeTransactions,
DescribeProducers, WriteTxnMarkers); confluent-kafka's AdminClient only for the sandbox's topic
administration. Consumer groups are read with raw requests (eosctl.cluster.offsets): librdkafka's admin client
dies with SIGSEGV on a coordinator that is loading. Both are imported only when a client is built:
`eosctl sandbox status` / `down` import this module (through eosctl.sandbox) and need neither.

`Admins` holds the kafka-python client for a cluster and reuses it across calls (the TUI refreshes every
few seconds: building a client each time costs a bootstrap round trip); `reset()` drops it after a
connection error so the next use reconnects.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from eosctl.base.errors import BrokerError
from eosctl.cluster.clientcauses import BootstrapLog, check_tls_files, diagnose
from eosctl.config.model import Cluster

if TYPE_CHECKING:
    from confluent_kafka.admin import AdminClient
    from kafka.admin import KafkaAdminClient

# Short, so a dead broker is one line within seconds instead of a hang.
DEFAULT_TIMEOUT_S = 5.0
LOGGER = "eosctl.librdkafka"


def quiet_logger(name: str = LOGGER) -> logging.Logger:
    """A logger that swallows librdkafka's log lines: eosctl turns errors into one-line messages itself."""
    log = logging.getLogger(name)
    if not log.handlers:
        log.addHandler(logging.NullHandler())
    log.propagate = False
    return log


def confluent_admin(cluster: Cluster, timeout: float = DEFAULT_TIMEOUT_S) -> AdminClient:
    """confluent-kafka AdminClient; ``timeout`` (seconds) bounds each socket wait and connection setup.

    librdkafka connects lazily: an unreachable cluster shows up on the first request, not here.
    """
    from confluent_kafka.admin import AdminClient  # lazy: see docs/imports.md

    ms = str(int(timeout * 1000))
    # librdkafka takes a Logger object here, which confluent-kafka's annotation of the config leaves out.
    conf: dict = {**cluster.confluent(), "logger": quiet_logger(), "socket.timeout.ms": ms,
                  "socket.connection.setup.timeout.ms": ms}
    return AdminClient(conf)


def kafka_admin(cluster: Cluster, timeout: float = DEFAULT_TIMEOUT_S) -> KafkaAdminClient:
    """kafka-python KafkaAdminClient; it bootstraps at once, so an unreachable cluster is one BrokerError.

    The command's deadline (eosctl.cluster.deadline) bounds its bootstrap and each request; ``timeout`` no
    longer does (a fixed wait the user could not change ended slow links' commands early).
    """
    # lazy: see docs/imports.md
    import kafka.errors as Errors
    from kafka.admin import KafkaAdminClient

    from eosctl.cluster import deadline  # lazy: see docs/imports.md
    from eosctl.cluster.wire import unreachable_now  # lazy: see docs/imports.md

    # Its bootstrap and each request it sends (while it connects too) may take what is left of the
    # command's deadline: kafka-python's admin has no retry of its own that eosctl would see, and a slow
    # link's bootstrap alone takes several round trips (at 1.5 s of round trip ListTransactions timed out
    # at 3 s; at 4.5 s the bootstrap at 10 s). deadline.library_call retries a dropped connection.
    deadline.prefer(cluster.timeout_s)
    d = deadline.current()
    ms = deadline.connect_timeout_ms(d)
    check_tls_files(cluster)

    # A refused or unresolvable address is said at once, not after the bootstrap's wait (its retries).
    refused = unreachable_now(cluster.bootstrap_servers)
    if refused:
        raise BrokerError(f"cannot reach Kafka at {cluster.bootstrap_servers}: {refused}; "
                          "check --bootstrap / that the broker is up")
    with BootstrapLog() as log:
        try:
            admin = KafkaAdminClient(**cluster.kafka_python(), request_timeout_ms=ms, bootstrap_timeout_ms=ms,
                                     reconnect_backoff_max_ms=1000)
        except (Errors.KafkaError, OSError) as e:
            cause = diagnose(cluster, log.errors)
            where = cluster.bootstrap_servers
            if cause:
                raise BrokerError(f"cannot connect to Kafka at {where}: {cause}") from None
            if deadline.ended_by(d):
                raise BrokerError(deadline.at_deadline(
                    f"cannot connect to Kafka at {where}",
                    f"the admin client's bootstrap (ApiVersions, Metadata; last: {type(e).__name__})",
                    d)) from None
            raise BrokerError(f"cannot reach Kafka at {where}: {type(e).__name__}; "
                              "check --bootstrap / that the broker is up") from None
    # Its later connections (to each broker after the bootstrap's) take the deadline too, not the
    # manager's fixed 10 s (the admin client does not take that setting: its manager's config does);
    # deadline.library_call renews them before each call.
    deadline.bound(getattr(admin, "_manager", None), d)
    return admin


class Admins:
    """The kafka-python admin client for a cluster, built on first use and reused.

    Use as a context manager (or call close()); call reset() after a connection error so the next
    use builds a fresh client instead of retrying on a broken one.
    """

    def __init__(self, cluster: Cluster, timeout: float = DEFAULT_TIMEOUT_S) -> None:
        self.cluster = cluster
        self.timeout = timeout
        self._kafka: KafkaAdminClient | None = None
        self._stale = False

    @property
    def kafka(self) -> KafkaAdminClient:
        self._renew()
        if self._kafka is None:
            self._kafka = kafka_admin(self.cluster, self.timeout)
        return self._kafka

    def reset(self) -> None:
        """After a connection error: the next use builds a fresh client (the old one is closed then)."""
        self._stale = True

    def _renew(self) -> None:
        if self._stale:
            self._stale = False
            self.close()

    def close(self) -> None:
        kafka, self._kafka = self._kafka, None
        if kafka is not None:
            try:
                kafka.close()
            except Exception:  # closing a client whose broker died must not hide the original error
                pass

    def __enter__(self) -> Admins:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
