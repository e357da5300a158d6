"""The decoded content check of one partition, column by column (auditors.fieldcheck tries it first).

The same verdicts as the record-by-record check, at a fraction of its cost (docs/benchmarks.md): the
records' bytes are walked where the fetch answers hold them (eosctl.cluster.recordkeys.record_spans, no
Python object a record), values are grouped by schema id (each schema fetched and parsed once, through
the decoder's cache) and read by fastavro's ``schemaless_reader`` straight from the answer's buffer after
the 5-byte prefix, without their logical types (auditors.fieldcolumns.plain_schema); the sink's
columns come as one Arrow table, and each mapped column is compared whole by the converter of its (field
type, column type) pair. The rows a converter cannot clear (and rows with no decoded record at their
offset) are judged by eosctl.rules.fields as before, with the partition's records decoded there on
demand: a clean partition costs the column pass only, a faulty one the old check of its suspects.

``partition`` answers None where this path does not apply and the caller runs the record-by-record
check: a sink reader without Arrow tables (row_columns), a record with a schema id header,
a key that may be framed, a value framed by GUID, a schema other than an Avro record whose logical types
plain_schema can stand for, a mapped column of a (field type, column type) pair no converter reads,
legacy batches or one larger than a fetch.
"""

from __future__ import annotations

import io
import json
import struct
from collections.abc import Iterator, Mapping, Sequence
from operator import itemgetter
from typing import Any

import numpy as np

from auditors.fieldcolumns import FieldType, Unsupported, converter, out_of_range, plain_schema
from eosctl.cluster.batches import LOG_OVERHEAD, MAGIC_OFFSET, BatchDecodeError
from eosctl.cluster.model import TP, Kind, PartitionLog
from eosctl.cluster.recordkeys import RecordSpans, record_spans
from eosctl.report.findings import Finding
from eosctl.rules.fields import (
    MAX_SHIFT,
    Fields,
    Tolerances,
    check_fields,
    default_mapping,
    unframed_findings,
)

FETCH_BYTES = 8 << 20  # per fetch: the records are read whole around the rows' offsets
PROBE_RECORDS = 64  # records read first to tell whether a partition's values are framed at all


def partition(reader: Any, client: Any, decoder: Any, log: PartitionLog, tp: TP, columns: Sequence[str],
              tol: Tolerances, plain: dict[int, Any]) -> list[Finding] | None:
    """The partition's decoded content findings, or None where the caller must check it record by record.
    ``plain``: schema id -> (fastavro's parsed plain schema, field types) or None, kept across partitions."""
    # lazy: the registry client, fastavro, protobuf: only a registry's tasks; see docs/imports.md
    from eosctl.cluster.schemas import AVRO, VALUE, Decoded, Undecodable, _unframed_why

    if not hasattr(reader, "row_columns"):
        return None
    topic, part = tp
    sink = reader.sink
    configured = dict(sink.fields) if sink.fields is not None else None
    wanted = list(configured) if configured is not None else list(columns)
    table = reader.row_columns(topic, part, wanted)
    if not table.num_rows:
        return []
    row_off = table.column(0).to_numpy()  # in no order
    lo = max(log.log_start_offset, int(row_off.min()) - MAX_SHIFT)
    hi = min(log.high_watermark, int(row_off.max()) + MAX_SHIFT + 1)
    if lo >= hi:
        return []
    probe_end = min(hi, lo + PROBE_RECORDS)
    try:
        spans = _read(client, topic, part, lo, hi)
    except (BatchDecodeError, _Declined):
        return None
    if spans is None:
        return []
    sel = np.flatnonzero(~spans.control & (spans.offsets >= lo) & (spans.offsets < hi))
    off = spans.offsets[sel]
    if not len(off):
        return []
    if len(off) > 1 and not (np.diff(off) > 0).all():
        return None
    buf, data = spans.buf, spans.data
    vat, vlen = spans.value_at[sel], spans.value_len[sel]
    # Headers (tracing, lineage) do not change how a record decodes, unless one carries a schema id.
    with_headers = np.flatnonzero(spans.headers[sel])
    if len(with_headers):
        try:
            if any(_schema_id_header(data, at) for at in (vat[with_headers]
                                                           + np.maximum(vlen[with_headers], 0)).tolist()):
                return None
        except IndexError:  # headers running past the buffer: the record-by-record reader says what
            return None
    # The probe as fieldcheck's, record by record (at most PROBE_RECORDS, in order, up to the first that
    # decodes): the same registry lookups, the same errors.
    for i in np.flatnonzero(off < probe_end).tolist():
        value = None if vlen[i] < 0 else data[vat[i]:vat[i] + vlen[i]]
        if isinstance(decoder.decode(topic, VALUE, value, (), ""), Decoded):
            break
    else:
        return []  # not a Schema Registry topic (its first records are not framed)
    data_kind = _data_mask(log, off)
    kat, klen = spans.key_at[sel], spans.key_len[sel]
    kb = buf[kat]
    if (data_kind & (((klen >= 5) & (kb == 0)) | ((klen >= 17) & (kb == 1)))).any():
        return None  # a key that may be framed: decoded one by one (and a default mapping may map it)
    vb = np.where(vlen > 0, buf[vat], 255)
    tomb = vlen < 0
    by_id = (vlen >= 5) & (vb == 0)
    if (data_kind & (vlen >= 17) & (vb == 1)).any():
        return None
    ids = np.zeros(len(off), np.int64)
    framed_at = np.flatnonzero(by_id & data_kind)
    if len(framed_at):
        b = vat[framed_at]
        ids[framed_at] = ((buf[b + 1].astype(np.int64) << 24) | (buf[b + 2].astype(np.int64) << 16)
                          | (buf[b + 3].astype(np.int64) << 8) | buf[b + 4].astype(np.int64))
    # Each schema id, first where the record-by-record check meets it (its error names that record).
    types: dict[str, FieldType | None] | None = None
    parsed: dict[int, Any] = {}
    if len(framed_at):
        _, firsts = np.unique(ids[framed_at], return_index=True)
        for i in sorted(framed_at[firsts].tolist()):
            sid = int(ids[i])
            schema = decoder._schema(sid, None, topic, VALUE, f"{topic}-{part} offset {int(off[i])}")
            if schema.format != AVRO:
                return None
            if sid not in plain:
                plain[sid] = _plain(schema.text)
            if plain[sid] is None:
                return None
            parsed[sid], its_types = plain[sid]
            # Versions of the schema: a field typed alike in all of them keeps its converter; one that some
            # lack or type otherwise has none (a column mapped to it is checked record by record).
            types = its_types if types is None else {
                n: types[n] if n in types and n in its_types and types[n] == its_types[n] else None
                for n in {**types, **its_types}}
    # Decode, a schema at a time; fvals[k]: the plain reading of record framed_at[k] (None: not decoded).
    fvals: list[Any] = [None] * len(framed_at)
    fids = ids[framed_at]
    whys: dict[int, str] = {}
    for sid in np.unique(fids).tolist():
        ks = np.arange(len(framed_at)) if len(parsed) == 1 else np.flatnonzero(fids == sid)
        at = framed_at[ks]
        got, bad = _decode_all(data, (vat[at] + 5).tolist(), (vat[at] + vlen[at]).tolist(), parsed[sid])
        skip = set(bad)
        fine = got if not bad else [v for j, v in enumerate(got) if j not in skip]
        for name, ft in plain[sid][1].items():
            if ft is not None and ft.kind == "timestamp" and out_of_range(list(map(itemgetter(name), fine)),
                                                                          ft):
                return None  # fastavro cannot make a datetime of it: the exact check names the record
        if len(parsed) == 1:
            fvals = got
        else:
            for k, v in zip(ks.tolist(), got, strict=True):
                fvals[k] = v
        for j in bad:
            i = int(at[j])
            exact = decoder.decode(topic, VALUE, data[vat[i]:vat[i] + vlen[i]], (), "")
            if not isinstance(exact, Undecodable):
                return None  # the plain reading and fastavro's disagree: leave it to the exact check
            whys[i] = f"framed as {exact.format}, does not decode: {exact.why}"
            fvals[int(ks[j])] = None
    for i in np.flatnonzero(data_kind & ~tomb & ~by_id).tolist():
        whys[i] = _unframed_why(bytes(data[vat[i]:vat[i] + vlen[i]]), False)
    decoded = np.zeros(len(off), bool)
    decoded[framed_at] = True
    if whys:
        decoded[list(whys)] = False
    if types is None or not (decoded & data_kind).any():
        return []  # only tombstones among its data records: nothing to compare with
    fidx = np.full(len(off), -1, np.int64)
    fidx[framed_at] = np.arange(len(framed_at))
    unframed = [(int(off[i]), whys[i]) for i in sorted(whys) if data_kind[i]]
    member = data_kind & (tomb | decoded)
    records = LazyRecords(topic, decoder, spans, sel[member], off[member])
    mapping = configured
    if mapping is None:
        first = int(np.flatnonzero(member & decoded)[0])
        mapping = default_mapping(columns, records[int(off[first])])
        if not mapping:
            return []
    convs = []
    for column, path in mapping.items():
        name = path[len("value."):] if path.startswith("value.") else path
        if column not in wanted or "." in name or name in ("key", "value") or name not in types:
            return None
        col = table.column(wanted.index(column) + 1).combine_chunks()
        conv = converter(types[name], col.type)
        if conv is None:
            return None
        convs.append((name, col, conv))
    # The rows: those at an unframed record are not compared (as fieldcheck's).
    bad_at = np.array([o for o, _ in unframed], np.int64)
    kept = np.flatnonzero(~np.isin(row_off, bad_at)) if len(bad_at) else np.arange(len(row_off))
    dec_at = np.flatnonzero(member & decoded)
    dec_off = off[dec_at]
    pos = np.minimum(np.searchsorted(dec_off, row_off[kept]), max(len(dec_off) - 1, 0))
    has = dec_off[pos] == row_off[kept] if len(dec_off) else np.zeros(len(kept), bool)
    rows_has, rec_idx = kept[has], fidx[dec_at[pos[has]]].tolist()
    suspect = np.zeros(len(rows_has), bool)
    if len(rows_has):
        import pyarrow as pa  # lazy: see docs/imports.md

        take = pa.array(rows_has, pa.int64())
        picked = itemgetter(*rec_idx)(fvals) if len(rec_idx) > 1 else (fvals[rec_idx[0]],)
        names = [name for name, _, _ in convs]
        fields = zip(*map(itemgetter(*names), picked), strict=True) if len(names) > 1 else \
            [tuple(map(itemgetter(names[0]), picked))]
        for (_, col, conv), values in zip(convs, fields, strict=True):
            suspect |= conv(values, col.take(take), tol)
    suspects = set(row_off[kept[~has]].tolist()) | set(row_off[rows_has[suspect]].tolist())
    found = unframed_findings(topic, part, unframed)
    if not suspects:
        return found
    rows = [(o, cols) for o, cols in reader.row_fields(topic, part, wanted) if o in suspects]
    return [*found, *check_fields(topic, part, rows, records, mapping, tol)]


class LazyRecords(Mapping[int, Fields]):
    """The partition's records as eosctl.rules.fields reads them (offset -> decoded key and value), each
    decoded by the record-by-record decoder when first asked: a suspect row's neighbours, or every record
    where a row holds some other record's fields."""

    def __init__(self, topic: str, decoder: Any, spans: RecordSpans, at: np.ndarray,
                 offsets: np.ndarray) -> None:
        self.topic, self.decoder, self.spans = topic, decoder, spans
        self.at, self.offsets = at, offsets
        self.cache: dict[int, Fields] = {}

    def _index(self, offset: object) -> int | None:
        if not isinstance(offset, int | np.integer):
            return None
        i = int(np.searchsorted(self.offsets, offset))
        return i if i < len(self.offsets) and self.offsets[i] == offset else None

    def __getitem__(self, offset: int) -> Fields:
        from eosctl.cluster.schemas import VALUE, Decoded  # lazy: see docs/imports.md

        got = self.cache.get(offset)
        if got is not None:
            return got
        i = self._index(offset)
        if i is None:
            raise KeyError(offset)
        j = int(self.at[i])
        s, data = self.spans, self.spans.data
        ka, kl, va, vl = (int(a[j]) for a in (s.key_at, s.key_len, s.value_at, s.value_len))
        key = None if kl < 0 else data[ka:ka + kl]
        value = None
        if vl >= 0:
            got_value = self.decoder.decode(self.topic, VALUE, data[va:va + vl], (), "")
            value = got_value.data if isinstance(got_value, Decoded) else None
        got = self.cache[offset] = Fields(key, value)
        return got

    def __contains__(self, offset: object) -> bool:
        return self._index(offset) is not None

    def __iter__(self) -> Iterator[int]:
        return iter(self.offsets.tolist())

    def __len__(self) -> int:
        return len(self.offsets)


def _plain(text: str) -> tuple[Any, dict[str, FieldType | None]] | None:
    import fastavro  # lazy: with eosctl.cluster.schemas; see docs/imports.md

    try:
        schema, types = plain_schema(json.loads(text))
        return fastavro.parse_schema(schema), types
    except (Unsupported, ValueError, KeyError, TypeError, fastavro.schema.SchemaParseException):
        return None


def _decode_all(data: bytes, starts: list[int], ends: list[int], schema: Any) -> tuple[list[Any], list[int]]:
    """fastavro's reading of each payload data[start:end], from one stream over the buffer (no copy, no
    object a record but its value); and the indexes of those that do not decode or leave bytes over."""
    from fastavro import schemaless_reader as read  # lazy: with eosctl.cluster.schemas; see docs/imports.md

    stream = io.BytesIO(data)
    seek, tell = stream.seek, stream.tell
    out: list[Any] = []
    append = out.append
    bad: list[int] = []
    it = zip(range(len(starts)), starts, ends, strict=True)
    i = -1
    while True:
        try:
            for i, start, end in it:
                seek(start)
                append(read(stream, schema, None))
                if tell() != end:
                    bad.append(i)
            break
        except Exception:  # noqa: BLE001 - this record's: the record-by-record decoder says what
            if len(out) == i:
                append(None)
            bad.append(i)
    return out, bad


_SCHEMA_ID_HEADERS = (b"__key_schema_id", b"__value_schema_id")  # eosctl.cluster.schemas.HEADERS


def _schema_id_header(data: bytes, pos: int) -> bool:
    """Whether the record headers at ``pos`` (Kafka's: a varint count, then each key's and value's varint
    length and bytes) name a schema id."""
    count, pos = _varint(data, pos)
    for _ in range(max(count, 0)):
        n, pos = _varint(data, pos)
        if data[pos:pos + n] in _SCHEMA_ID_HEADERS:
            return True
        pos += n
        n, pos = _varint(data, pos)
        pos += max(n, 0)
    return False


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    """The zigzag varint at ``pos`` and the position after it."""
    shift = value = 0
    while True:
        b = data[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return (value >> 1) ^ -(value & 1), pos
        shift += 7


def _data_mask(log: PartitionLog, offsets: np.ndarray) -> np.ndarray:
    """Whether each offset is DATA (committed or not transactional): log.kind_at, for all at once."""
    if not log.ranges:
        return np.zeros(len(offsets), bool)
    firsts = np.array([r.first for r in log.ranges], np.int64)
    lasts = np.array([r.last for r in log.ranges], np.int64)
    data = np.array([r.kind is Kind.DATA for r in log.ranges], bool)
    i = np.searchsorted(firsts, offsets, side="right") - 1
    j = np.maximum(i, 0)
    return (i >= 0) & (lasts[j] >= offsets) & data[j]


class _Declined(Exception):
    """Records the column pass does not read: a legacy batch, or one larger than a fetch (the record-by-record
    reader grows its fetches)."""


def _read(client: Any, topic: str, part: int, lo: int, hi: int) -> RecordSpans | None:
    """The records of [lo, hi) as RecordSpans; None: there are none. Raises _Declined."""
    answers = []
    pos = lo
    while pos < hi:
        data = client.fetch_raw(topic, part, pos, FETCH_BYTES).records
        after = _after(memoryview(data))
        if after is None:
            if len(data):
                raise _Declined("a batch larger than a fetch")
            break
        answers.append(data)
        pos = max(pos, after)
    return record_spans(answers) if answers else None


def _after(view: memoryview) -> int | None:
    """The offset after the answer's last complete batch (None: none); a legacy batch raises _Declined."""
    pos, end, after = 0, len(view), None
    while end - pos >= LOG_OVERHEAD:
        base, length = struct.unpack_from(">qi", view, pos)
        if length < 0 or pos + LOG_OVERHEAD + length > end or end - pos <= MAGIC_OFFSET:
            break
        if view[pos + MAGIC_OFFSET] < 2:
            raise _Declined("a legacy batch")
        (last_delta,) = struct.unpack_from(">i", view, pos + 23)
        after = base + last_delta + 1
        pos += LOG_OVERHEAD + length
    return after
