"""Whether a sink may have changed since it was last read, without reading it (the live model's cadence).

Read without any lock: a torn read only makes the sink look changed, so it is read again.
"""

from __future__ import annotations

import glob as globmod
import os

from eosctl.config.model import Sink
from eosctl.sink.parquet import is_url

# DuckDB's main header and its two database headers (storage/storage_info.hpp): a checkpoint writes the
# next database header with a higher iteration count.
_HEADERS_BYTES = 3 * 4096


def change_token(sink: Sink) -> tuple | None:
    """Something that differs whenever the sink's content may have (None: can't tell, read it again).

    DuckDB: the file's and its WAL's size and modification time, and the file's headers; Parquet: every
    matching file's path, size and modification time.
    """
    if sink.duckdb:
        path = str(sink.duckdb)
        try:
            with open(path, "rb") as f:
                headers = f.read(_HEADERS_BYTES)
        except OSError:
            return None
        return _stat(path), _stat(path + ".wal"), headers
    if sink.parquet and not is_url(sink.parquet):
        patterns = [p for p in (sink.parquet, sink.offsets_table) if p and not is_url(p)]
        files = [f for pattern in patterns for f in sorted(globmod.glob(pattern, recursive=True))]
        return tuple((f, _stat(f)) for f in files)
    return None


def _stat(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns
