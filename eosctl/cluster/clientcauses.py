"""What a Kafka client library's failure means, in one line that names the cause and the fix.

The libraries bury the cause: kafka-python retries a refused SASL login or a failed TLS handshake until its
bootstrap deadline, then raises only "Unable to bootstrap" (the real error is in its log records);
librdkafka reports it to an error callback as a KafkaError code (_AUTHENTICATION, _SSL, _TRANSPORT) with
OpenSSL's text; Kafka answers a request it refuses with an *_AUTHORIZATION_FAILED error code. This module
reads each and says what to change: the password (never shown), ``ssl_ca_location``, the key, the
``security_protocol``, or which ACL to grant.

- ``check_tls_files(cluster)``: PEM files are checked before any library opens them, so an encrypted key
  without its password is one line here, never OpenSSL's "Enter PEM pass phrase:" prompt.
- ``BootstrapLog``: collects the exceptions kafka-python logs while it connects; ``connect_cause`` names
  the one that explains the failure.
- ``librdkafka_cause``: the same for a librdkafka error (its error callback's KafkaError).
- ``denied``: an authorization error code of a request, as "TopicAuthorizationFailed on orders: grant Read
  on topic orders".
"""

from __future__ import annotations

import logging
import re
import socket
import ssl
import struct
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from eosctl.base.errors import BrokerError, ConfigError
from eosctl.config.model import Cluster

# Kafka's error codes for a refused operation (clients/src/main/java/org/apache/kafka/common/protocol/
# Errors.java): the resource type each names.
AUTHORIZATION_CODES = {29: ("TopicAuthorizationFailed", "topic"), 30: ("GroupAuthorizationFailed", "group"),
                       31: ("ClusterAuthorizationFailed", "cluster"),
                       53: ("TransactionalIdAuthorizationFailed", "transactional-id")}
# The operation each request needs on each resource type, as Kafka's KafkaApis authorizes it (handleFetch:
# READ topic; handleListOffset, handleTopicMetadata: DESCRIBE topic; handleOffsetFetch: DESCRIBE group and
# topic; getCoordinator: DESCRIBE group / transactional id; handleDescribeProducers: READ topic;
# handleDescribeTransactions, handleListTransactions: DESCRIBE transactional id; handleWriteTxnMarkers:
# ALTER or CLUSTER_ACTION on the cluster).
OPERATIONS = {
    # Metadata and ListOffsets need only Describe, but every topic eosctl asks them about it also reads
    # (Fetch): the grant that works is Read, which implies Describe (Kafka's AclOperation implied ops).
    ("Fetch", "topic"): "Read", ("ListOffsets", "topic"): "Read", ("Metadata", "topic"): "Read",
    ("OffsetFetch", "group"): "Describe", ("OffsetFetch", "topic"): "Describe",
    ("FindCoordinator", "group"): "Describe", ("FindCoordinator", "transactional-id"): "Describe",
    ("DescribeGroups", "group"): "Describe", ("ListGroups", "group"): "Describe",
    ("DescribeProducers", "topic"): "Read", ("DescribeTransactions", "transactional-id"): "Describe",
    ("DescribeTransactions", "topic"): "Describe",
    ("ListTransactions", "transactional-id"): "Describe", ("WriteTxnMarkers", "cluster"): "ClusterAction",
    ("InitProducerId", "transactional-id"): "Write",  # handleInitProducerIdRequest: WRITE transactional id
}
_NAMES = {name.lower(): code for code, (name, _) in AUTHORIZATION_CODES.items()}
# A TLS record's first bytes (content type 0x14-0x17, version 3.x) read as a Kafka frame length: a client
# speaking Kafka's plain protocol to a TLS listener gets the broker's TLS alert back as "Invalid frame
# length: 352518912" (0x15030300).
_TLS_RECORD = re.compile(r"frame length:? (\d+)", re.I)


def denied(code: int | str | type | BaseException, request: str, name: str | None) -> str | None:
    """One line for a refused request: "TopicAuthorizationFailed on orders: grant Read on topic orders";
    None when ``code`` (a Kafka error code, a kafka-python error class or instance, or its name) is not an
    authorization error."""
    found = _authorization_code(code)
    if found is None:
        return None
    error, resource = AUTHORIZATION_CODES[found]
    operation = OPERATIONS.get((request, resource), "Describe")
    if resource == "cluster":
        return (f"{error} ({request}): grant {operation} on the cluster "
                f"(kafka-acls --add --allow-principal User:NAME --operation {operation} --cluster)")
    target = name if name is not None else "?"
    return (f"{error} on {target}: grant {operation} on {resource} {target} "
            f"(kafka-acls --add --allow-principal User:NAME --operation {operation} --{resource} {target})")


def is_denial(text: str) -> bool:
    """Whether ``text`` is a line of ``denied`` or names a Kafka authorization error."""
    return text.startswith(tuple(name for name, _ in AUTHORIZATION_CODES.values())) or \
        _authorization_code(text) is not None


def _authorization_code(code: int | str | type | BaseException) -> int | None:
    if isinstance(code, BaseException):
        code = type(code)
    if isinstance(code, type):
        errno = getattr(code, "errno", None)
        code = errno if isinstance(errno, int) else code.__name__
    if isinstance(code, int):
        return code if code in AUTHORIZATION_CODES else None
    key = code.lower().removesuffix("error").removesuffix("_").replace("_", "")
    return _NAMES.get(key)


# --- files --------------------------------------------------------------------------------------------


_checked: dict[tuple, str | None] = {}


def check_tls_files(cluster: Cluster) -> None:
    """Refuse, in one line, certificate and key files no library could use: missing, not PEM, an encrypted
    key without ``ssl_key_password`` (OpenSSL would prompt for it on the terminal), a password that does not
    decrypt it, a key that is not the certificate's. Checked once per set of files and password."""
    key = (cluster.ssl_ca_location, cluster.ssl_certificate_location, cluster.ssl_key_location,
           cluster.ssl_key_password)
    if key not in _checked:
        _checked[key] = _tls_files_problem(cluster)
    problem = _checked[key]
    if problem:
        raise ConfigError(f"cluster {cluster.name!r}: {problem}")


def _read_pem(path: str, what: str) -> str:
    try:
        text = Path(path).read_text(errors="replace")
    except OSError as e:
        raise _Problem(f"{what} {path}: {e.strerror or type(e).__name__}") from None
    if "-----BEGIN " not in text:
        raise _Problem(f"{what} {path} is not a PEM file (no -----BEGIN line); convert it with openssl")
    return text


class _Problem(Exception):
    pass


def key_is_encrypted(pem: str) -> bool:
    """PKCS#8 "ENCRYPTED PRIVATE KEY", or a traditional key with "Proc-Type: 4,ENCRYPTED"."""
    return "-----BEGIN ENCRYPTED PRIVATE KEY-----" in pem or "Proc-Type: 4,ENCRYPTED" in pem


def _tls_files_problem(cluster: Cluster) -> str | None:
    try:
        if cluster.ssl_ca_location:
            _read_pem(cluster.ssl_ca_location, "ssl_ca_location")
            try:
                ssl.create_default_context().load_verify_locations(cafile=cluster.ssl_ca_location)
            except ssl.SSLError as e:
                return (f"ssl_ca_location {cluster.ssl_ca_location} holds no usable CA certificate "
                        f"({e.reason})")
        cert, key = cluster.ssl_certificate_location, cluster.ssl_key_location
        if key and not cert:
            return ("ssl_key_location is set without ssl_certificate_location; set both for a client "
                    "certificate")
        if cert:
            _read_pem(cert, "ssl_certificate_location")
        if key:
            pem = _read_pem(key, "ssl_key_location")
            if key_is_encrypted(pem) and not cluster.ssl_key_password:
                return (f"ssl_key_location {key} is an encrypted key and ssl_key_password is not set; "
                        "set ssl_key_password (e.g. \"${KEY_PASSWORD}\")")
        if cert:
            # A callable password: OpenSSL calls it instead of prompting on the terminal.
            password = cluster.ssl_key_password or ""
            try:
                ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT).load_cert_chain(cert, key, password=lambda: password)
            except ssl.SSLError as e:
                reason = (e.reason or "").upper()
                if "MISMATCH" in reason:
                    return (f"ssl_key_location {key} is not the key of the certificate {cert} "
                            "(KEY_VALUES_MISMATCH); use the key the certificate was made for")
                if key and key_is_encrypted(_read_pem(key, "ssl_key_location")):
                    return (f"ssl_key_location {key} cannot be decrypted with ssl_key_password "
                            f"({e.reason or 'bad decrypt'}); check the password")
                return f"ssl_certificate_location {cert} / ssl_key_location {key}: {e.reason or e}"
    except _Problem as p:
        return str(p)
    return None


# --- connecting -----------------------------------------------------------------------------------------


class BootstrapLog(logging.Handler):
    """Collects the exceptions kafka-python logs (as log record arguments) while it connects; use as a
    context manager around a client's bootstrap. With ``cluster`` and ``on_cause``, ``on_cause()`` is
    called once, at the first error that names a cause: kafka-python would retry a refused login or a
    failed TLS handshake until its deadline."""

    def __init__(self, cluster: Cluster | None = None, on_cause: Any = None,
                 stop_on_refusal: bool = False) -> None:
        super().__init__(logging.WARNING)
        self.stop_on_refusal = stop_on_refusal
        self.errors: list[BaseException | str] = []
        self._closed_logins = 0
        self._closed_early = 0
        self.cluster = cluster
        self.on_cause = on_cause
        self._logger = logging.getLogger("kafka")
        self._level = self._logger.level

    def emit(self, record: logging.LogRecord) -> None:
        args = record.args if isinstance(record.args, tuple) else ()
        found: list[BaseException | str] = [a for a in args if isinstance(a, BaseException)]
        if _closed_at_sasl(args):
            self._closed_logins += 1
            # Twice, so a broker that restarts mid-handshake is not taken for a refusal.
            if self._closed_logins >= 2:
                found.append(CLOSED_AT_SASL)
        plain = self.cluster is not None and self.cluster.security_protocol in ("PLAINTEXT", "SASL_PLAINTEXT")
        if plain and _closed_before_answering(args):
            # A TLS listener closes a plain client's connection before any answer (its alert is often
            # lost: see CLOSED_AT_SASL); twice is enough to stop waiting, diagnose() then probes for TLS.
            self._closed_early += 1
        self.errors.extend(found)
        if found and self.on_cause is not None and (
                (self.cluster is not None and connect_cause(self.cluster, found))
                or (self.stop_on_refusal and any(_refusal(e) for e in found)) or self._closed_early >= 2):
            on_cause, self.on_cause = self.on_cause, None
            on_cause()

    def __enter__(self) -> BootstrapLog:
        self._logger.addHandler(self)
        if self._logger.getEffectiveLevel() > logging.WARNING:
            self._logger.setLevel(logging.WARNING)
        return self

    def __exit__(self, *exc: object) -> None:
        self._logger.removeHandler(self)
        self._logger.setLevel(self._level)


# kafka-python 3.0.12 loses the broker's SaslAuthenticate error answer when the broker closes the connection
# right behind it (Kafka sends a failed login's answer after connection.failed.authentication.delay.ms, then
# closes): its SSL transport reads the answer and the end of the stream in one go and reports only "socket
# disconnected" (kafka/net/transport.py _sock_recv). Kafka closes a connection that answered ApiVersions and
# is still logging in only when the login failed (SaslServerAuthenticator), so that is what it means.
CLOSED_AT_SASL = "SaslAuthenticationFailed: the broker closed the connection during the SASL login"


def _closed_at_sasl(args: tuple) -> bool:
    conn = next((a for a in args if hasattr(a, "sasl_enabled") and hasattr(a, "initializing")), None)
    error = next((a for a in args if isinstance(a, BaseException)), None)
    return (conn is not None and error is not None and "socket disconnected" in str(error)
            and bool(conn.sasl_enabled) and getattr(conn, "broker_version_data", None) is not None)


def _refusal(error: BaseException | str) -> bool:
    """A refused TCP connection or a host name that does not resolve: nothing to wait for."""
    text = str(error).lower()
    return any(s in text for s in ("econnrefused", "connection refused", "name or service not known",
                                   "nodename nor servname", "dns resolution failure", "dns lookup failed"))


def _closed_before_answering(args: tuple) -> bool:
    conn = next((a for a in args if hasattr(a, "sasl_enabled") and hasattr(a, "initializing")), None)
    error = next((a for a in args if isinstance(a, BaseException)), None)
    return (conn is not None and error is not None and "socket disconnected" in str(error)
            and getattr(conn, "broker_version_data", None) is None)


def stop_bootstrap(manager: Any) -> None:
    """Make kafka-python's bootstrap loop (``while not self.closed``) give up at its next turn. Only the
    flag is set here, from inside its event loop; ``reopen_for_close`` clears it so that the client's own
    close() still closes its connections."""
    manager.closed = True
    wakeup = getattr(manager, "_bootstrap_wakeup", None)
    if wakeup is not None:
        wakeup.notify()  # end its backoff sleep now (as its close() does)


def reopen_for_close(manager: Any) -> None:
    manager.closed = False


def connect_cause(cluster: Cluster, errors: Iterable[BaseException | str]) -> str | None:
    """The cause behind a failed connection, from what the client library reported along the way (exceptions
    or their text); None when nothing there names one (then the network is the likely cause)."""
    texts = [f"{type(e).__name__}: {e}" if isinstance(e, BaseException) else str(e) for e in errors]
    # Most telling first: an authentication refusal beats the disconnects that follow it.
    for rule in (_sasl, _client_certificate, _untrusted, _tls_on_plain, _plain_on_tls, _key):
        for text in texts:
            line = rule(cluster, text)
            if line:
                return line
    return None


def diagnose(cluster: Cluster, errors: Iterable[BaseException | str]) -> str | None:
    """``connect_cause``, or, when the client's errors name none and the client speaks Kafka's plain
    protocol, a TLS handshake of our own: a listener that answers one speaks TLS (kafka-python often reports
    only "socket disconnected" there: the broker's TLS alert arrives with the end of the stream). A refused
    SASL login is checked against the mechanisms the listener offers (``sasl_cause``)."""
    cause = sasl_cause(cluster, connect_cause(cluster, errors))
    plain = cluster.security_protocol in ("PLAINTEXT", "SASL_PLAINTEXT")
    if cause is None and plain and speaks_tls(_host(cluster)):
        want = "SASL_SSL" if cluster.security_protocol == "SASL_PLAINTEXT" else "SSL"
        return (f"{_host(cluster)} speaks TLS (an SSL or SASL_SSL listener) but security_protocol is "
                f"{cluster.security_protocol}; set security_protocol = \"{want}\" and ssl_ca_location")
    return cause


def speaks_tls(address: str, timeout: float = 2.0) -> bool:
    """Whether ``host:port`` answers a TLS handshake (any answer in TLS, an alert included)."""
    host, _, port = address.rpartition(":")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE  # a probe of the protocol only: nothing is sent or trusted
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout) as raw, \
                context.wrap_socket(raw, server_hostname=host.strip("[]")):
            return True
    except ssl.SSLError as e:
        return "ALERT" in (e.reason or "").upper()
    except (OSError, ValueError):
        return False


_NOT_OFFERED = "the broker's listener does not offer SASL mechanism"
_REFUSED = "authentication failed: the broker refused user"
# librdkafka's text for Kafka's UNSUPPORTED_SASL_MECHANISM: "... broker's supported mechanisms: A,B".
_SUPPORTED = re.compile(r"supported mechanisms:\s*([A-Z0-9_,\- ]+)", re.I)


def _not_offered(mechanism: str, offered: Iterable[str] | None) -> str:
    listed = ", ".join(offered) if offered else ""
    return (f"{_NOT_OFFERED} {mechanism}" + (f" (it offers {listed})" if listed else "")
            + "; set sasl_mechanism to one it enables (sasl.enabled.mechanisms)")


def _sasl(cluster: Cluster, text: str) -> str | None:
    low = text.lower()
    mechanism = cluster.sasl_mechanism or "PLAIN"
    user = cluster.sasl_username
    if "unsupportedsaslmechanism" in low or "unsupported sasl mechanism" in low:
        supported = _SUPPORTED.search(text)
        return _not_offered(mechanism, [m.strip() for m in supported.group(1).split(",") if m.strip()]
                            if supported else None)
    if any(s in low for s in ("saslauthenticationfailed", "sasl authentication error",
                              "authentication failed")):
        return (f"{_REFUSED} {user!r} with {mechanism} (a wrong "
                f"password, or no {mechanism} credentials for that user on the broker); check sasl_username "
                "and sasl_password")
    return None


def sasl_cause(cluster: Cluster, cause: str | None) -> str | None:
    """``cause``, unless it is a refused SASL login (or a mechanism not offered, without the list): then
    the mechanisms the listener offers, asked of it (``offered_mechanisms``), decide. kafka-python loses
    the broker's UNSUPPORTED_SASL_MECHANISM answer when the connection's end arrives with it (as it loses a
    failed login's: CLOSED_AT_SASL), so a mechanism the listener does not offer read as a wrong password
    in most runs; a password is blamed only when the mechanism is offered."""
    if cause is None or not cluster.security_protocol.startswith("SASL_"):
        return cause
    refused = cause.startswith(_REFUSED)
    unlisted = cause.startswith(_NOT_OFFERED) and "(it offers " not in cause
    if not refused and not unlisted:
        return cause
    offered = offered_mechanisms(cluster)
    mechanism = (cluster.sasl_mechanism or "PLAIN").upper()
    if offered is None or mechanism in offered:
        return cause  # offered: the login itself was refused (the password, or no credentials)
    return _not_offered(mechanism, offered)


# Kafka's SaslHandshake (api key 17; v1: the authentication bytes follow in SaslAuthenticate, KIP-152):
# any listener answers it as a connection's first request, with the mechanisms it enables (error 33,
# UNSUPPORTED_SASL_MECHANISM, for one it does not), and nothing secret is sent.
_SASL_HANDSHAKE = 17
_offered: dict[tuple, list[str] | None] = {}


def offered_mechanisms(cluster: Cluster, timeout: float = 5.0) -> list[str] | None:
    """The SASL mechanisms the first bootstrap listener enables, from a SaslHandshake of our own (TLS as
    the cluster's security_protocol says; the certificate is not checked: only a mechanism's name is sent);
    None where it cannot be read (no answer, not Kafka). Asked once per listener and process."""
    key = (_host(cluster), cluster.security_protocol, cluster.ssl_certificate_location)
    if key not in _offered:
        _offered[key] = _ask_mechanisms(cluster, timeout)
    return _offered[key]


def _ask_mechanisms(cluster: Cluster, timeout: float) -> list[str] | None:
    host, _, port = _host(cluster).rpartition(":")
    host = host.strip("[]")
    mechanism = (cluster.sasl_mechanism or "PLAIN").encode()
    client = b"eosctl"
    body = (struct.pack(">hhih", _SASL_HANDSHAKE, 1, 1, len(client)) + client
            + struct.pack(">h", len(mechanism)) + mechanism)
    try:
        with socket.create_connection((host, int(port)), timeout=timeout) as raw:
            sock: Any = raw
            if cluster.security_protocol == "SASL_SSL":
                context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
                context.check_hostname = False
                context.verify_mode = ssl.CERT_NONE  # a probe: the name of a mechanism is all it sends
                if cluster.ssl_certificate_location:
                    password = cluster.ssl_key_password or ""
                    context.load_cert_chain(cluster.ssl_certificate_location, cluster.ssl_key_location,
                                            password=lambda: password)
                sock = context.wrap_socket(raw, server_hostname=host)
            sock.sendall(struct.pack(">i", len(body)) + body)
            size = struct.unpack(">i", _read(sock, 4))[0]
            if not 10 <= size <= 1 << 16:
                return None
            answer = _read(sock, size)
        correlation, _error, count = struct.unpack(">ihi", answer[:10])
        if correlation != 1 or not 0 <= count <= 64:
            return None
        names, at = [], 10
        for _ in range(count):
            (length,) = struct.unpack(">h", answer[at:at + 2])
            names.append(answer[at + 2:at + 2 + length].decode("utf-8", "replace").upper())
            at += 2 + length
        return names
    except (OSError, ValueError, struct.error):
        return None


def _read(sock: Any, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ValueError("the listener closed the connection")
        data += chunk
    return data


def _client_certificate(cluster: Cluster, text: str) -> str | None:
    low = text.lower()
    if any(s in low for s in ("alert bad certificate", "alert certificate required", "certificate_required",
                              "alert unknown ca")):
        have = (f"ssl_certificate_location {cluster.ssl_certificate_location}"
                if cluster.ssl_certificate_location else "no ssl_certificate_location")
        return (f"the broker refused the client certificate ({have}): this listener requires one signed by a "
                "CA its truststore holds; set ssl_certificate_location and ssl_key_location")
    return None


def _untrusted(cluster: Cluster, text: str) -> str | None:
    low = text.lower()
    if "certificate verify failed" not in low and "certificate_verify_failed" not in low:
        return None
    host = _host(cluster)
    if "hostname mismatch" in low or "ip address mismatch" in low or "does not match" in low:
        return (f"the broker's certificate does not name {host.rpartition(':')[0] or host} (TLS host name "
                "check): connect by a name or address the certificate lists (its subjectAltName), or reissue "
                "the certificate")
    ca = cluster.ssl_ca_location or "the system's CA store (ssl_ca_location not set)"
    detail = re.search(r"certificate verify failed: ([^(]+)", text, re.I)
    return (f"the broker's certificate at {host} is not trusted by {ca}"
            + (f" ({detail.group(1).strip()})" if detail else "")
            + "; set ssl_ca_location to the CA that signed the broker's certificate")


def _tls_on_plain(cluster: Cluster, text: str) -> str | None:
    match = _TLS_RECORD.search(text)
    if not match or cluster.security_protocol not in ("PLAINTEXT", "SASL_PLAINTEXT"):
        return None
    value = int(match.group(1))
    want = "SASL_SSL" if cluster.security_protocol == "SASL_PLAINTEXT" else "SSL"
    if 0x14 <= value >> 24 <= 0x17 and (value >> 16) & 0xFF == 3:
        return (f"{_host(cluster)} speaks TLS (an SSL or SASL_SSL listener) but security_protocol is "
                f"{cluster.security_protocol}; set security_protocol = \"{want}\" and ssl_ca_location")
    return None


def _plain_on_tls(cluster: Cluster, text: str) -> str | None:
    if cluster.security_protocol not in ("SSL", "SASL_SSL"):
        return None
    low = text.lower()
    if any(s in low for s in ("wrong version number", "unexpected_eof_while_reading", "record layer failure",
                              "eof occurred in violation", "packet length too long", "http request")):
        return (f"{_host(cluster)} does not speak TLS (a PLAINTEXT or SASL_PLAINTEXT listener?) but "
                f"security_protocol is {cluster.security_protocol}; use the broker's TLS listener port, or "
                "set security_protocol to what this listener speaks")
    return None


def _key(cluster: Cluster, text: str) -> str | None:
    low = text.lower()
    if "pem lib" in low or "bad decrypt" in low or "ssl.key.password" in low:
        return (f"ssl_key_location {cluster.ssl_key_location} cannot be decrypted with ssl_key_password; "
                "check the password")
    return None


def _host(cluster: Cluster) -> str:
    return cluster.bootstrap_servers.split(",")[0].strip()


def librdkafka_cause(cluster: Cluster, error: Any, request: str = "Fetch",
                     name: str | None = None) -> str | None:
    """The cause behind a librdkafka error (a confluent_kafka.KafkaError from an error callback, a message's
    error() or a KafkaException's args[0]); None when it names none. ``request`` and ``name``: what was
    asked of which resource, for an authorization error."""
    text = error.str() if hasattr(error, "str") else str(error)
    name_of_error = error.name() if hasattr(error, "name") else ""
    code = error.code() if hasattr(error, "code") else None
    denial = denied(name_of_error, request, name) if name_of_error else None
    if denial is None and isinstance(code, int) and code > 0:
        denial = denied(code, request, name)
    return denial or sasl_cause(cluster, connect_cause(cluster, [f"{name_of_error}: {text}"]))


class LibrdkafkaErrors:
    """A librdkafka ``error_cb`` that keeps the errors naming a cause (authentication, TLS, a refused
    operation): librdkafka retries those forever in the background while a consumer's poll returns
    nothing. ``raise_if_any`` turns the first into one BrokerError line."""

    def __init__(self, cluster: Cluster, ignore: Iterable[int] = ()) -> None:
        self.cluster = cluster
        self.ignore = set(ignore)
        self.causes: list[str] = []

    def __call__(self, error: Any) -> None:
        if hasattr(error, "code") and error.code() in self.ignore:
            return
        cause = librdkafka_cause(self.cluster, error, "Metadata")
        if cause:
            self.causes.append(cause)

    def raise_if_any(self) -> None:
        if self.causes:
            raise BrokerError(f"cannot read from Kafka at {self.cluster.bootstrap_servers}: {self.causes[0]}")

