"""Records as a person reads them: each key and value as text, and decoded through the cluster's Schema
Registry where it is framed, with its subject, schema id and version (not with --raw, nor where no registry
is set).

JSON shape (`eosctl log --records`'s `records[]`, `eosctl explain`'s `record`): docs/json.md. A decoded
value becomes JSON's own types where they carry it whole (objects, arrays, strings, numbers, booleans,
null); a decimal keeps its scale as a string (``"12.50"``), a timestamp, date or UUID is its ISO/standard
text, bytes are text by eosctl.base.safetext.decode (UTF-8 where valid, ``\\xNN`` otherwise).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from eosctl.base.safetext import decode as bytes_text
from eosctl.cluster.records import Record

if TYPE_CHECKING:
    from eosctl.cluster.schemas import SchemaDecoder

KEY, VALUE = "key", "value"  # as eosctl.cluster.schemas names them


def record_document(topic: str, partition: int, record: Record, decoder: SchemaDecoder | None,
                    kind: str | None = None) -> dict[str, Any]:
    """One record's document: its key and value as text (UTF-8 where valid, ``\\xNN`` otherwise), and,
    with a ``decoder`` (the cluster names a registry), each decoded or why it is not."""
    where = f"{topic}-{partition} offset {record.offset}"
    return {
        "offset": record.offset,
        "key": None if record.key is None else bytes_text(record.key),
        "value": None if record.value is None else bytes_text(record.value),
        "timestamp": record.timestamp,
        "compression": record.compression,
        "kind": kind,
        "headers": [{"key": k, "value": None if v is None else bytes_text(v)} for k, v in record.headers],
        "key_decoded": decoded_document(topic, KEY, record.key, record.headers, decoder, where),
        "value_decoded": decoded_document(topic, VALUE, record.value, record.headers, decoder, where),
    }


def decoded_document(topic: str, which: str, data: bytes | None,
                     headers: tuple[tuple[str, bytes | None], ...], decoder: SchemaDecoder | None,
                     where: str) -> dict[str, Any] | None:
    """A key's or value's decoded document (None: no decoder, or a null key or value)."""
    if data is None or decoder is None:
        return None
    # lazy: the registry client, fastavro, protobuf: only with a registry; see docs/imports.md
    from eosctl.cluster.schemas import Decoded, Undecodable, Unframed, plain

    doc: dict[str, Any] = {"encoding": None, "schema_id": None, "guid": None, "id_in": None, "subject": None,
                           "version": None, "message": None, "data": None, "problem": None}
    got = decoder.decode(topic, which, data, headers, where)
    if isinstance(got, Decoded):
        doc.update(encoding=got.format, schema_id=got.schema_id, guid=got.guid, id_in=got.id_in,
                   subject=got.subject, version=got.version, message=got.message, data=plain(got.data))
    elif isinstance(got, Undecodable):
        doc.update(encoding="undecodable", schema_id=got.schema_id, guid=got.guid,
                   problem=f"framed as {got.format} schema "
                           f"{got.schema_id if got.guid is None else got.guid}, does not decode: {got.why}")
    else:
        why = got.why if isinstance(got, Unframed) else "not decoded"
        doc.update(encoding="unframed", problem=f"not in the Schema Registry wire format: {why}")
    return doc


def decoder_for(cluster: Any, raw: bool = False) -> SchemaDecoder | None:
    """The cluster's registry decoder, or None with ``raw`` or where its config names no registry."""
    if raw or getattr(cluster, "schema_registry_url", None) is None:
        return None
    # lazy: only where the cluster names a registry; see docs/imports.md
    from eosctl.cluster.schemas import SchemaDecoder, registry_of

    settings = registry_of(cluster)
    return None if settings is None else SchemaDecoder(settings)


def read_documents(client: Any, topic: str, partition: int, first: int, end: int,
                   decoder: SchemaDecoder | None, kind_at: Any = None, limit: int | None = None,
                   ) -> list[dict[str, Any]]:
    """The data records at offsets [first, end) (at most ``limit``), as ``record_document`` makes them:
    decoded where ``decoder`` is given; ``kind_at(offset)``: the eosctl.cluster.model.Kind of an offset
    (committed, aborted, open), where a scan knows it."""
    from eosctl.cluster.records import read_records  # lazy: only where records are shown; see docs/imports.md

    out: list[dict[str, Any]] = []
    for r in read_records(client, topic, partition, first, end):
        if limit is not None and len(out) >= limit:
            break
        kind = kind_at(r.offset) if kind_at is not None else None
        out.append(record_document(topic, partition, r, decoder, None if kind is None else kind.value))
    return out
