"""The content check on decoded records: does each sink row's typed columns hold its record's fields?

Where keys and values are framed for a Schema Registry (eosctl.cluster.schemas), a sink stores the decoded
fields as typed columns (decimals, timestamps, nested records), never the bytes, so the byte-level check
(eosctl.rules.content) cannot judge it. Here each row's mapped columns are compared with the fields of the
record at its offset, as values of their type:

- a decimal by its value (``12.50`` == ``12.5``); one off by a power of ten is named as written at another
  scale;
- a timestamp as an instant (a time without a zone is UTC, what sinks store), both truncated to the
  precision the user names (``timestamp_precision``: a sink that keeps milliseconds of a microsecond
  field); an integer column against a timestamp field is epoch milliseconds;
- a float within the relative tolerance the user names (``float_tolerance``);
- bytes as bytes, an enum by its symbol, nested records and arrays as values (a JSON text column is read
  as JSON first).

A row that differs is explained in this order (finding kind ``content_mismatch``):
- ``shifted_coordinates``: every mapped column equals the record's at a neighbouring offset (|d| <= 3):
  consecutive rows with one shift are one finding;
- ``different_record``: no mapped column is its record's (the row holds another record's fields at this
  offset; where it is one of the partition's records, that offset is named);
- ``different_field``: some columns are the record's and others not: a transform or a column mapping
  that mangles a field. The finding names the field and both values (shown safely, long values cut).

A record whose value is not in the wire format where the partition's others are is ``unframed_record``
(unframed_findings): a producer that wrote without the serializer; its row, if any, is not judged.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal, InvalidOperation
from typing import Any
from uuid import UUID

from eosctl.base.safetext import decode as bytes_text
from eosctl.base.safetext import term
from eosctl.report.findings import Cause, Finding

KIND = "content_mismatch"
MAX_SHIFT = 3
SHIFTS = tuple(d for k in range(1, MAX_SHIFT + 1) for d in (k, -k))  # nearest first, as eosctl.rules.content
SHIFTED, DIFFERENT_RECORD, DIFFERENT_FIELD = "shifted_coordinates", "different_record", "different_field"
UNFRAMED = "unframed_record"
PRECISIONS = {"s": 1_000_000, "ms": 1_000, "us": 1}  # microseconds per unit
SHOWN_CHARS = 80  # of a value in a finding's summary


@dataclass(frozen=True)
class Tolerances:
    """What the user allows to differ (``[pipelines.NAME.sink]`` float_tolerance, timestamp_precision)."""

    float_relative: float = 0.0
    timestamp_precision: str | None = None  # "s", "ms", "us"; None: exact


@dataclass(frozen=True)
class Fields:
    """A decoded record's key and value (plain values: dicts, lists, Decimal, datetime, bytes, ...)."""

    key: Any
    value: Any


def field_of(record: Fields, path: str) -> tuple[bool, Any]:
    """(found, value) of ``path`` in the record: ``value.a.b`` or ``key.id``; ``key`` or ``value``: the whole
    key or value (an Avro string key); a bare name is the value's."""
    if path in ("key", "value"):
        return True, record.key if path == "key" else record.value
    head, _, rest = path.partition(".")
    if head in ("key", "value") and rest:
        node: Any = record.key if head == "key" else record.value
        parts = rest.split(".")
    else:
        node, parts = record.value, path.split(".")
    for part in parts:
        if isinstance(node, Mapping) and part in node:
            node = node[part]
        else:
            return False, None
    return True, node


def default_mapping(columns: Iterable[str], record: Fields, key_column: str | None = None) -> dict[str, str]:
    """The mapping a config need not write: the sink's columns named like the value's top-level fields, and
    its key column (``key_column``) to the decoded key where that is one value (a string, a number) or a
    record of one field."""
    out = {c: f"value.{c}" for c in columns if isinstance(record.value, Mapping) and c in record.value}
    if key_column is not None and key_column not in out:
        if isinstance(record.key, Mapping) and len(record.key) == 1:
            out[key_column] = f"key.{next(iter(record.key))}"
        elif isinstance(record.key, str | int) and not isinstance(record.key, bool):
            out[key_column] = "key"
    return out


def same(sink: Any, record: Any, tol: Tolerances = Tolerances()) -> bool:
    """Whether a sink column's value is the record field's, compared as values of the field's type."""
    return _why_not(sink, record, tol) is None


def _why_not(sink: Any, record: Any, tol: Tolerances) -> str | None:
    """None where they are the same; otherwise a few words on how they differ (wrong scale, ...)."""
    if record is None or sink is None:
        return None if record is None and sink is None else "one is null"
    if isinstance(record, bool) or isinstance(sink, bool):
        a, b = _as_bool(sink), _as_bool(record)
        return None if isinstance(a, bool) and isinstance(b, bool) and a == b else "differs"
    if isinstance(record, datetime):
        return _instant_why(sink, record, tol)
    if isinstance(record, date):
        return None if _as_date(sink) == record else "differs"
    if isinstance(record, Decimal) or isinstance(sink, Decimal):
        return _decimal_why(sink, record)
    if isinstance(record, float) or isinstance(sink, float):
        a, b = _as_float(sink), _as_float(record)
        if a is None or b is None:
            return "differs"
        if a == b or (math.isnan(a) and math.isnan(b)):
            return None
        return None if abs(a - b) <= tol.float_relative * max(abs(a), abs(b)) else "differs"
    if isinstance(record, int):
        return None if _as_int(sink) == record else "differs"
    if isinstance(record, bytes | bytearray | memoryview):
        got = bytes(sink) if isinstance(sink, bytes | bytearray | memoryview) else None
        return None if got == bytes(record) else "differs"
    if isinstance(record, UUID):
        return None if str(sink).lower() == str(record) else "differs"
    if isinstance(record, Mapping | list | tuple):
        return _nested_why(sink, record, tol)
    if isinstance(record, str):
        return None if isinstance(sink, str) and sink == record else "differs"
    return None if sink == record else "differs"


def _instant_why(sink: Any, record: datetime, tol: Tolerances) -> str | None:
    got = _as_instant(sink)
    if got is None:
        return "not a time"
    unit = PRECISIONS.get(tol.timestamp_precision or "us", 1)
    a, b = _micros(got) // unit, _micros(record) // unit
    if a == b:
        return None
    if tol.timestamp_precision is None and _micros(got) // 1000 == _micros(record) // 1000:
        return "differs below the millisecond (set timestamp_precision = \"ms\" if the sink keeps ms)"
    return "differs"


def _decimal_why(sink: Any, record: Any) -> str | None:
    a, b = _as_decimal(sink), _as_decimal(record)
    if a is None or b is None:
        return "differs"
    if a == b:
        return None
    if a != 0 and b != 0:
        for k in range(1, 19):
            for f in (Decimal(10) ** k, Decimal(10) ** -k):
                if a == b * f:
                    exponent = b.as_tuple().exponent
                    scale = -exponent if isinstance(exponent, int) else 0
                    return f"the same digits at another scale (the record's is {scale}; x10^{_exp(f)})"
    return "differs"


def _exp(f: Decimal) -> int:
    return int(f.log10())


def _nested_why(sink: Any, record: Any, tol: Tolerances) -> str | None:
    if isinstance(sink, str):
        try:
            sink = json.loads(sink)
        except ValueError:
            return "differs"
    if isinstance(record, Mapping):
        if not isinstance(sink, Mapping) or set(map(str, sink)) != set(map(str, record)):
            return "differs"
        by_name = {str(k): v for k, v in sink.items()}
        bad = [k for k, v in record.items() if _why_not(by_name[str(k)], v, tol) is not None]
        return None if not bad else f"its field {bad[0]} differs"
    if not isinstance(sink, list | tuple) or len(sink) != len(record):
        return "differs"
    bad_i = [i for i, (s, r) in enumerate(zip(sink, record, strict=True)) if _why_not(s, r, tol) is not None]
    return None if not bad_i else f"its item {bad_i[0]} differs"


def _as_bool(v: Any) -> Any:
    if isinstance(v, str) and v.lower() in ("true", "false"):
        return v.lower() == "true"
    return v


def _as_decimal(v: Any) -> Decimal | None:
    if isinstance(v, bool):
        return None
    try:
        return Decimal(str(v)) if isinstance(v, int | float | str | Decimal) else None
    except InvalidOperation:
        return None


def _as_float(v: Any) -> float | None:
    if isinstance(v, bool):
        return None
    try:
        return float(v) if isinstance(v, int | float | str | Decimal) else None
    except ValueError:
        return None


def _as_int(v: Any) -> int | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    d = _as_decimal(v)
    return int(d) if d is not None and d == d.to_integral_value() else None


def _as_date(v: Any) -> date | None:
    if isinstance(v, datetime):
        return v.date()
    if isinstance(v, date):
        return v
    if isinstance(v, str):
        try:
            return date.fromisoformat(v)
        except ValueError:
            return None
    return None


def _as_instant(v: Any) -> datetime | None:
    if isinstance(v, datetime):
        return v if v.tzinfo else v.replace(tzinfo=UTC)
    if isinstance(v, int) and not isinstance(v, bool):  # epoch milliseconds (Kafka's and Connect's unit)
        return datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=v)
    if isinstance(v, str):
        try:
            got = datetime.fromisoformat(v)
        except ValueError:
            return None
        return got if got.tzinfo else got.replace(tzinfo=UTC)
    return None


def _micros(t: datetime) -> int:
    delta = t - datetime(1970, 1, 1, tzinfo=UTC)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def shown(value: Any, limit: int = SHOWN_CHARS) -> str:
    """A value for a finding's summary: its text, escaped for any terminal, cut when long."""
    if isinstance(value, bytes | bytearray | memoryview):
        text = "b'" + bytes_text(bytes(value)) + "'"
    elif isinstance(value, datetime | date):
        text = value.isoformat()
    elif isinstance(value, Decimal):
        text = str(value)
    else:
        text = repr(value)
    text = term(text)
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text) - limit} more characters)"


# --- the rule --------------------------------------------------------------------------------------------


def check_fields(topic: str, partition: int, rows: Sequence[tuple[int, Mapping[str, Any]]],
                 records: Mapping[int, Fields], mapping: Mapping[str, str],
                 tol: Tolerances = Tolerances()) -> list[Finding]:
    """The ``content_mismatch`` findings of one partition: ``rows`` are its sink rows (offset, {column:
    value}), ``records`` the decoded records by offset, ``mapping`` column -> field path (see field_of)."""
    rows = sorted(rows, key=lambda r: r[0])
    # Per row: None (its record's fields), a shift, or the columns that differ with why.
    verdicts: list[tuple[int, Mapping[str, Any], Any]] = []
    for offset, cols in rows:
        rec = records.get(offset)
        differ = _differing(cols, rec, mapping, tol) if rec is not None else []
        if rec is not None and not differ:
            continue
        shift = next((d for d in SHIFTS if offset - d in records
                      and not _differing(cols, records[offset - d], mapping, tol)), None)
        if rec is None and shift is None:
            continue  # no record there (a marker, a phantom) and no neighbour's: the offset rules say it
        verdicts.append((offset, cols, shift if shift is not None else differ))
    findings: list[Finding] = []
    i = 0
    while i < len(verdicts):
        offset, cols, v = verdicts[i]
        if isinstance(v, int):
            j = i
            while (j + 1 < len(verdicts) and verdicts[j + 1][2] == v
                   and verdicts[j + 1][0] == verdicts[j][0] + 1):
                j += 1
            # A run may pass over a marker, but rows only at offsets with no data record are not a shift:
            # their phantom finding is theirs alone (one finding per row, docs/audit.md).
            if any(verdicts[k][0] in records for k in range(i, j + 1)):
                findings.append(_shift_finding(topic, partition, offset, verdicts[j][0], j - i + 1, v))
            i = j + 1
            continue
        findings.append(_row_finding(topic, partition, offset, cols, records, mapping, v, tol))
        i += 1
    return findings


def _differing(cols: Mapping[str, Any], rec: Fields, mapping: Mapping[str, str],
               tol: Tolerances) -> list[tuple[str, str, Any, Any, str]]:
    """(column, field, sink value, record value, why) of each mapped column that is not the record's."""
    out = []
    for column, path in mapping.items():
        if column not in cols:
            continue
        found, value = field_of(rec, path)
        sink_value = cols[column]
        if not found:
            if sink_value is not None:
                out.append((column, path, sink_value, None, "the record has no such field"))
            continue
        why = _why_not(sink_value, value, tol)
        if why is not None:
            out.append((column, path, sink_value, value, why))
    return out


def _shift_finding(topic: str, partition: int, first: int, last: int, rows: int, shift: int) -> Finding:
    tp = f"{topic}[{partition}]"
    where = f"offset {first}" if first == last else f"offsets {first}..{last}"
    summary = (f"The sink's {rows} row{'s' * (rows != 1)} at {tp} {where} hold the decoded fields of the "
               f"record{'s' * (rows != 1)} {shift} offset{'s' * (abs(shift) != 1)} "
               f"{'before' if shift > 0 else 'after'}: a writer that stores shifted coordinates (offset "
               f"{'+' if shift > 0 else '-'} {abs(shift)}).")
    return Finding(KIND, topic, partition, first, last, last - first + 1,
                   detail=f"fields of the record at offset - {shift}",
                   cause=Cause(KIND, summary, rule=SHIFTED, shift=shift))


def _row_finding(topic: str, partition: int, offset: int, cols: Mapping[str, Any],
                 records: Mapping[int, Fields], mapping: Mapping[str, str],
                 differ: list[tuple[str, str, Any, Any, str]], tol: Tolerances) -> Finding:
    tp = f"{topic}[{partition}] offset {offset}"
    compared = [c for c in mapping if c in cols]
    # Another record of the partition whose fields the row holds whole: the row is that record's.
    other = next((o for o, rec in sorted(records.items()) if o != offset
                  and not _differing(cols, rec, mapping, tol)), None)
    if other is not None or (len(differ) == len(compared) and len(compared) > 1):
        if other is not None:
            whose = f"the record at offset {other}'s"
            how = f"all {len(compared)} mapped columns are that record's, {len(differ)} not its own's"
        else:
            whose, how = "another record's", f"none of its {len(compared)} mapped columns matches"
        summary = (f"The sink's row at {tp} holds {whose} fields, not its own record's ({how}): a writer "
                   "that mixed up records, or a log rewritten under the sink.")
        return Finding(KIND, topic, partition, offset, offset, 1,
                       detail="another record's fields" if other is None else f"the fields of offset {other}",
                       cause=Cause(KIND, summary, rule=DIFFERENT_RECORD))
    column, path, sink_value, value, why = differ[0]
    more = f" ({len(differ) - 1} more column{'s' * (len(differ) != 2)} differ)" if len(differ) > 1 else ""
    summary = (f"The sink's row at {tp} holds its record's fields but column {column!r} (field {path}) "
               f"holds {shown(sink_value)} where the record has {shown(value)}: {why}{more}: a transform or "
               "column mapping that mangles the field.")
    return Finding(KIND, topic, partition, offset, offset, 1,
                   detail=f"{column}: sink {shown(sink_value)}, record {shown(value)}",
                   cause=Cause(KIND, summary, rule=DIFFERENT_FIELD))


def unframed_findings(topic: str, partition: int, unframed: Sequence[tuple[int, str]]) -> list[Finding]:
    """One finding per run of consecutive offsets whose records are not framed (offset, why), where the
    partition's other records are."""
    out: list[Finding] = []
    runs: list[list[tuple[int, str]]] = []
    for o, why in sorted(unframed):
        if runs and runs[-1][-1][0] == o - 1:
            runs[-1].append((o, why))
        else:
            runs.append([(o, why)])
    for run in runs:
        first, last, why = run[0][0], run[-1][0], run[0][1]
        tp = f"{topic}[{partition}]"
        where = f"offset {first} is" if first == last else f"offsets {first}..{last} are"
        summary = (f"The record{'s' * (first != last)} at {tp} {where} not in the Schema Registry wire "
                   "format where the partition's other records are "
                   f"({'the first: ' * (first != last)}{why}): "
                   "a producer that wrote without the serializer; the sink's rows there are not compared.")
        out.append(Finding(KIND, topic, partition, first, last, last - first + 1, detail=why,
                           cause=Cause(KIND, summary, rule=UNFRAMED)))
    return out
