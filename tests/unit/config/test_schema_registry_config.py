"""[clusters.NAME] schema_registry_*: read, checked, secrets kept out of every printed line (issue 50)."""

from __future__ import annotations

from pathlib import Path

import pytest

from eosctl.base.errors import ConfigError
from eosctl.cluster.schemas import registry_of
from eosctl.config import redaction
from eosctl.config.file import load_config

BASE = """
[clusters.prod]
bootstrap_servers = "b1:9093"
{registry}

[pipelines.pay]
source_topics = ["pay"]
group = "pay-sink"

[pipelines.pay.sink]
duckdb = "sink.duckdb"
"""


def _load(tmp_path: Path, registry: str, env: dict[str, str] | None = None):
    p = tmp_path / "eosctl.toml"
    p.write_text(BASE.format(registry=registry))
    return p, load_config(p, env=env or {})


def test_the_registry_with_basic_auth_and_tls_reaches_the_client_and_hides_its_password(tmp_path):
    (tmp_path / "ca.pem").write_text("-----BEGIN CERTIFICATE-----\n")
    _, cfg = _load(tmp_path, 'schema_registry_url = "https://sr.example:8081/"\n'
                             'schema_registry_username = "svc"\nschema_registry_password = "${SRPASS}"\n'
                             'schema_registry_ssl_ca_location = "ca.pem"\n', {"SRPASS": "sr-s3cret"})
    cluster = cfg.clusters["prod"]
    settings = registry_of(cluster)
    assert settings is not None and settings.cluster == "prod"
    assert settings.client_conf() == {"url": "https://sr.example:8081", "timeout": 10, "max.retries": 0,
                                      "basic.auth.user.info": "svc:sr-s3cret",
                                      "ssl.ca.location": str(tmp_path / "ca.pem")}
    assert "sr-s3cret" not in repr(cluster) and "sr-s3cret" not in repr(settings)
    assert redaction.redact("refused svc:sr-s3cret") == "refused svc:[the value of ${SRPASS}]"


def test_no_registry_is_no_decoding(tmp_path):
    _, cfg = _load(tmp_path, "")
    assert registry_of(cfg.clusters["prod"]) is None


@pytest.mark.parametrize(("registry", "message"), [
    ('schema_registry_url = "sr.example:8081"',
     "clusters.prod.schema_registry_url must be an http:// or https:// URL, got 'sr.example:8081'"),
    ('schema_registry_username = "svc"',
     "clusters.prod.schema_registry_username is set but clusters.prod.schema_registry_url is not; add the "
     "registry's URL (http://HOST:PORT or https://...)"),
    ('schema_registry_url = "http://sr:8081"\nschema_registry_password = "pw-not-shown"',
     "clusters.prod.schema_registry_password is set without clusters.prod.schema_registry_username; basic "
     "auth needs both"),
    ('schema_registry_url = "http://sr:8081"\nschema_registry_username = "u"\nschema_registry_password = 5',
     "clusters.prod.schema_registry_password must be a string, got an integer <secret>"),
    ('schema_registry_url = "http://sr:8081"\nschema_registry_ssl_ca_location = "/dev/zero"',
     "clusters.prod.schema_registry_ssl_ca_location (/dev/zero): it is a character device, not a regular "
     "file; name a PEM file"),
])
def test_a_bad_registry_setting_is_one_line_naming_the_key(tmp_path, registry, message):
    with pytest.raises(ConfigError) as e:
        _load(tmp_path, registry)
    assert message in str(e.value) and "\n" not in str(e.value)
    assert "pw-not-shown" not in str(e.value)
