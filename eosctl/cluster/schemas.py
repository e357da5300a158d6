"""Keys and values in the Schema Registry wire format, decoded through the cluster's registry.

The framing (Confluent's, which Apicurio's ccompat API and Redpanda serve too): a magic byte and the
schema's id before the payload (``0x00`` + a 4-byte big-endian id, or ``0x01`` + a 16-byte GUID), the
Protobuf message-index list after it; or, since Schema Registry 8.0, the same id bytes in a
``__key_schema_id`` / ``__value_schema_id`` record header and a bare payload. The id is read by
confluent-kafka's own ``dual_schema_id_deserializer`` (the header first, then the prefix: what its
deserializers do) and the payload by the ecosystem's libraries: fastavro for Avro, protobuf for Protobuf,
jsonschema for JSON Schema. Each schema is fetched once per id and kept for the run.

A record whose bytes carry no framing where its topic's others do is not an error here: `decode` answers
`Unframed` and the caller makes it a finding. What the user must fix is an error (exit 2, one line): an id
the registry does not know, a registry that cannot be reached or refuses the credentials.
"""

from __future__ import annotations

import base64
import io
import json
import math
from dataclasses import dataclass, field
from datetime import date, datetime, time
from decimal import Decimal
from typing import Any, Literal, cast
from uuid import UUID

import fastavro
from confluent_kafka.schema_registry import (
    RegisteredSchema,
    SchemaRegistryClient,
    dual_schema_id_deserializer,
)
from confluent_kafka.schema_registry._sync.avro import _resolve_named_schema as _avro_named
from confluent_kafka.schema_registry._sync.protobuf import _resolve_named_schema as _proto_named
from confluent_kafka.schema_registry.common.protobuf import _init_pool, _str_to_proto
from confluent_kafka.schema_registry.common.serde import SchemaId
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2
from google.protobuf.descriptor_pool import DescriptorPool
from google.protobuf.message_factory import GetMessageClass
from jsonschema.validators import validator_for

from eosctl.base.errors import EosctlError, first_line
from eosctl.base.safetext import decode as bytes_text
from eosctl.config.model import Cluster

KEY, VALUE = "key", "value"
HEADERS = {KEY: "__key_schema_id", VALUE: "__value_schema_id"}
AVRO, PROTOBUF, JSON = "AVRO", "PROTOBUF", "JSON"
# A dead registry is said after one try, not after the client's default of three with back-off.
_CLIENT_DEFAULTS = {"timeout": 10, "max.retries": 0}


class SchemaRegistryProblem(EosctlError):
    """An unknown schema id, an unreachable registry or refused credentials: the user fixes the config."""


@dataclass(frozen=True)
class RegistrySettings:
    """Where a cluster's Schema Registry is and how to reach it (``[clusters.NAME] schema_registry_*``)."""

    url: str
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    ssl_ca_location: str | None = None
    ssl_certificate_location: str | None = None
    ssl_key_location: str | None = None
    ssl_key_password: str | None = field(default=None, repr=False)
    cluster: str = ""  # the config's cluster name, for the messages

    def client_conf(self) -> dict[str, Any]:
        """confluent-kafka's SchemaRegistryClient settings."""
        conf: dict[str, Any] = {"url": self.url, **_CLIENT_DEFAULTS}
        if self.username is not None:
            conf["basic.auth.user.info"] = f"{self.username}:{self.password or ''}"
        for key, value in (("ssl.ca.location", self.ssl_ca_location),
                           ("ssl.certificate.location", self.ssl_certificate_location),
                           ("ssl.key.location", self.ssl_key_location),
                           ("ssl.key.password", self.ssl_key_password)):
            if value is not None:
                conf[key] = value
        return conf


@dataclass(frozen=True)
class Decoded:
    """A framed key or value, decoded: what a person reads and the content check compares."""

    format: str  # AVRO, PROTOBUF or JSON
    schema_id: int | None  # None when the record names its schema by GUID
    guid: str | None
    id_in: str  # "prefix" or "header" (the __key_schema_id / __value_schema_id header)
    subject: str | None  # under which subject and version the registry lists the schema, where it says
    version: int | None
    data: Any  # dicts, lists, str, int, float, bool, None, bytes, Decimal, datetime, date, UUID
    message: str | None = None  # Protobuf: the message's full name (its index list resolved)


@dataclass(frozen=True)
class Unframed:
    """Bytes without the wire format where a framed key or value was expected; ``why`` says what was seen."""

    why: str


@dataclass(frozen=True)
class Undecodable:
    """Framed, with a schema the registry knows, whose payload does not decode under it."""

    format: str
    schema_id: int | None
    guid: str | None
    why: str


Outcome = Decoded | Unframed | Undecodable | None  # None: a null key or value (a tombstone)


@dataclass
class _Schema:
    format: str
    text: str
    parsed: Any  # fastavro's parsed schema, (FileDescriptorProto, DescriptorPool), or a jsonschema validator
    schema_id: int | None = None  # also where the record names it by GUID and the registry said its id
    subject: str | None = None
    version: int | None = None
    identity_read: bool = False


def registry_of(cluster: Cluster) -> RegistrySettings | None:
    """The cluster's registry settings, or None where its config names no ``schema_registry_url``."""
    if cluster.schema_registry_url is None:
        return None
    return RegistrySettings(
        cluster.schema_registry_url, cluster.schema_registry_username, cluster.schema_registry_password,
        cluster.schema_registry_ssl_ca_location, cluster.schema_registry_ssl_certificate_location,
        cluster.schema_registry_ssl_key_location, cluster.schema_registry_ssl_key_password, cluster.name)


class SchemaDecoder:
    """Decodes framed keys and values of one cluster through its registry, each schema fetched once."""

    def __init__(self, settings: RegistrySettings, client: Any = None) -> None:

        self.settings = settings
        self.client = client if client is not None else SchemaRegistryClient(settings.client_conf())
        self._by_id: dict[int, _Schema] = {}
        self._by_guid: dict[str, _Schema] = {}

    def decode(self, topic: str, which: str, data: bytes | None,
               headers: list[tuple[str, bytes | None]] | tuple[tuple[str, bytes | None], ...] = (),
               where: str = "") -> Outcome:
        """The record's key (``which="key"``) or value, decoded; ``where`` (e.g. "orders-0 offset 5") names
        the record in an error."""

        if data is None:
            return None
        header = next((v for k, v in headers if k == HEADERS[which]), None)
        id_in = "header" if header is not None else "prefix"
        framing = header if header is not None else data
        if not framing or framing[0] not in (0, 1) or len(framing) < (5 if framing[0] == 0 else 17):
            return Unframed(_unframed_why(data, header is not None))
        peek = SchemaId(AVRO)
        peek.from_bytes(io.BytesIO(bytes(framing)))
        guid = str(peek.guid) if peek.guid is not None else None
        schema = self._schema(peek.id, guid, topic, which, where)
        ctx = SerializationContext(topic, MessageField.KEY if which == KEY else MessageField.VALUE,
                                   list(headers))
        sid = SchemaId(schema.format)
        try:
            payload = dual_schema_id_deserializer(bytes(data), ctx, sid).read()
            decoded, message = self._payload(schema, payload, sid.message_indexes)
        except Exception as e:  # noqa: BLE001 - any library's decode failure is this record's, not the run's
            return Undecodable(schema.format, schema.schema_id, guid, first_line(e))
        self._identity(schema, schema.schema_id, topic, which)
        return Decoded(schema.format, schema.schema_id, guid, id_in, schema.subject, schema.version, decoded,
                       message)

    # --- the registry -----------------------------------------------------------------------------

    def _schema(self, schema_id: int | None, guid: str | None, topic: str, which: str, where: str) -> _Schema:
        known = (self._by_guid.get(guid) if guid is not None
                 else self._by_id.get(schema_id) if schema_id is not None else None)
        if known is not None:
            return known
        named = f"schema guid {guid}" if guid is not None else f"schema id {schema_id}"
        whose = f" (the {which} of {where})" if where else f" (a {which} of topic {topic})"
        with self._asking(named + whose):
            if guid is not None:
                # GET /schemas/guids/G as get_schema_by_guid sends it, read whole: its answer names the
                # schema's id too (for the subject and version), which that method drops.
                registered = RegisteredSchema.from_dict(self.client._rest_client.get(f"schemas/guids/{guid}"))
                found, schema_id = registered.schema, registered.schema_id
            else:
                assert schema_id is not None  # no GUID: decode read the magic byte 0x00 and the id after it
                found = self.client.get_schema(schema_id)
            fmt = (found.schema_type or AVRO).upper()
            text = found.schema_str or ""
            if fmt == PROTOBUF and not _is_descriptor(text) and schema_id is not None:
                # The registry answered .proto text: its base64 FileDescriptorProto is what protobuf reads.
                text = self.client.get_schema(schema_id, fmt="serialized").schema_str or ""
            parsed = self._parse(fmt, text, found)
        schema = _Schema(fmt, text, parsed, schema_id)
        if guid is not None:
            self._by_guid[guid] = schema
            if schema_id is not None:
                self._by_id.setdefault(schema_id, schema)  # a later record naming it by id asks no more
        elif schema_id is not None:
            self._by_id[schema_id] = schema
        return schema

    def _identity(self, schema: _Schema, schema_id: int | None, topic: str, which: str) -> None:
        """Subject and version of the schema, preferring the topic's own subject (TopicNameStrategy); a
        registry that does not answer this (older ones) leaves them unknown, it does not fail the run."""
        if schema.identity_read or schema_id is None:
            return
        schema.identity_read = True
        try:
            pairs = self.client.get_schema_versions(schema_id)
        except Exception:  # noqa: BLE001 - shown as unknown; decoding does not need it
            return
        preferred = f"{topic}-{which}"
        pair = next((p for p in pairs if p.subject == preferred), pairs[0] if pairs else None)
        if pair is not None:
            schema.subject, schema.version = pair.subject, pair.version

    def _asking(self, what: str) -> _Asking:
        return _Asking(self.settings, what)

    def _parse(self, fmt: str, text: str, found: Any) -> Any:
        if fmt == AVRO:

            # confluent types a referenced schema as any Avro schema (str | list | dict); a named type, the
            # only kind a reference names, is a dict: fastavro's named_schemas.
            named = cast(dict[str, dict], _avro_named(found, self.client))
            return fastavro.parse_schema(json.loads(text), named_schemas=named)
        if fmt == PROTOBUF:

            pool = DescriptorPool()
            _init_pool(pool)
            _proto_named(found, self.client, pool)
            proto = _str_to_proto("default", text)
            pool.Add(proto)
            return proto, pool
        if fmt == JSON:

            document = json.loads(text)
            return validator_for(document)(document)
        raise SchemaRegistryProblem(f"the schema registry at {self.settings.url} answered a schema of type "
                                    f"{fmt}; eosctl decodes AVRO, PROTOBUF and JSON")

    # --- payloads ---------------------------------------------------------------------------------

    def _payload(self, schema: _Schema, payload: bytes, indexes: list[int] | None) -> tuple[Any, str | None]:
        if schema.format == AVRO:

            stream = io.BytesIO(payload)
            value = fastavro.schemaless_reader(stream, schema.parsed, None)
            if stream.tell() != len(payload):
                raise ValueError(f"{len(payload) - stream.tell()} bytes left after the Avro record")
            return value, None
        if schema.format == PROTOBUF:

            proto, pool = schema.parsed
            desc = _message(pool, proto, indexes or [0])
            msg = GetMessageClass(desc)()
            msg.ParseFromString(payload)
            return _proto_value(msg), desc.full_name
        value = json.loads(payload)
        error = next(iter(schema.parsed.iter_errors(value)), None)
        if error is not None:
            raise ValueError(f"not valid under its JSON Schema: {error.message}")
        return value, None


class _Asking:
    """Turns a registry's failure into the one line that says what to fix."""

    def __init__(self, settings: RegistrySettings, what: str) -> None:
        self.settings, self.what = settings, what

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type | None, e: BaseException | None, tb: object) -> Literal[False]:
        if e is None or isinstance(e, EosctlError) or not isinstance(e, Exception):
            return False

        url, key = self.settings.url, f"clusters.{self.settings.cluster}." if self.settings.cluster else ""
        if isinstance(e, SchemaRegistryError):
            status = e.http_status_code
            if status in (401, 403):
                raise SchemaRegistryProblem(
                    f"the schema registry at {url} refused the credentials (HTTP {status}) asked for "
                    f"{self.what}; check {key}schema_registry_username and schema_registry_password"
                ) from None
            if status == 404:
                raise SchemaRegistryProblem(
                    f"{self.what} is not in the schema registry at {url} (HTTP 404: "
                    f"{first_line(e.error_message)}); point {key}schema_registry_url at the registry the "
                    "producers use") from None
            raise SchemaRegistryProblem(f"the schema registry at {url} failed for {self.what}: "
                                        f"{first_line(e)}") from None
        raise SchemaRegistryProblem(
            f"the schema registry at {url} is unreachable ({type(e).__name__}: {first_line(e)}) asked for "
            f"{self.what}; check {key}schema_registry_url and that the registry is up") from None


def _unframed_why(data: bytes, header: bool) -> str:
    if header:
        return "its schema id header is not 0x00 + a 4-byte id or 0x01 + a 16-byte GUID"
    if not data:
        return "it is empty"
    if data[0] not in (0, 1):
        return f"it starts with byte 0x{data[0]:02x}, not the magic byte 0x00"
    return f"it is {len(data)} bytes, shorter than the magic byte and schema id"


def _is_descriptor(text: str) -> bool:

    try:
        descriptor_pb2.FileDescriptorProto().ParseFromString(base64.b64decode(text.encode("ascii"),
                                                                              validate=True))
    except Exception:  # noqa: BLE001 - not base64 or not a descriptor: .proto text
        return False
    return True


def _message(pool: Any, proto: Any, indexes: list[int]) -> Any:
    """The message the index list names (Confluent's: top-level index, then nested indexes)."""
    messages = proto.message_type
    path: list[str] = []
    for depth, index in enumerate(indexes):
        if not 0 <= index < len(messages):
            raise ValueError(f"message index {index} out of range ({len(messages)} messages at depth "
                             f"{depth})")
        path.append(messages[index].name)
        messages = messages[index].nested_type
    name = ".".join(path)
    return pool.FindMessageTypeByName(f"{proto.package}.{name}" if proto.package else name)


def _proto_value(msg: Any) -> dict[str, Any]:
    """A Protobuf message as plain values, typed (int64 stays an int, bytes stay bytes, enums by name),
    every field present (proto3 defaults included): what a sink's columns hold."""
    out: dict[str, Any] = {}
    for f in msg.DESCRIPTOR.fields:
        value = getattr(msg, f.name)
        if f.message_type is not None and f.message_type.GetOptions().map_entry:
            entry = f.message_type.fields_by_name["value"]
            out[f.name] = {k: _proto_scalar(entry, v) for k, v in value.items()}
        elif f.is_repeated:
            out[f.name] = [_proto_scalar(f, v) for v in value]
        elif f.message_type is not None and not msg.HasField(f.name):
            out[f.name] = None
        else:
            out[f.name] = _proto_scalar(f, value)
    return out


def _proto_scalar(f: Any, value: Any) -> Any:
    if f.message_type is not None:
        return _proto_value(value)
    if f.enum_type is not None:
        known = f.enum_type.values_by_number.get(value)
        return known.name if known is not None else value
    return value


def plain(value: Any) -> Any:
    """A decoded value in JSON's types: a decimal as a string keeping its scale (``"12.50"``), a timestamp,
    date or UUID as its ISO/standard text, bytes as text (UTF-8 where valid, ``\\xNN`` otherwise), a
    non-finite float as its name."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, datetime | date | time):
        return value.isoformat()
    if isinstance(value, UUID):
        return str(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes_text(bytes(value))
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return str(value)


def logical(decoder: SchemaDecoder, topic: str, which: str, data: bytes | None,
            headers: list[tuple[str, bytes | None]] | tuple[tuple[str, bytes | None], ...] = (),
            ) -> str | None:
    """A key (``which="key"``) or value as what it means, not how it was written: a framed one's decoded
    value as canonical JSON (so the same record re-serialized under another schema id or version is the
    same), any other its bytes as text."""
    if data is None:
        return None
    got = decoder.decode(topic, which, data, headers)
    if isinstance(got, Decoded):
        return json.dumps(plain(got.data), sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return bytes_text(bytes(data))


def logical_key(decoder: SchemaDecoder, topic: str, data: bytes | None,
                headers: list[tuple[str, bytes | None]] | tuple[tuple[str, bytes | None], ...] = (),
                ) -> str | None:
    """A key as what it means (``logical``): the key-duplicate rule, ``lineage = "key"`` and replica
    pairing compare these."""
    return logical(decoder, topic, KEY, data, headers)
