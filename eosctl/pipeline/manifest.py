"""The run manifest: ground truth for audits and inspections, written as ``manifest.json`` next to the sink.

Nothing in it comes from reading the log back (that is what the audits under test do): record offsets
come from delivery reports, marker offsets from the high watermark right after each commit/abort (nothing
else writes concurrently, so it is the offset after the transaction's last record in each partition it
touched), producer ids and epochs from DescribeTransactions (``-1`` where the broker doesn't support it).
Offsets are inclusive except ``next_offset``-style values.

```
{
  "version": 1,
  "prefix": "demo",
  "bootstrap": "127.0.0.1:9092",
  "created_at": "2026-11-22T10:00:00+00:00",
  "faults": ["duplicate-replay", "skip", ...],       # canonical order of FAULTS
  "source_topic": "demo.orders",
  "output_topic": "demo.enriched",
  "audited_topics": ["demo.enriched"],                # the topic the sink reads
  "partitions": 3,
  "groups": {"processor": "demo.processor", "sink": "demo.sink"},
  "transactional_ids": {"source": "demo.source", "processor": "demo.processor",
                        "hanging": "demo.hanging"},   # "hanging" only with that fault
  "sink": {"duckdb": "/abs/path/sink.duckdb", "table": "orders_sink", "offsets_table": "sink_offsets",
           "topic_column": "src_topic", "partition_column": "src_partition", "offset_column": "src_offset",
           "key_column": "order_id"},
           # orders_sink(src_topic, src_partition, src_offset, order_id, customer, amount, total,
           #             sink_batch = the DuckDB transaction that wrote the row, written_at)
           # sink_offsets(topic, "partition", next_offset), primary key (topic, "partition")
  "expected_findings": [
    # gap | duplicate | phantom_aborted | key_duplicate, sorted by (kind, topic, partition, first_offset);
    # run rules in eosctl/pipeline/expected.py. count = missing records (gap), extra rows (duplicate),
    # rows (phantom_aborted), offsets (key_duplicate).
    {"kind": "duplicate", "topic": "demo.enriched", "partition": 0, "first_offset": 12, "last_offset": 14,
     "count": 3, "fault": "duplicate-replay"},
    {"kind": "key_duplicate", "topic": "demo.enriched", "partition": 2, "first_offset": 101,
     "last_offset": 102, "count": 2, "fault": "upstream-retry", "key": "o-000300", "offsets": [101, 102]}
  ],
  "aborted_ranges": [   # every topic the pipeline wrote; one per aborted transaction and partition,
                        # data records only (its ABORT marker is in "markers")
    {"topic": "demo.orders", "partition": 1, "first_offset": 10, "last_offset": 11, "producer_id": 1000}
  ],
  "markers": [{"topic": "demo.orders", "partition": 1, "offset": 12, "type": "ABORT", "producer_id": 1000}],
  "hanging": [          # transactions left open on purpose: the partition's LSO stays at first_offset
    {"topic": "demo.enriched", "partition": 0, "first_offset": 130, "last_offset": 132,
     "transactional_id": "demo.hanging", "producer_id": 1003}
  ],
  "fencing": [          # zombie fault: same producer id, epoch bumped by the successor's init_transactions
    {"transactional_id": "demo.processor", "producer_id": 1001, "old_producer_id": 1001, "old_epoch": 0,
     "new_epoch": 1, "zombie_error": "_FENCED"}          # the error the zombie got (null: not fenced!)
  ],
  "zombie_writes": [],  # records the fenced producer got into the log anyway: topic, partition, offset,
                        # key, status ("open": no marker follows, "committed"), producer_id
  "source_records": 301,            # committed data records in the source topic
  "committed_output_records": 301,  # committed data records in the output topic (hanging ones excluded)
  "sink_rows": 304                  # rows in the sink table
}
```

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
