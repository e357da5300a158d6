"""A sink's route (sink.route): which source records it should hold, judged on each record's key, a header
or a field of its JSON value. The audit expects only those; a record the route leaves out is filtered (never
a gap), and one the sink holds all the same is misrouted.

    route = "header:type=A"          # the header's value (UTF-8) is A
    route = "header:type=A|B"        # ... A or B
    route = "value:order.kind=A"     # the value is a JSON object whose order.kind is A (a scalar, as text)
    route = "key=A|B"                # the key (UTF-8) is A or B
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

FORMS = "header:NAME=VALUE[|VALUE...], value:PATH=VALUE[|VALUE...] or key=VALUE[|VALUE...]"


@dataclass(frozen=True)
class Route:
    on: str  # "header" | "value" | "key"
    name: str  # the header's name, or the value's dotted JSON path ("" for the key)
    values: tuple[str, ...]

    def matches(self, key: bytes | None, value: bytes | None,
                headers: list[tuple[str, bytes | None]]) -> bool:
        if self.on == "key":
            return key is not None and _text(key) in self.values
        if self.on == "header":
            return any(k == self.name and v is not None and _text(v) in self.values for k, v in headers)
        try:
            node: Any = json.loads(value) if value is not None else None
        except (ValueError, UnicodeDecodeError):
            return False
        for part in self.name.split("."):
            if not isinstance(node, dict) or part not in node:
                return False
            node = node[part]
        if isinstance(node, bool):
            node = "true" if node else "false"
        return node is not None and not isinstance(node, dict | list) and str(node) in self.values


def _text(b: bytes) -> str:
    return b.decode("utf-8", "replace")


def parse_route(text: str) -> Route:
    """A route as written; ValueError saying what is wrong."""
    if text.startswith("key="):
        values = tuple(text[4:].split("|"))
        if all(values):
            return Route("key", "", values)
    for on in ("header", "value"):
        if text.startswith(on + ":"):
            name, sep, rest = text[len(on) + 1:].partition("=")
            values = tuple(rest.split("|"))
            if sep and name and all(values) and (on == "header" or all(name.split("."))):
                return Route(on, name, values)
    raise ValueError(f"expected {FORMS}")


