"""A replica (`lineage = "replica"`) of a framed topic whose copier re-serialized every key under a newer
schema version and every value under the replica cluster's own registry (other ids: other bytes, the same
records), on Apache Kafka 4.4: paired by what the keys and values mean, it audits clean; a record the copier
wrote twice is exactly that duplicate; without a registry named the same bytes pair nothing (issue 50:
replica pairing on logical keys).

MM2 itself copies bytes unchanged (MirrorSourceTask), so the copier here is the test's own consumer and
transactional producer, as a replicator that re-serializes through the target's registry (a Connect
pipeline with Avro converters on both sides) writes: each committed source record in order, its timestamp
and headers kept. Both "clusters" are the session's broker (the replica hop reads each through its own
`[clusters.NAME]`); each has its own registry (tests/support/registrystub.py): the replica's gives the same
schema
another id.
"""

from __future__ import annotations

import json
import uuid
from decimal import Decimal
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from tests.support.helpers import eosctl, wait_until
from tests.support.markers import markers_written
from tests.support.registrystub import RegistryStub

pytestmark = pytest.mark.integration

KEY_V1 = json.dumps({"type": "record", "name": "LineKey", "namespace": "shop",
                     "fields": [{"name": "line_id", "type": "string"}]})
KEY_V2 = json.dumps({"type": "record", "name": "LineKey", "namespace": "shop", "doc": "v2",
                     "fields": [{"name": "line_id", "type": "string"}]})
VALUE = json.dumps({"type": "record", "name": "Line", "namespace": "shop", "fields": [
    {"name": "qty", "type": "int"},
    {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}}]})
RECORDS = 8  # committed at the source, offsets 0..7; an aborted transaction after them (8, 9, marker 10)


def key(i: int) -> dict:
    return {"line_id": f"l-{i}"}


@pytest.fixture(scope="module")
def registries():
    with RegistryStub() as src, RegistryStub() as dr:
        # The replica cluster's registry holds another schema first: its ids are not the source's.
        dr.register("other-value", json.dumps({"type": "record", "name": "Other", "fields": []}))
        yield src, dr


@pytest.fixture(scope="module")
def source(bootstrap, registries) -> str:
    src, _ = registries
    name = "replkeys" + uuid.uuid4().hex[:6]
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept: a destroyed client fails its futures
    # No time-based retention: the records' timestamps are months old, so the broker rolls their segment at
    # the next append (segment.ms counts from the first record's timestamp) and its retention check, every
    # 5 minutes, deleted it (retention.ms, 7 days, from the segment's newest timestamp): the source's log
    # start moved to 8 in the middle of the module (a clean-clone run of 2026-12-03).
    forever = {"retention.ms": "-1"}
    for f in admin.create_topics([NewTopic(t, 1, 1, config=forever)
                                  for t in (name, f"{name}.dr", f"{name}.dr2")]).values():
        f.result(30)
    client = SchemaRegistryClient({"url": src.url})
    ks, vs = AvroSerializer(client, KEY_V1), AvroSerializer(client, VALUE)
    kctx, vctx = SerializationContext(name, MessageField.KEY), SerializationContext(name, MessageField.VALUE)
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for i in range(RECORDS):
        p.produce(name, key=ks(key(i), kctx), value=vs({"qty": i, "price": Decimal(f"{i}.25")}, vctx),
                  timestamp=1_780_000_000_000 + i)
    assert p.flush(30) == 0
    t = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{name}.aborter"})
    t.init_transactions(30)
    t.begin_transaction()
    for i in range(RECORDS, RECORDS + 2):
        t.produce(name, key=ks(key(i), kctx), value=vs({"qty": i, "price": Decimal("0.01")}, vctx))
    t.flush(30)
    t.abort_transaction(30)
    markers_written(bootstrap, f"{name}.aborter")
    return name


def copy(bootstrap: str, registries, topic: str, replica: str, twice: int | None = None) -> list:
    """The re-serializing copier: every committed source record to ``replica`` in order, keys under KEY_V2
    and values under the replica registry's ids, timestamps and headers kept (``twice``: that source offset
    written a second time right after the first, a replay). Returns (source key bytes, replica key bytes)."""
    src, dr = registries
    read_key = AvroDeserializer(SchemaRegistryClient({"url": src.url}))
    read_value = AvroDeserializer(SchemaRegistryClient({"url": src.url}))
    at_dr = SchemaRegistryClient({"url": dr.url})
    ks, vs = AvroSerializer(at_dr, KEY_V2), AvroSerializer(at_dr, VALUE)
    kctx = SerializationContext(replica, MessageField.KEY)
    vctx = SerializationContext(replica, MessageField.VALUE)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"copier-{uuid.uuid4().hex[:6]}",
                         "enable.auto.commit": False, "isolation.level": "read_committed"})
    writer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{replica}.copier"})
    pairs = []
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        msgs: list = []
        wait_until("the copier read every committed source record",
                   lambda: msgs.extend(m for m in consumer.consume(10, 0.5) if m.error() is None)
                   or len(msgs) >= RECORDS, 60)
        assert [m.offset() for m in msgs] == list(range(RECORDS))
        writer.init_transactions(30)
        writer.begin_transaction()
        for m in msgs:
            k = ks(read_key(m.key(), SerializationContext(topic, MessageField.KEY)), kctx)
            v = vs(read_value(m.value(), SerializationContext(topic, MessageField.VALUE)), vctx)
            for _ in range(2 if m.offset() == twice else 1):
                writer.produce(replica, key=k, value=v, timestamp=m.timestamp()[1], headers=m.headers())
            pairs.append((m.key(), k, m.value(), v))
        writer.commit_transaction(30)
        markers_written(bootstrap, f"{replica}.copier")
    finally:
        consumer.close()
    return pairs


def config(path: Path, bootstrap: str, registries, topic: str, replica: str, *,
           registry: bool = True) -> Path:
    src, dr = registries
    urls = (f'schema_registry_url = "{src.url}"\n', f'schema_registry_url = "{dr.url}"\n') if registry \
        else ("", "")
    path.write_text(f'[clusters.src]\nbootstrap_servers = "{bootstrap}"\n{urls[0]}\n'
                    f'[clusters.dr]\nbootstrap_servers = "{bootstrap}"\n{urls[1]}\n'
                    f'[pipelines.lines-dr]\ncluster = "src"\nsource_topics = ["{topic}"]\n\n'
                    f'[pipelines.lines-dr.sink]\nkafka_topic = "{replica}"\ncluster = "dr"\n'
                    'lineage = "replica"\n')
    return path


def findings(cfg: Path) -> tuple[int, list[tuple]]:
    r = eosctl("audit", "-c", str(cfg), "--format", "json")
    assert r.exit_code in (0, 1), r.output
    return r.exit_code, [(f["kind"], f["partition"], f["first_offset"], f["last_offset"], f["count"])
                         for f in json.loads(r.stdout)["findings"]]


def test_a_replica_re_serialized_under_new_schema_ids_pairs_by_logical_key(bootstrap, registries, source,
                                                                           tmp_path):
    pairs = copy(bootstrap, registries, source, f"{source}.dr")
    # Other bytes for every key (v2 is another schema id) and every value (the replica registry's id).
    assert all(sk != rk and sv != rv for sk, rk, sv, rv in pairs)
    cfg = config(tmp_path / "c.toml", bootstrap, registries, source, f"{source}.dr")
    assert findings(cfg) == (0, [])
    # By bytes nothing pairs: every replica record names no source record (and so promises none).
    cfg = config(tmp_path / "bytes.toml", bootstrap, registries, source, f"{source}.dr", registry=False)
    assert findings(cfg) == (1, [("invalid_row", None, None, None, RECORDS)])


def test_a_record_the_re_serializing_copier_wrote_twice_is_exactly_one_duplicate(bootstrap, registries,
                                                                                  source, tmp_path):
    copy(bootstrap, registries, source, f"{source}.dr2", twice=3)
    cfg = config(tmp_path / "c.toml", bootstrap, registries, source, f"{source}.dr2")
    assert findings(cfg) == (1, [("duplicate", 0, 3, 3, 1)])
