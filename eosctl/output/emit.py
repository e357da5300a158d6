"""Where a command's result is written in its chosen --format, once: "json" prints the command's document on
stdout, any other format runs the command's renderer (a table on the console, or its "plain" lines).

A command computes its result and hands both forms over; neither is built unless asked (a report's
document can be large)."""

from __future__ import annotations

from collections.abc import Callable

from eosctl.output.terminal import emit_json


def emit(fmt: str, document: Callable[[], object], render: Callable[[], None]) -> None:
    if fmt == "json":
        emit_json(document())
    else:
        render()
