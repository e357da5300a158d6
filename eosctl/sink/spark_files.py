"""The files of a Parquet directory as Spark reads it: a Structured Streaming file sink's ``_spark_metadata``
log, or for a plain directory every file that is not hidden.

Spark's file sink is exactly-once through its log (org.apache.spark.sql.execution.streaming
FileStreamSinkLog): batch N's files are part of the table only once the file ``_spark_metadata/N`` (or a
compaction ``N.compact``, which holds every earlier batch's entries) names them. A batch killed before that
leaves part files that no Spark reader reads, and its rerun writes new ones; a glob over the directory would
read both. Every tenth batch (spark.sql.streaming.fileSink.log.compactInterval) is a compaction, after which
Spark may delete the batch files before it.
"""

from __future__ import annotations

import json
import os
import re
from urllib.parse import unquote, urlsplit

from eosctl.base.errors import SinkError

LOG_DIR = "_spark_metadata"
_BATCH = re.compile(r"^(\d+)(\.compact)?$")
_VERSION = 1  # FileStreamSinkLog.VERSION: the "v1" line that opens every log file


def is_table_dir(path: str) -> bool:
    """A local directory (not a glob, not a URL) named as a Parquet sink."""
    return "://" not in path and os.path.isdir(path)


def table_files(directory: str) -> list[str]:
    """The data files of the table in ``directory``, sorted: those its file-sink log commits where it has
    one, else every file below it whose name starts with neither ``_`` nor ``.`` (Hadoop's hidden files:
    ``_SUCCESS``, ``.crc`` checksums, a writer's temp files), which is what a Spark reader lists."""
    log = os.path.join(directory, LOG_DIR)
    if os.path.isdir(log):
        return committed_files(directory)
    found = []
    for root, dirs, files in os.walk(directory):
        dirs[:] = sorted(d for d in dirs if not d.startswith(("_", ".")))
        found += [os.path.join(root, f) for f in files if not f.startswith(("_", "."))]
    return sorted(found)


def committed_files(directory: str) -> list[str]:
    """The files the file sink's log in ``directory`` commits: the entries of its latest compaction and
    every batch after it, less those a later entry deleted (FileStreamSinkLog.compactLogs)."""
    log = os.path.join(directory, LOG_DIR)
    batches: dict[int, str] = {}
    compactions: dict[int, str] = {}
    for name in os.listdir(log):
        m = _BATCH.match(name)
        if m:
            (compactions if m.group(2) else batches)[int(m.group(1))] = name
    ids = set(batches) | set(compactions)
    if not ids:
        return []
    latest = max(ids)
    base = max((i for i in compactions if i <= latest), default=None)
    wanted = [compactions[base]] if base is not None else []
    start = base + 1 if base is not None else 0
    missing = [i for i in range(start, latest + 1) if i not in batches and i not in compactions]
    if missing:
        raise SinkError(f"{log}: batch {missing[0]} of the Spark file sink's log is missing (batches up to "
                        f"{latest}); the log is damaged, so the table's files are unknown")
    wanted += [batches.get(i) or compactions[i] for i in range(start, latest + 1)]
    files: dict[str, None] = {}
    for name in wanted:
        for entry in _entries(os.path.join(log, name)):
            path = _local(str(entry.get("path", "")), directory)
            if entry.get("action", "add") == "delete":
                files.pop(path, None)
            elif not entry.get("isDir", False):
                files[path] = None
    return sorted(files)


def _entries(path: str) -> list[dict]:
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise SinkError(f"cannot read {path} of the Spark file sink's log: {e}") from None
    version = lines[0].strip() if lines else ""
    if not re.fullmatch(r"v\d+", version):
        raise SinkError(f"{path} is not a Spark file sink log file (its first line is not a version such as "
                        f"v1); point the sink at the directory the query writes")
    if int(version[1:]) > _VERSION:
        raise SinkError(f"{path} is a Spark file sink log of version {version}; eosctl reads v{_VERSION}")
    out = []
    for line in lines[1:]:
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            raise SinkError(f"{path} of the Spark file sink's log has a line that is not JSON") from None
        if isinstance(entry, dict):
            out.append(entry)
    return out


def _local(path: str, directory: str) -> str:
    """A log entry's path (a URI: ``file:///dir/part-0.parquet``) as a local path; a URI of another file
    system as it is (DuckDB reads it where it has the extension)."""
    parts = urlsplit(path)
    if parts.scheme in ("", "file"):
        local = unquote(parts.path)
        return local if os.path.isabs(local) else os.path.join(directory, local)
    return path
