"""SQL text shared by the readers: names as users write them, literals, and the typing of the columns
that carry a Kafka topic, partition and offset (a value Kafka could have produced, or why not)."""

from __future__ import annotations

from dataclasses import dataclass

from eosctl.base.errors import SinkError

_SIGNED_INTS = {"TINYINT": 7, "SMALLINT": 15, "INTEGER": 31, "BIGINT": 63, "HUGEINT": 127}
_UNSIGNED_INTS = {"UTINYINT": 8, "USMALLINT": 16, "UINTEGER": 32, "UBIGINT": 64, "UHUGEINT": 128}
_INEXACT = ("FLOAT", "DOUBLE", "DECIMAL", "REAL")


def name_parts(name: str) -> list[str]:
    """Split a (possibly qualified) name the way DuckDB's parser does: dots separate parts, double quotes
    keep one ("my.table" is one table, main.orders is table orders in schema main, "" is a quote)."""
    parts, cur, quoted, i, was_quoted = [], "", False, 0, False
    while i < len(name):
        c = name[i]
        if quoted:
            if c == '"' and name[i + 1:i + 2] == '"':
                cur, i = cur + '"', i + 1
            elif c == '"':
                quoted = False
            else:
                cur += c
        elif c == '"':
            quoted = was_quoted = True
        elif c == ".":
            parts.append(cur if was_quoted else cur.strip())
            cur, was_quoted = "", False
        else:
            cur += c
        i += 1
    if quoted:
        raise SinkError(f"name {name} has an unclosed double quote; quote a name with dots as \"my.table\"")
    parts.append(cur if was_quoted else cur.strip())
    if any(p == "" for p in parts) or len(parts) > 3:
        raise SinkError(f"{name!r} is not a table or column name; use table, schema.table or "
                        f"catalog.schema.table, and double quotes for a name with dots (\"my.table\")")
    return parts


def ident(name: str) -> str:
    """A SQL identifier from a name as a user writes it: schema.table, or "my.table" quoted."""
    return ".".join('"' + part.replace('"', '""') + '"' for part in name_parts(name))


def literal(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def short(value: str, limit: int = 40) -> str:
    return value if len(value) <= limit else value[:limit - 1] + "…"


@dataclass(frozen=True)
class IntColumn:
    """SQL for one integer column of a sink: its value when Kafka could have produced it, else why not."""

    value: str  # the value as an integer, or NULL if it is no valid Kafka value
    valid: str  # TRUE where `value` is not NULL
    problem: str  # NULL if valid, else e.g. 'is NULL' or 'is negative'
    raw: str = ""  # the column itself
    exact: bool = False  # an integer type: `raw = n` (n valid) holds only for valid values
    checked: str = ""  # the value where `valid` is known to hold: no CASE, so an index's order can serve it

    def equals(self, n: int) -> str:
        """A filter on one valid value; on the raw column where that is exact, so DuckDB pushes it into
        the scan (statistics, row-group skipping)."""
        return f"{self.raw} = {n}" if self.exact else f"{self.value} = {n}"


def int_column(col: str, type_: str, limit: int, limit_text: str, sql_type: str) -> IntColumn:
    """Checks tailored to the column's DuckDB type, so the usual BIGINT offset costs one comparison per
    row."""
    t = type_.upper()
    base = t.split("(")[0]
    nullcheck = f"WHEN {col} IS NULL THEN 'is NULL' "
    if base in _SIGNED_INTS or base in _UNSIGNED_INTS:
        bits = _SIGNED_INTS.get(base) or _UNSIGNED_INTS[base]
        v = col if bits < 127 else f"TRY_CAST({col} AS HUGEINT)"  # UHUGEINT may not fit a HUGEINT
        conds = []
        if base in _SIGNED_INTS:
            conds.append((f"{v} < 0", "is negative"))
        if (1 << bits) - 1 > limit:
            conds.append((f"{v} IS NULL OR {v} > {limit}", f"is above {limit_text}"))
    elif base.startswith(_INEXACT):
        v = f"TRY_CAST({col} AS HUGEINT)"
        finite = f"isfinite(CAST({col} AS DOUBLE))"
        conds = [(f"NOT {finite} OR {col} <> trunc({col})", "is not an integer"),
                 (f"{col} < 0", "is negative"), (f"{v} IS NULL OR {v} > {limit}", f"is above {limit_text}")]
    else:
        text = f"trim(CAST({col} AS VARCHAR))"
        v = f"TRY_CAST({text} AS HUGEINT)"
        conds = [(f"NOT regexp_full_match({text}, '[+-]?[0-9]+')", "is not an integer"),
                 (f"coalesce({v} < 0, {text} LIKE '-%')", "is negative"),
                 (f"{v} IS NULL OR {v} > {limit}", f"is above {limit_text}")]
    problem = "CASE " + nullcheck + "".join(f"WHEN {c} THEN '{why}' " for c, why in conds) + "END"
    valid = " AND ".join([f"{col} IS NOT NULL", *(f"NOT ({c})" for c, _ in conds)])
    value = f"CAST({v} AS {sql_type})" if not conds else f"CASE WHEN {valid} THEN CAST({v} AS {sql_type}) END"
    exact = base in _SIGNED_INTS or base in _UNSIGNED_INTS
    return IntColumn(value, f"({valid})", problem, col, exact, f"CAST({v} AS {sql_type})")


def topic_column(col: str) -> IntColumn:
    # Kafka refuses an empty topic name (org.apache.kafka.common.internals.Topic.validate).
    text = f"CAST({col} AS VARCHAR)"
    return IntColumn(f"CASE WHEN {text} <> '' THEN {text} END", f"({text} <> '')",
                     f"CASE WHEN {col} IS NULL THEN 'is NULL' WHEN {text} = '' THEN 'is empty' END")


def pg_int_column(col: str, type_: str, limit: int, limit_text: str, sql_type: str) -> IntColumn:
    """int_column for PostgreSQL: its integer types checked as DuckDB's; any other type through numeric
    (arbitrary precision: nothing overflows), each cast guarded by a CASE, since PostgreSQL evaluates
    the terms of an AND in any order and a failed cast would end the query."""
    base = type_.upper().split("(")[0]
    if base in ("SMALLINT", "INTEGER", "BIGINT"):
        return int_column(col, base, limit, limit_text, sql_type)
    if base in ("NUMERIC", "DECIMAL", "REAL", "DOUBLE PRECISION"):
        whole = f"{col}::text NOT IN ('NaN', 'Infinity', '-Infinity')"
        v = f"(CASE WHEN {whole} THEN {col}::numeric END)"
        not_int = f"NOT ({whole}) OR {v} <> trunc({v})"
    else:
        text = f"btrim({col}::text)"
        whole = f"{text} ~ '^[+-]?[0-9]+$'"
        v = f"(CASE WHEN {whole} THEN {text}::numeric END)"
        not_int = f"NOT ({whole})"
    conds = [(not_int, "is not an integer"), (f"{v} < 0", "is negative"),
             (f"{v} > {limit}", f"is above {limit_text}")]
    problem = f"CASE WHEN {col} IS NULL THEN 'is NULL' " + \
        "".join(f"WHEN {c} THEN '{why}' " for c, why in conds) + "END"
    # coalesce: a condition that is NULL (the value isn't a number at all) makes the row invalid.
    valid = " AND ".join([f"{col} IS NOT NULL", *(f"NOT coalesce({c}, true)" for c, _ in conds)])
    return IntColumn(f"CASE WHEN {valid} THEN {v}::{sql_type} END", f"({valid})", problem, col, False,
                     f"{v}::{sql_type}")
