"""Arrow arrays to numpy and back through their buffers, never through pyarrow's Python conversion.

pyarrow imports pandas, when it is installed (PySpark's extra installs it), the first time it converts
Python or numpy values to an array or an array to numpy (``pa.array``, ``Array.to_numpy``: it asks whether
the values are pandas objects), and pandas takes a quarter to half a second to import. A local audit of a
small pipeline needs pandas nowhere, so the audit's paths pass integers, booleans and strings to and from
Arrow here: numpy views of the buffers one way, ``pa.Array.from_buffers`` the other.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

# lazy imports below (their costs: docs/imports.md): this module is imported by the command line's paths
# that may never build an array.


def to_numpy(values: Any, dtype: str = "int64") -> Any:
    """A numpy copy of an Arrow integer or boolean array (or chunked array) without nulls, as ``dtype``.
    Nulls raise ValueError: the caller decides what a missing value means."""
    import numpy as np  # lazy: see docs/imports.md
    import pyarrow as pa  # lazy: see docs/imports.md

    arr = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    if arr.null_count:
        raise ValueError(f"{arr.null_count} null values where numbers were expected")
    n = len(arr)
    if pa.types.is_boolean(arr.type):
        return valid_mask(arr.buffers()[1], arr.offset, n).astype(dtype)
    if not pa.types.is_integer(arr.type):
        arr = arr.cast(pa.int64())
    data = arr.buffers()[1]
    if data is None or not n:
        return np.zeros(n, dtype)
    kind = _numpy_int(arr.type)
    return np.frombuffer(data, dtype=kind, count=n, offset=arr.offset * kind.itemsize).astype(dtype)


def _numpy_int(type: Any) -> Any:
    """The numpy dtype of an Arrow integer type."""
    import numpy as np  # lazy: see docs/imports.md
    import pyarrow as pa  # lazy: see docs/imports.md

    return np.dtype(f"{'i' if pa.types.is_signed_integer(type) else 'u'}{type.bit_width // 8}")


def null_mask(values: Any) -> Any:
    """A numpy bool array, True where the Arrow array (or chunked array) is null."""
    import numpy as np  # lazy: see docs/imports.md
    import pyarrow as pa  # lazy: see docs/imports.md

    arr = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    n = len(arr)
    if not arr.null_count:
        return np.zeros(n, bool)
    return ~valid_mask(arr.buffers()[0], arr.offset, n)


def valid_mask(bitmap: Any, offset: int, n: int) -> Any:
    """An Arrow bitmap (validity or boolean data; None: all set) as a numpy bool array of n."""
    import numpy as np  # lazy: see docs/imports.md

    if bitmap is None:
        return np.ones(n, bool)
    bits = np.unpackbits(np.frombuffer(bitmap, np.uint8), bitorder="little")
    return bits[offset:offset + n].astype(bool)


def array(values: Sequence[Any] | Any, type: Any) -> Any:
    """An Arrow array of ``type`` (integers, booleans or strings: pa.string(), pa.large_string()) from a
    Python sequence with None for nulls, or a numpy array."""
    import numpy as np  # lazy: see docs/imports.md
    import pyarrow as pa  # lazy: see docs/imports.md

    n = len(values)
    nulls: np.ndarray | None = None
    present: Any = values
    if not isinstance(values, np.ndarray):
        flags = [v is None for v in values]
        if any(flags):
            nulls = np.array(flags, bool)
            present = [v for v in values if v is not None]
    validity = None
    if nulls is not None:
        validity = pa.py_buffer(np.packbits(~nulls, bitorder="little").tobytes())
    if pa.types.is_string(type) or pa.types.is_large_string(type):
        data = [str(v).encode() for v in present]
        lengths = np.zeros(n, np.int64)
        where = np.flatnonzero(~nulls) if nulls is not None else slice(None)
        lengths[where] = [len(d) for d in data]
        offsets = np.zeros(n + 1, np.int64 if pa.types.is_large_string(type) else np.int32)
        np.cumsum(lengths, out=offsets[1:])
        return pa.Array.from_buffers(type, n, [validity, pa.py_buffer(offsets.tobytes()),
                                               pa.py_buffer(b"".join(data))], null_count=-1)
    if pa.types.is_boolean(type):
        flat = np.zeros(n, bool)
        if nulls is None:
            flat[:] = np.asarray(present, bool)
        else:
            flat[~nulls] = np.asarray(present, bool)
        bits = pa.py_buffer(np.packbits(flat, bitorder="little").tobytes())
        return pa.Array.from_buffers(type, n, [validity, bits], null_count=-1)
    if not pa.types.is_integer(type):
        raise TypeError(f"no buffers for Arrow type {type}")
    dtype = _numpy_int(type)
    flat = np.zeros(n, dtype)
    if nulls is None:
        flat[:] = np.asarray(present, dtype)
    else:
        flat[~nulls] = np.asarray(present, dtype)
    return pa.Array.from_buffers(type, n, [validity, pa.py_buffer(flat.tobytes())], null_count=-1)
