"""A frozen sink: one read point per command, read while the pipeline keeps writing.

The command freezes once (``frozen``); everything it runs (the ledger, the audit's driver and its tasks,
on this machine or in Spark) reads the pinned sink it yields, which carries its read point in the Sink
itself (``frozen_from``, ``at``), so it pickles to workers and needs no state in this process.
"""

from __future__ import annotations

import errno
import os
import shutil
import struct
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

from eosctl.base.errors import SinkError
from eosctl.base.files import glob_paths, glob_split, temp_dir
from eosctl.config.model import Sink
from eosctl.sink import delta, iceberg, kafka_topic, postgres, replica, spark_checkpoint
from eosctl.sink import duckdb as duck
from eosctl.sink.parquet import is_url
from eosctl.sink.spark_files import is_table_dir, table_files

try:
    import fcntl
except ImportError:  # Windows: no fcntl locks (_read_lock falls back on DuckDB's own)
    fcntl = None  # type: ignore[assignment]


@contextmanager
def frozen(sink: Sink, where: str = "sink", *, local: bool = True) -> Iterator[Sink]:
    """The sink as it is now, for as long as the block runs: read the sink's side FIRST, then Kafka.

    A DuckDB file is copied (with its WAL) under a read lock taken on the file itself, so a live writer
    is kept out only while the copy runs, never while Spark tasks, the local engine or the ledger read:
    they all read the copy. A Parquet sink's file list is fixed now (hard links where the file system
    allows, else symbolic links, in the same directory layout so hive partitions still parse); files
    written later are not read. With ``local=False`` (executors on other machines, which can't see this
    machine's temp dir) Parquet sinks are read in place. The copy is deleted on every way out of the
    block. A PostgreSQL sink is pinned at a snapshot exported for the block (eosctl.sink.postgres), a Delta
    table at its current version (eosctl.sink.delta), an Iceberg table at its current snapshot
    (eosctl.sink.iceberg), each with its data files where they are all there is to it, a Kafka topic at
    its end offsets (eosctl.sink.kafka_topic). A sink frozen already is yielded as it is.

    Rows written after the freeze are not seen. Every row in the copy was written from a record Kafka
    had committed before the freeze, so the Kafka scan that follows sees it: a live pipeline gives no
    phantom. Records committed between the freeze and the scan are missing from the copy: a tail gap, the
    consumer's lag at that moment.
    """
    if sink.frozen_from is not None:
        yield sink
        return
    if sink.spark_checkpoint is not None:
        # Its offsets first: a batch's commit is written after the sink committed its rows, so offsets read
        # before the rows never claim rows the frozen sink lacks (a live query's tail is never a false gap).
        with temp_dir("eosctl-checkpoint-") as tmp:
            copy = spark_checkpoint.freeze(sink.spark_checkpoint, tmp, where)
            with frozen(replace(sink, spark_checkpoint=None), where, local=local) as out:
                given = replace(out.frozen_from or sink, spark_checkpoint=sink.spark_checkpoint)
                yield replace(out, spark_checkpoint=copy, frozen_from=given)
        return
    if sink.postgres or sink.delta or sink.iceberg:
        pin = postgres.exported if sink.postgres else delta.pinned if sink.delta else iceberg.pinned
        with pin(sink, where) as pinned:
            yield pinned
        return
    with temp_dir("eosctl-frozen-") as tmp:
        out = sink
        if sink.duckdb:
            copy = _copy_duckdb(str(sink.duckdb), where, tmp)
            out = replace(sink, duckdb=copy, parquet=None, frozen_from=sink, at=_now())
        elif sink.parquet and local and not is_url(sink.parquet):
            at = _now()
            data = _link_files(sink.parquet, os.path.join(tmp, "rows"))
            offsets = sink.offsets_table
            if offsets and not is_url(offsets):
                offsets = _link_files(offsets, os.path.join(tmp, "offsets"))
            out = replace(sink, parquet=data, offsets_table=offsets, frozen_from=sink, at=at)
        elif sink.kafka_topic:
            if sink.kafka_cluster is None:
                raise SinkError(f"[{where}] kafka_topic {sink.kafka_topic!r}: no cluster to read it from")
            reader = replica.freeze if sink.lineage == replica.REPLICA else kafka_topic.freeze
            out = reader(sink, sink.kafka_cluster, tmp)
        yield out


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _copy_duckdb(path: str, where: str, tmp: str) -> str:
    """Copy the DuckDB file (and a WAL a crashed writer left) while holding a read lock on it.

    The lock is the one DuckDB itself takes (an fcntl read lock on the whole file, see DuckDB's
    LocalFileSystem::OpenFile): a writer can't hold the file meanwhile, so file + WAL are one committed
    state, and the writer is kept out for the copy alone, not for opening a database and querying it
    (which take ~100x longer on a busy machine). The copy is checked and opened like the original.
    """
    duck.check_duckdb_file(path, where)
    dest = os.path.join(tmp, os.path.basename(path))
    try:
        with _read_lock(path, where):
            for src, dst in ((path, dest), (path + ".wal", dest + ".wal")):
                if os.path.exists(src):
                    _copy_file(src, dst)
    except OSError as e:
        raise SinkError(f"cannot copy {path} to {tmp} for a consistent read: {e.strerror or e}; free space "
                        f"in the temp directory or point TMPDIR elsewhere") from None
    return dest


@contextmanager
def _read_lock(path: str, where: str, wait_s: float | None = None) -> Iterator[None]:
    """A shared fcntl lock on the whole file, retried while a writer holds it (up to LOCK_WAIT_S).

    An open-file-description lock where the OS has one (Linux): closing it never drops a lock a DuckDB
    connection of this same process holds on the file, as closing a classic POSIX-locked descriptor would.
    """
    if fcntl is None:  # no fcntl (Windows): DuckDB's own read-only connection is the lock
        conn = duck.connect_readonly(path, where, wait_s=wait_s)
        try:
            yield
        finally:
            conn.close()
        return
    setlk = getattr(fcntl, "F_OFD_SETLK", fcntl.F_SETLK)
    getlk = getattr(fcntl, "F_OFD_GETLK", fcntl.F_GETLK)
    wait_s = duck.LOCK_WAIT_S if wait_s is None else wait_s
    # struct flock: l_type, l_whence, l_start, l_len (0 = to the end), l_pid
    layout = "hhqqi"
    lock = struct.pack(layout, fcntl.F_RDLCK, os.SEEK_SET, 0, 0, 0)
    fd = os.open(path, os.O_RDONLY)
    try:
        deadline, pause = time.monotonic() + wait_s, 0.001
        while True:
            try:
                fcntl.fcntl(fd, setlk, lock)
                break
            except OSError as e:
                if e.errno not in (errno.EAGAIN, errno.EACCES):
                    raise
                if time.monotonic() >= deadline:
                    holder = _lock_holder(fd, getlk, layout, fcntl.F_RDLCK)
                    raise duck.locked_error(path, holder, wait_s) from None
            time.sleep(min(pause, max(deadline - time.monotonic(), 0)))
            pause = min(pause * 2, 0.02)
        yield
    finally:
        os.close(fd)  # releases the lock


def _lock_holder(fd: int, getlk: int, layout: str, kind: int) -> str:
    try:
        answer = fcntl.fcntl(fd, getlk, struct.pack(layout, kind, os.SEEK_SET, 0, 0, 0))
        pid = struct.unpack(layout, answer)[4]
    except OSError:
        return ""
    if pid <= 0:
        return ""
    try:
        program = Path(os.path.realpath(f"/proc/{pid}/exe")).name
    except OSError:
        program = ""
    return f" ({program}, PID {pid})" if program else f" (PID {pid})"


def _copy_file(src: str, dst: str) -> int:
    """Copy in the kernel; copy_file_range shares extents where the file system can (XFS, btrfs on one
    volume), which makes the writer's wait independent of the sink's size. Returns the bytes copied."""
    if not hasattr(os, "copy_file_range"):
        shutil.copyfile(src, dst)
        return os.path.getsize(dst)
    with open(src, "rb") as fin, open(dst, "wb") as fout:
        size, done = os.fstat(fin.fileno()).st_size, 0
        try:
            while done < size:
                n = os.copy_file_range(fin.fileno(), fout.fileno(), size - done)
                if n == 0:
                    break
                done += n
        except OSError:  # e.g. EXDEV on older kernels, or a file system without it: plain copy
            fin.seek(0)
            fout.seek(0)
            fout.truncate()
            shutil.copyfileobj(fin, fout, 1 << 20)
            done = fout.tell()
    return done


def _link_files(pattern: str, into: str) -> str:
    """Link the files matching `pattern` under `into`, keeping their paths below the pattern's fixed
    prefix; returns the same pattern rooted at `into` (it matches exactly the linked files). A directory's
    table files (a Spark file sink's committed files) are linked below `into`, which is returned: a
    directory without a log, read as every file in it."""
    if is_table_dir(pattern):
        files = table_files(pattern)
        if not files:
            return pattern  # opening the sink says it holds no committed files, naming the user's directory
        for i, f in enumerate(files):
            rel = os.path.relpath(f, pattern)
            if rel.startswith(os.pardir):  # a log entry outside the directory
                rel = f"outside-{i}-{os.path.basename(f)}"
            _link(f, os.path.join(into, rel))
        return into
    files = [f for f in glob_paths(pattern) if os.path.isfile(f)]
    if not files:
        return pattern  # opening the sink says "no Parquet files match" with the user's pattern
    _, base, rest = glob_split(pattern)
    for f in files:
        _link(f, os.path.join(into, os.path.relpath(f, base)))
    return os.path.join(into, rest)


def _link(f: str, dest: str) -> None:
    os.makedirs(os.path.dirname(dest), exist_ok=True)
    try:
        os.link(f, dest)  # the file as it is now, even if the writer replaces it
    except OSError:
        os.symlink(os.path.abspath(f), dest)
