"""eosctl.base.lazykafka: kafka-python's package __init__s held back, every name still the same object.

Each check runs in a new interpreter (the packages are imported once per process), with and without
eosctl imported first."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import eosctl.base.lazykafka as lk
from eosctl.base.lazykafka import names_of
from tests.support.helpers import REPO


def run(code: str, lazy: bool = True) -> dict:
    prefix = "import eosctl\n" if lazy else ""
    proc = subprocess.run([sys.executable, "-c", prefix + code], capture_output=True, text=True, timeout=120,
                          cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.splitlines()[-1])


def test_the_raw_clients_modules_import_without_the_admin_consumer_or_producer() -> None:
    got = run("import sys, json\n"
              "import kafka.errors, kafka.net.compat, kafka.record.default_records\n"
              "from kafka.protocol.admin import DescribeLogDirsRequest, ListGroupsRequest\n"
              "from kafka.protocol.consumer import FetchRequest, ListOffsetsRequest, OffsetSpec\n"
              "from kafka.protocol.metadata import MetadataRequest\n"
              "print(json.dumps(sorted(m for m in sys.modules if m.startswith('kafka'))))")
    assert not [m for m in got if m.split(".")[:2] in (["kafka", "admin"], ["kafka", "consumer"],
                                                       ["kafka", "producer"], ["kafka", "coordinator"])]
    assert "kafka.protocol.admin.groups" in got and "kafka.protocol.admin.acl" not in got


# Every name each package's __init__ exports, with the module that defines it and its encoding of a request.
SURVEY = """
import importlib, json
out = {}
for pkg in ("kafka", "kafka.protocol.admin", "kafka.protocol.consumer", "kafka.protocol.metadata",
            "kafka.protocol.producer"):
    m = importlib.import_module(pkg)
    for name in m.__all__:
        v = getattr(m, name)
        where = getattr(v, "__module__", type(v).__module__)
        out[pkg + ":" + name] = where + "." + getattr(v, "__qualname__", "")
from kafka.protocol.consumer import ListOffsetsRequest
from kafka.protocol.metadata import MetadataRequest
topic = MetadataRequest.MetadataRequestTopic(name="t")
out["bytes"] = [MetadataRequest(topics=[topic], allow_auto_topic_creation=False).encode(version=v).hex()
                for v in (1, 9, 12)] + [
    ListOffsetsRequest(replica_id=-1, isolation_level=1, topics=[ListOffsetsRequest.ListOffsetsTopic(
        name="t", partitions=[])]).encode(version=7).hex()]
print(json.dumps(out))
"""


def test_every_exported_name_is_the_same_and_requests_encode_the_same_bytes() -> None:
    lazy, eager = run(SURVEY), run(SURVEY, lazy=False)
    assert len(lazy) > 100
    assert lazy == eager


def test_the_first_unknown_name_runs_the_real_init() -> None:
    got = run("import json, kafka\nprint(json.dumps([kafka.__title__, kafka.KafkaAdminClient.__name__]))")
    assert got == ["kafka", "KafkaAdminClient"]
    proc = subprocess.run([sys.executable, "-c", "import eosctl, kafka; kafka.nope"], capture_output=True,
                          text=True, timeout=120, cwd=REPO)
    assert proc.returncode == 1 and proc.stderr.splitlines()[-1] == \
        "AttributeError: module 'kafka' has no attribute 'nope'"


def test_names_of_reads_star_and_named_imports(monkeypatch: pytest.MonkeyPatch) -> None:
    init = ("from .fetch import *\nfrom .fetch import __all__ as fetch_all\n"
            "from kafka.admin import (\n    A, B as C,\n)\nfrom .x import D  # why\n")
    sources = {"p.fetch": "/fetch.py"}
    texts = {"/fetch.py": "class FetchRequest(X): pass\nOffsetSpec = 1\n    class Inner: pass\n"
                          "__all__ = [1]\n"}

    monkeypatch.setattr(lk, "_read", lambda path: texts.get(path or "", ""))
    got = names_of("p", init, sources.get)
    assert got == {"FetchRequest": "p.fetch", "OffsetSpec": "p.fetch", "A": "kafka.admin", "C": "kafka.admin",
                   "D": "p.x"}
