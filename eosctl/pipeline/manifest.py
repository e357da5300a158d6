"""The run manifest: ground truth for audits and inspections, written as ``manifest.json`` next to the sink.

Nothing in it comes from reading the log back (that is what the audits under test do): record offsets
come from delivery reports, marker offsets from the high watermark right after each commit/abort (nothing
else writes concurrently, so it is the offset after the transaction's last record in each partition it
touched), producer ids and epochs from DescribeTransactions (``-1`` where the broker doesn't support it).
Offsets are inclusive except ``next_offset``-style values.

Its fields, the sink schema and the run rules: docs/manifest.md (checked against this code by
tests/unit/test_docs.py).

Notes: with ``aborted-leak`` every aborted record of the output topic (the processor's simulated errors
and, with ``zombie``, the fenced transaction) is a sink row, so the phantom_aborted findings are the
output topic's aborted ranges merged by the run rule. ``zombie`` and ``hanging`` leave no sink defect:
they show in ``fencing`` and ``hanging``. On noida-db the coordinator's ABORT marker for a fenced
transaction carries the new epoch; real Kafka writes it at epoch+1 and hands the successor epoch+2.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

VERSION = 1
FILE = "manifest.json"


def build(**fields: Any) -> dict:
    return {"version": VERSION, "created_at": datetime.now(UTC).isoformat(timespec="seconds"), **fields}


def write(manifest: dict, workdir: Path) -> Path:
    path = workdir / FILE
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    tmp.replace(path)  # readers never see half a manifest
    return path


def read(workdir: Path) -> dict:
    return json.loads((workdir / FILE).read_text(encoding="utf-8"))
