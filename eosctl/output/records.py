"""Records' keys and values in a terminal: one line each, decoded where the registry could (its format,
subject, version and schema id before the fields), cut when long (the JSON output holds them whole)."""

from __future__ import annotations

import json
from typing import Any

SHOWN_CHARS = 160  # of a key or value in a table cell; `--format json` has it whole


def field_text(decoded: dict[str, Any] | None, text: str | None) -> str:
    """A key or value as one line: decoded (eosctl.inspection.records' ``*_decoded``) its schema and fields,
    unframed or undecodable what is wrong and its text, else its text (table() escapes it)."""
    if decoded is None:
        return "null" if text is None else cut(text)
    if decoded["data"] is None and decoded["problem"] is not None:
        return cut(f"{decoded['encoding'].upper()} ({decoded['problem']}): {text}")
    return cut(f"{schema_text(decoded)}: {json.dumps(decoded['data'], ensure_ascii=False)}")


def schema_text(doc: dict[str, Any]) -> str:
    """``AVRO orders-value v2 (id 7)``: the format, subject, version and schema id (or GUID) of a decoded
    key or value; ``in header`` where the id came from a __key_schema_id / __value_schema_id header."""
    parts = [doc["encoding"]]
    if doc.get("message"):
        parts.append(doc["message"])
    if doc["subject"] is not None:
        parts.append(f"{doc['subject']} v{doc['version']}")
    ident = f"id {doc['schema_id']}" if doc["schema_id"] is not None else f"guid {doc['guid']}"
    parts.append(f"({ident}{', in header' if doc['id_in'] == 'header' else ''})")
    return " ".join(parts)


def cut(text: str, limit: int = SHOWN_CHARS) -> str:
    """``text``, or its first ``limit`` characters and how many more there are."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text) - limit} more characters)"
