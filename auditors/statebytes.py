"""A state sink's source records read from the log scan's own Fetch answers, column by column: each
record's offset, timestamp, key and value bytes as Arrow columns, no Python object per record.

The state audit needs every data record's key and value (auditors.statecols). A consumer hands them over
one Message at a time (microseconds a record in Python: most of a state audit's time at 10M records); the
log scan (eosctl.cluster.logscan) fetches the same batches anyway to classify them. ``RecordBytes`` is fed
each answer as the scan reads it (the scan's ``keys`` hook, as eosctl.cluster.recordkeys.KeyCollector is),
walks the records with the native walker (eosctl/cluster/recordwalk.c: walk_records_ts) and gathers the key
and value bytes with numpy into Arrow binary columns. Where the walker was not built (no C compiler, or an
older build), ``available()`` is False and the audit reads the records with a consumer as before.

Every batch the scan reads is here, aborted and open transactions' included (a read_uncommitted read);
control batches (markers) are left out, and a batch fetched twice (a fetch from inside it returns it
whole) counts once.
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

from eosctl.cluster.batches import BatchDecodeError
from eosctl.cluster.recordkeys import _CORRUPT, _PAD, AnswerBuffer, _ptr, lay_out, native


def _lib() -> Any:
    lib = native()
    if lib is None or not hasattr(lib, "walk_records_ts"):
        return None
    if lib.walk_records_ts.argtypes is None:
        p, i64 = ctypes.c_void_p, ctypes.c_int64
        lib.walk_records_ts.argtypes = [p, i64, p, p, p, i64, p, p, p, p, p, p]
        lib.walk_records_ts.restype = ctypes.c_int
    return lib


def available() -> bool:
    """Whether the native walker with timestamps is built (else a consumer reads the records)."""
    return _lib() is not None


class RecordBytes(AnswerBuffer):
    """One partition's data records in [start, end), from the fetch answers' bytes as the scan reads them:
    ``result()`` is (offsets, timestamps, keys, values), the last two Arrow binary arrays."""

    def __init__(self, start: int, end: int) -> None:
        super().__init__(start, end)
        self.parts: list[tuple[Any, ...]] = []

    def flush(self) -> None:
        laid = lay_out(self.take(), "a state sink's audit")
        if laid is None:
            return
        buf, starts, counts_a = laid.buf, laid.starts, laid.counts
        total = int(counts_a.sum())
        first = np.zeros(len(counts_a), np.int64)
        np.cumsum(counts_a[:-1], out=first[1:])
        delta, ts_delta, key_at, key_len, value_at, value_len = (np.empty(total, np.int64) for _ in range(6))
        rc = _lib().walk_records_ts(_ptr(buf), len(buf) - _PAD, _ptr(starts), _ptr(counts_a), _ptr(first),
                                    len(counts_a), _ptr(delta), _ptr(ts_delta), _ptr(key_at), _ptr(key_len),
                                    _ptr(value_at), _ptr(value_len))
        if rc:
            raise BatchDecodeError(_CORRUPT.get(rc, "corrupt record in a batch"))
        batch = np.repeat(np.arange(len(counts_a)), counts_a)
        offsets = laid.bases[batch] + delta
        keep = self.first_readings(offsets)
        self.next = max(self.next, int(offsets[keep][-1]) + 1 if keep.any() else self.next)
        keep &= ~laid.controls[batch]
        idx = np.flatnonzero(keep)
        if not len(idx):
            return
        first_ts = laid.first_ts[batch][idx]
        max_ts = laid.max_ts[batch][idx]
        appended = laid.log_append_time[batch][idx]
        # LogAppendTime: every record of the batch has the broker's time, as a consumer reports it.
        ts = np.where(appended, max_ts, first_ts + ts_delta[idx])
        self.parts.append((offsets[idx], ts, _binary(buf, key_at[idx], key_len[idx]),
                           _binary(buf, value_at[idx], value_len[idx])))

    def result(self) -> tuple[Any, Any, Any, Any]:
        import pyarrow as pa  # lazy: see docs/imports.md

        if self.pending:
            self.flush()
        if not self.parts:
            return (np.zeros(0, np.int64), np.zeros(0, np.int64), pa.array([], pa.binary()),
                    pa.array([], pa.binary()))
        return (np.concatenate([p[0] for p in self.parts]), np.concatenate([p[1] for p in self.parts]),
                pa.concat_arrays([p[2] for p in self.parts]), pa.concat_arrays([p[3] for p in self.parts]))


def _binary(buf: np.ndarray, at: np.ndarray, lengths: np.ndarray) -> Any:
    """The byte ranges (length -1: null) as one Arrow binary array: copied by the native piece
    (copy_ranges) where it is built, else gathered with numpy (the same bytes)."""
    import pyarrow as pa  # lazy: see docs/imports.md

    valid = lengths >= 0
    lens = np.where(valid, lengths, 0)
    ends = np.cumsum(lens)
    total = int(ends[-1]) if len(ends) else 0
    lib = _lib()
    if lib is not None and hasattr(lib, "copy_ranges"):
        if lib.copy_ranges.argtypes is None:
            p = ctypes.c_void_p
            lib.copy_ranges.argtypes = [p, p, p, ctypes.c_int64, p]
            lib.copy_ranges.restype = None
        out = np.empty(max(total, 1), np.uint8)
        at64, len64 = np.ascontiguousarray(at, np.int64), np.ascontiguousarray(lengths, np.int64)
        lib.copy_ranges(_ptr(buf), _ptr(at64), _ptr(len64), len(at64), _ptr(out))
        data = out[:total]
    else:
        starts = ends - lens
        data = buf[np.arange(total, dtype=np.int64) - np.repeat(starts, lens) + np.repeat(at, lens)]
    bitmap = pa.py_buffer(np.packbits(valid, bitorder="little"))
    if total < 1 << 31:  # Arrow's binary offsets are int32: no large_binary and no cast (a copy)
        offsets = np.zeros(len(at) + 1, np.int32)
        offsets[1:] = ends
        return pa.Array.from_buffers(pa.binary(), len(at),
                                     [bitmap, pa.py_buffer(offsets), pa.py_buffer(data)])
    offsets64 = np.concatenate([[0], ends]).astype(np.int64)
    return pa.Array.from_buffers(pa.large_binary(), len(at), [bitmap, pa.py_buffer(offsets64),
                                                              pa.py_buffer(data)]).cast(pa.binary())
