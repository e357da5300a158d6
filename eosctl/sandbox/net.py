"""Loopback helpers for the servers the sandbox starts: a free port, an open port, a broker that answers."""

from __future__ import annotations

import socket
import time

from eosctl.base.errors import BrokerError
from eosctl.cluster.clients import confluent_admin
from eosctl.config.model import Cluster


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket() as s:
        s.settimeout(0.2)
        return s.connect_ex((host, port)) == 0


def wait_for_metadata(bootstrap: str, timeout: float = 30.0, brokers: int = 1) -> None:
    """Block until the cluster answers a Metadata request listing ``brokers`` brokers (an open port is not
    enough)."""
    deadline = time.monotonic() + timeout
    admin = confluent_admin(Cluster(name="sandbox", bootstrap_servers=bootstrap), timeout=1.0)
    last = None
    while time.monotonic() < deadline:
        try:
            md = admin.list_topics(timeout=1.0)
            if len(md.brokers) >= brokers:
                return
        except Exception as e:  # librdkafka raises KafkaException while the port is still closed
            last = e
        time.sleep(0.1)
    raise BrokerError(f"broker at {bootstrap} did not answer Metadata within {timeout:.0f}s ({last})")
