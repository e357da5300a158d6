"""eosctl.cluster.clientcauses on what each library reports (no broker): librdkafka's KafkaError objects
(the hop reader meets a cluster through librdkafka), Kafka's authorization codes per request, and the PEM
checks made before any library opens a key (keys made here with openssl)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from confluent_kafka import KafkaError

from eosctl.base.errors import ConfigError
from eosctl.cluster.clientcauses import check_tls_files, denied, is_denial, librdkafka_cause
from eosctl.config.model import Cluster

SASL = Cluster(name="c", bootstrap_servers="b:9093", security_protocol="SASL_SSL",
               sasl_mechanism="SCRAM-SHA-256", sasl_username="oncall", sasl_password="hunter2",
               ssl_ca_location="/ca.pem")


def test_librdkafka_authentication_and_tls_errors_name_their_cause():
    # The texts librdkafka 2.x gives its error callback (rdkafka_sasl.c, rdkafka_ssl.c).
    auth = KafkaError(KafkaError._AUTHENTICATION, "SASL authentication error: Authentication failed during "
                      "authentication due to invalid credentials with SASL mechanism SCRAM-SHA-256")
    line = librdkafka_cause(SASL, auth)
    assert line is not None
    assert line.startswith("authentication failed: the broker refused user 'oncall' with SCRAM-SHA-256")
    assert "hunter2" not in line
    tls = KafkaError(KafkaError._SSL, "b:9093/bootstrap: SSL handshake failed: error:0A000086:SSL "
                     "routines::certificate verify failed: broker certificate could not be verified, "
                     "verify that ssl.ca.location is correctly configured or root CA certificates are "
                     "installed")
    assert librdkafka_cause(SASL, tls).startswith(
        "the broker's certificate at b:9093 is not trusted by /ca.pem")


def test_librdkafka_authorization_errors_name_the_grant():
    refused = KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED)
    assert librdkafka_cause(SASL, refused, "Fetch", "orders").startswith(
        "TopicAuthorizationFailed on orders: grant Read on topic orders")


@pytest.mark.parametrize(("code", "request_name", "name", "line"), [
    (29, "Fetch", "orders", "TopicAuthorizationFailed on orders: grant Read on topic orders"),
    (30, "OffsetFetch", "sink", "GroupAuthorizationFailed on sink: grant Describe on group sink"),
    (53, "DescribeTransactions", "t.1", "TransactionalIdAuthorizationFailed on t.1: grant Describe on "
                                        "transactional-id t.1"),
    (31, "WriteTxnMarkers", None, "ClusterAuthorizationFailed (WriteTxnMarkers): grant ClusterAction on the "
                                  "cluster"),
])
def test_kafka_authorization_codes(code, request_name, name, line):
    assert denied(code, request_name, name).startswith(line)
    assert is_denial(denied(code, request_name, name))
    assert denied(3, request_name, name) is None  # UNKNOWN_TOPIC_OR_PARTITION: not a refusal


def _key(tmp_path: Path, password: str | None) -> tuple[Path, Path]:
    key, cert = tmp_path / "k.pem", tmp_path / "c.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-days", "1", "-subj", "/CN=t",
                    "-keyout", str(key), "-out", str(cert),
                    *(["-passout", f"pass:{password}"] if password else ["-nodes"])],
                   check=True, capture_output=True, timeout=60, stdin=subprocess.DEVNULL)
    return key, cert


def test_an_encrypted_key_is_checked_before_any_library_opens_it(tmp_path):
    key, cert = _key(tmp_path, "s3cret-pw")

    def cluster(password: str | None) -> Cluster:
        return Cluster(name="c", bootstrap_servers="b:9093", security_protocol="SSL",
                       ssl_certificate_location=str(cert), ssl_key_location=str(key),
                       ssl_key_password=password)

    with pytest.raises(ConfigError, match="is an encrypted key and ssl_key_password is not set"):
        check_tls_files(cluster(None))
    with pytest.raises(ConfigError, match="cannot be decrypted with ssl_key_password") as e:
        check_tls_files(cluster("wrong-pw"))
    assert "wrong-pw" not in str(e.value)
    check_tls_files(cluster("s3cret-pw"))  # the right one passes
    (tmp_path / "other").mkdir()
    _, other = _key(tmp_path / "other", None)
    mismatched = Cluster(name="c", bootstrap_servers="b:9093", security_protocol="SSL",
                         ssl_certificate_location=str(other), ssl_key_location=str(key),
                         ssl_key_password="s3cret-pw")
    with pytest.raises(ConfigError, match="is not the key of the certificate"):
        check_tls_files(mismatched)


def _handshake_listener(offered: list[str]) -> tuple[str, list[bytes]]:
    """A listener that answers one SaslHandshake v1 as Kafka's SaslServerAuthenticator does for a mechanism
    it does not enable (UNSUPPORTED_SASL_MECHANISM, 33, and its list), then closes; the requests it got."""
    import socket
    import struct
    import threading

    server = socket.create_server(("127.0.0.1", 0))
    got: list[bytes] = []

    def serve() -> None:
        with server:
            conn, _ = server.accept()
            with conn:
                size = struct.unpack(">i", conn.recv(4))[0]
                got.append(conn.recv(size))
                body = struct.pack(">ihi", 1, 33, len(offered)) + b"".join(
                    struct.pack(">h", len(m)) + m.encode() for m in offered)
                conn.sendall(struct.pack(">i", len(body)) + body)

    threading.Thread(target=serve, daemon=True).start()
    return f"127.0.0.1:{server.getsockname()[1]}", got


def test_a_refused_login_with_a_mechanism_the_listener_does_not_offer_names_the_mechanism():
    from eosctl.cluster.clientcauses import CLOSED_AT_SASL, diagnose

    address, got = _handshake_listener(["SCRAM-SHA-512", "PLAIN"])
    cluster = Cluster(name="c", bootstrap_servers=address, security_protocol="SASL_PLAINTEXT",
                      sasl_mechanism="SCRAM-SHA-256", sasl_username="oncall", sasl_password="hunter2")
    # What kafka-python reports when the broker's answer is lost with the connection's end.
    line = diagnose(cluster, [CLOSED_AT_SASL])
    assert line == ("the broker's listener does not offer SASL mechanism SCRAM-SHA-256 (it offers "
                    "SCRAM-SHA-512, PLAIN); set sasl_mechanism to one it enables (sasl.enabled.mechanisms)")
    # SaslHandshake v1 naming the mechanism, nothing else (no user, no password).
    (request,) = got
    assert request[:4] == b"\x00\x11\x00\x01" and request.endswith(b"SCRAM-SHA-256")
    assert b"hunter2" not in request and b"oncall" not in request


def test_librdkafka_names_the_mechanisms_it_was_told():
    unsupported = KafkaError(KafkaError._UNSUPPORTED_FEATURE, "SASL SCRAM-SHA-256 mechanism handshake "
                             "failed: Broker: Unsupported SASL mechanism: broker's supported mechanisms: "
                             "SCRAM-SHA-512,PLAIN")
    assert librdkafka_cause(SASL, unsupported) == (
        "the broker's listener does not offer SASL mechanism SCRAM-SHA-256 (it offers SCRAM-SHA-512, "
        "PLAIN); set sasl_mechanism to one it enables (sasl.enabled.mechanisms)")
