"""The Kafka offsets a Spark Structured Streaming query keeps in its checkpoint, not in a consumer group.

Spark's Kafka source commits no offsets to Kafka (its consumers' group ids are generated per query run);
the checkpoint's ``offsets/N`` (org.apache.spark.sql.execution.streaming.OffsetSeqLog) holds where batch N
ends for each source, and ``commits/N`` is written once the sink has committed batch N. So the next offset
the query stored with its rows is the end of the highest batch with a commit: a restart on the checkpoint
resumes there. (A batch the sink committed before the query wrote ``commits/N``, as a crash between the two
leaves, is rerun by the restart and skipped by an exactly-once sink: its end is not yet counted here.)
"""

from __future__ import annotations

import json
import os
import re
import shutil

from eosctl.base.errors import SinkError
from eosctl.sink.base import MAX_OFFSET, MAX_PARTITION, StoredOffset

_BATCH = re.compile(r"^\d+$")


def _batches(directory: str) -> set[int]:
    try:
        return {int(n) for n in os.listdir(directory) if _BATCH.match(n)}
    except FileNotFoundError:
        return set()
    except OSError as e:
        raise SinkError(f"cannot read Spark checkpoint directory {directory}: {e.strerror or e}") from None


def freeze(checkpoint: str, into: str, where: str = "sink") -> str:
    """A checkpoint of the last committed batch alone, copied under ``into`` now (its offsets and commit
    files): what the command reads, however far the query goes meanwhile."""
    offsets = _offsets_dir(checkpoint, where)
    done = _batches(os.path.join(checkpoint, "commits")) & _batches(offsets)
    copy = os.path.join(into, "checkpoint")
    for d in ("offsets", "commits"):
        os.makedirs(os.path.join(copy, d))
    if done:
        last = str(max(done))
        for d in ("offsets", "commits"):
            try:
                shutil.copyfile(os.path.join(checkpoint, d, last), os.path.join(copy, d, last))
            except OSError as e:
                raise SinkError(f"cannot read {os.path.join(checkpoint, d, last)} of the Spark checkpoint: "
                                f"{e.strerror or e}") from None
    return copy


def _offsets_dir(checkpoint: str, where: str) -> str:
    offsets = os.path.join(checkpoint, "offsets")
    if not os.path.isdir(offsets):
        raise SinkError(f"{checkpoint} is not a Spark checkpoint (it has no offsets directory); check "
                        f"[{where}].spark_checkpoint (the query's checkpointLocation)")
    return offsets


def stored_offsets(checkpoint: str, where: str = "sink") -> list[StoredOffset]:
    """Per Kafka partition, the next offset after the query's last committed batch (none: no batch
    committed yet); every Kafka source of the query counts."""
    offsets = _offsets_dir(checkpoint, where)
    done = _batches(os.path.join(checkpoint, "commits")) & _batches(offsets)
    if not done:
        return []
    path = os.path.join(offsets, str(max(done)))
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise SinkError(f"cannot read {path} of the Spark checkpoint: {e}") from None
    if not lines or not re.fullmatch(r"v\d+", lines[0].strip()):
        raise SinkError(f"{path} is not a Spark checkpoint offsets file (its first line is not a version "
                        f"such as v1)")
    out: dict[tuple[str, int], int] = {}
    # Line 2 is the batch's metadata; each further line one source's offset ("-": none), in source order.
    for line in lines[2:]:
        try:
            source = json.loads(line)
        except ValueError:
            continue  # not a JSON source offset (e.g. "-"): not a Kafka source
        if not isinstance(source, dict):
            continue
        for topic, partitions in source.items():
            if not isinstance(partitions, dict):
                continue
            for p, o in partitions.items():
                if (str(p).isdigit() and int(p) <= MAX_PARTITION and isinstance(o, int)
                        and 0 <= o <= MAX_OFFSET):
                    out[(str(topic), int(p))] = o
    return [StoredOffset(t, p, o) for (t, p), o in sorted(out.items())]
