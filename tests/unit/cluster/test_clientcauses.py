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
