"""A secured Apache Kafka node for the tests: keys and certificates made here at test time (openssl, keytool;
nothing committed), SCRAM users made at format time, the StandardAuthorizer denying by default.

Listeners (``eosctl.sandbox.apache_kafka.start(listeners=...)``):
- SASL_SSL: SCRAM-SHA-512, SCRAM-SHA-256 and PLAIN over TLS (no client certificate asked);
- SASL_SSL_512: SASL_SSL offering SCRAM-SHA-512 only (another mechanism is refused as not offered);
- SSL: TLS with a client certificate required (mTLS; the certificate's CN is the principal);
- PLAINTEXT: the broker's own inter-broker listener, also used by the tests' set-up (its principal,
  User:ANONYMOUS, is a super user: the KRaft controller's requests come from it too).
Super user ``admin``; ``oncall`` gets only the ACLs granted through ``grant``.
The broker's certificate names IP 127.0.0.1 only, so a client bootstrapping through ``localhost`` meets a
host-name mismatch (the same port, the same CA).
"""

from __future__ import annotations

import secrets
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from eosctl.sandbox import apache_kafka

MECHANISMS = ("SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN")


@dataclass(frozen=True)
class Pki:
    """PEM and PKCS12 files of one test's CA, the broker and the ``oncall`` client."""

    dir: Path
    ca: Path  # the CA that signed the broker's and the client's certificates
    other_ca: Path  # a CA that signed nothing here (the "not trusted" case)
    client_cert: Path
    client_key: Path  # unencrypted PEM
    client_key_encrypted: Path  # the same key, encrypted with ``key_password``
    key_password: str
    keystore: Path  # the broker's key and certificate (PKCS12)
    truststore: Path  # the CA, for the broker to check client certificates (PKCS12)
    store_password: str


@dataclass
class SecuredKafka:
    cluster: apache_kafka.KafkaCluster
    pki: Pki
    passwords: dict[str, str] = field(repr=False)

    @property
    def internal(self) -> str:
        """The PLAINTEXT listener (a super user's): set-up only, never a command under test."""
        return self.cluster.bootstrap

    @property
    def sasl_ssl(self) -> str:
        return self.cluster.bootstrap_of("SASL_SSL")

    @property
    def sasl_ssl_512(self) -> str:
        """A SASL_SSL listener offering SCRAM-SHA-512 alone."""
        return self.cluster.bootstrap_of("SASL_SSL_512")

    @property
    def ssl(self) -> str:
        return self.cluster.bootstrap_of("SSL")


def _run(*args: str, cwd: Path) -> None:
    subprocess.run(args, cwd=cwd, check=True, capture_output=True, timeout=60, stdin=subprocess.DEVNULL)


def make_pki(home: Path) -> Pki:
    """A CA, a broker certificate for 127.0.0.1, a client certificate with CN=oncall (its key plain and
    encrypted), another CA, and the broker's PKCS12 key and trust stores."""
    d = Path(home)
    d.mkdir(parents=True, exist_ok=True)
    store_pw = secrets.token_hex(8)
    key_pw = secrets.token_hex(8)
    for ca in ("ca", "other-ca"):
        _run("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{ca}.key", "-out",
             f"{ca}.pem", "-days", "2", "-subj", f"/CN=eosctl test {ca}", cwd=d)
    for name, cn, ext in (("broker", "broker", "subjectAltName=IP:127.0.0.1"),
                          ("client", "oncall", "extendedKeyUsage=clientAuth")):
        _run("openssl", "req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out",
             f"{name}.csr", "-subj", f"/CN={cn}", cwd=d)
        (d / f"{name}.ext").write_text(ext + "\n")
        _run("openssl", "x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
             "-CAcreateserial", "-out", f"{name}.pem", "-days", "2", "-extfile", f"{name}.ext", cwd=d)
    _run("openssl", "pkcs8", "-topk8", "-in", "client.key", "-out", "client-encrypted.key", "-v2",
         "aes-256-cbc", "-passout", f"pass:{key_pw}", cwd=d)
    _run("openssl", "pkcs12", "-export", "-in", "broker.pem", "-inkey", "broker.key", "-certfile", "ca.pem",
         "-name", "broker", "-out", "broker.p12", "-passout", f"pass:{store_pw}", cwd=d)
    _run("keytool", "-importcert", "-noprompt", "-alias", "ca", "-file", "ca.pem", "-keystore", "trust.p12",
         "-storetype", "PKCS12", "-storepass", store_pw, cwd=d)
    return Pki(dir=d, ca=d / "ca.pem", other_ca=d / "other-ca.pem", client_cert=d / "client.pem",
               client_key=d / "client.key", client_key_encrypted=d / "client-encrypted.key",
               key_password=key_pw,
               keystore=d / "broker.p12", truststore=d / "trust.p12", store_password=store_pw)


def _jaas_plain(passwords: dict[str, str]) -> str:
    users = " ".join(f'user_{u}="{p}"' for u, p in passwords.items())
    return f"org.apache.kafka.common.security.plain.PlainLoginModule required {users};"


def secured_properties(pki: Pki, passwords: dict[str, str]) -> dict[str, str]:
    scram = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
    tls = {
        "ssl.keystore.type": "PKCS12", "ssl.keystore.location": str(pki.keystore),
        "ssl.keystore.password": pki.store_password, "ssl.key.password": pki.store_password,
        "ssl.truststore.type": "PKCS12", "ssl.truststore.location": str(pki.truststore),
        "ssl.truststore.password": pki.store_password,
    }
    return {
        **{f"listener.name.{ln}.{k}": v for ln in ("sasl_ssl", "sasl_ssl_512", "ssl")
           for k, v in tls.items()},
        "listener.name.ssl.ssl.client.auth": "required",
        # The client certificate's CN is the principal (User:oncall), not its whole DN.
        "ssl.principal.mapping.rules": "RULE:^CN=([^,]+)$/$1/,DEFAULT",
        "listener.name.sasl_ssl.sasl.enabled.mechanisms": ",".join(MECHANISMS),
        "sasl.enabled.mechanisms": ",".join(MECHANISMS),
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": scram,
        "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config": scram,
        "listener.name.sasl_ssl.plain.sasl.jaas.config": _jaas_plain(passwords),
        "listener.name.sasl_ssl_512.sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "listener.name.sasl_ssl_512.scram-sha-512.sasl.jaas.config": scram,
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin;User:ANONYMOUS",
        "allow.everyone.if.no.acl.found": "false",
    }


def start(home: Path, heap: str = "512m") -> SecuredKafka:
    """Certificates, SCRAM users (admin, oncall; random passwords) and one secured node under ``home``."""
    home = Path(home)
    pki = make_pki(home / "pki")
    passwords = {"admin": "a-" + secrets.token_hex(8), "oncall": "o-" + secrets.token_hex(8)}
    scram = [arg for user, pw in passwords.items() for mech in ("SCRAM-SHA-512", "SCRAM-SHA-256")
             for arg in ("--add-scram", f"{mech}=[name={user},password={pw}]")]
    cluster = apache_kafka.start(home / "kafka", nodes=1, heap=heap, die_with_parent=True,
                                 properties=secured_properties(pki, passwords),
                                 listeners={"SASL_SSL": "SASL_SSL", "SASL_SSL_512": "SASL_SSL", "SSL": "SSL"},
                                 format_args=scram)
    return SecuredKafka(cluster=cluster, pki=pki, passwords=passwords)


def _admin(s: SecuredKafka):
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": s.internal})


def _binding(principal: str, resource: str, name: str, operation: str, prefixed: bool):
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    kind = {"topic": ResourceType.TOPIC, "group": ResourceType.GROUP,
            "transactional-id": ResourceType.TRANSACTIONAL_ID, "cluster": ResourceType.BROKER}[resource]
    op = {"Read": AclOperation.READ, "Describe": AclOperation.DESCRIBE,
          "ClusterAction": AclOperation.CLUSTER_ACTION, "Alter": AclOperation.ALTER}[operation]
    return AclBinding(kind, "kafka-cluster" if resource == "cluster" else name,
                      ResourcePatternType.PREFIXED if prefixed else ResourcePatternType.LITERAL,
                      f"User:{principal}", "*", op, AclPermissionType.ALLOW)


def grant(s: SecuredKafka, principal: str, resource: str, name: str, operation: str,
          prefixed: bool = False) -> None:
    """An ALLOW ACL (through the super user's PLAINTEXT listener, with Kafka's CreateAcls)."""
    admin = _admin(s)  # kept until the answer is in: a client dropped earlier cancels its requests
    binding = _binding(principal, resource, name, operation, prefixed)
    for f in admin.create_acls([binding], request_timeout=30).values():
        f.result(timeout=30)
    _until_in_force(admin, binding, present=True)


def revoke(s: SecuredKafka, principal: str, resource: str, name: str, operation: str,
           prefixed: bool = False) -> None:
    from confluent_kafka.admin import AclBindingFilter

    b = _binding(principal, resource, name, operation, prefixed)
    flt = AclBindingFilter(b.restype, b.name, b.resource_pattern_type, b.principal, b.host, b.operation,
                           b.permission_type)
    admin = _admin(s)
    for f in admin.delete_acls([flt], request_timeout=30).values():
        f.result(timeout=30)
    _until_in_force(admin, b, present=False)


def _until_in_force(admin, binding, present: bool, timeout: float = 30.0) -> None:
    """Until the broker's authorizer shows the change: CreateAcls/DeleteAcls answer once the controller has
    committed it, and the broker applies it from the metadata log a moment later (DescribeAcls reads the
    same StandardAuthorizer the broker authorizes requests with)."""
    import time

    from confluent_kafka.admin import AclBindingFilter

    flt = AclBindingFilter(binding.restype, binding.name, binding.resource_pattern_type, binding.principal,
                           binding.host, binding.operation, binding.permission_type)
    deadline = time.monotonic() + timeout
    while bool(admin.describe_acls(flt, request_timeout=10).result(timeout=15)) != present:
        assert time.monotonic() < deadline, f"the ACL change {binding} is not in force after {timeout:.0f} s"
        time.sleep(0.05)
