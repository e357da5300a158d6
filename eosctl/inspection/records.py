"""Records as a person reads them: each key and value decoded through the cluster's Schema Registry where
it is framed, with its subject, schema id and version; as bytes with ``raw`` or where no registry is set.

JSON shape (`eosctl log --records`'s `records[]`, `eosctl explain`'s `record`): docs/json.md. A decoded
value becomes JSON's own types where they carry it whole (objects, arrays, strings, numbers, booleans,
null); a decimal keeps its scale as a string (``"12.50"``), a timestamp, date or UUID is its ISO/standard
text, bytes are text by eosctl.base.safetext.decode (UTF-8 where valid, ``\\xNN`` otherwise).
"""

from __future__ import annotations

from typing import Any

from eosctl.base.safetext import decode as bytes_text
from eosctl.cluster.records import Record
from eosctl.cluster.schemas import KEY, VALUE, Decoded, SchemaDecoder, Undecodable, Unframed, plain

RAW = "raw"


def record_document(topic: str, partition: int, record: Record, decoder: SchemaDecoder | None,
                    kind: str | None = None) -> dict[str, Any]:
    """One record's document; ``decoder`` None: its key and value as bytes."""
    where = f"{topic}-{partition} offset {record.offset}"
    return {
        "offset": record.offset,
        "timestamp": record.timestamp,
        "kind": kind,
        "key": field_document(topic, KEY, record.key, record.headers, decoder, where),
        "value": field_document(topic, VALUE, record.value, record.headers, decoder, where),
        "headers": [{"key": k, "value": None if v is None else bytes_text(v)} for k, v in record.headers],
    }


def field_document(topic: str, which: str, data: bytes | None, headers: tuple[tuple[str, bytes | None], ...],
                   decoder: SchemaDecoder | None, where: str) -> dict[str, Any] | None:
    """A key's or value's document (None: a null key or value)."""
    if data is None:
        return None
    doc: dict[str, Any] = {"encoding": RAW, "schema_id": None, "guid": None, "id_in": None, "subject": None,
                           "version": None, "message": None, "data": None, "problem": None,
                           "bytes": bytes_text(data), "size": len(data)}
    if decoder is None:
        return doc
    got = decoder.decode(topic, which, data, headers, where)
    if isinstance(got, Decoded):
        doc.update(encoding=got.format, schema_id=got.schema_id, guid=got.guid, id_in=got.id_in,
                   subject=got.subject, version=got.version, message=got.message, data=plain(got.data),
                   bytes=None)
    elif isinstance(got, Unframed):
        doc.update(encoding="unframed", problem=f"not in the Schema Registry wire format: {got.why}")
    elif isinstance(got, Undecodable):
        doc.update(encoding="undecodable", schema_id=got.schema_id, guid=got.guid,
                   problem=f"framed as {got.format} schema "
                           f"{got.schema_id if got.guid is None else got.guid}, does not decode: {got.why}")
    return doc
