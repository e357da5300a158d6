"""eosctl.base.arrowbuffers: the arrays pyarrow would build, and the numpy it would give, without pandas.

Each conversion is compared with pyarrow's own (``pa.array``, ``to_numpy``) on the same values, including
nulls, slices (a non-zero offset into the buffers) and chunked arrays; and a fresh interpreter that uses
them never imports pandas, which pyarrow's conversions do (a quarter of a second of a small audit).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from eosctl.base.arrowbuffers import array, null_mask, to_numpy

ROOT = Path(__file__).resolve().parents[3]

CASES = [
    ([1, None, 3], pa.int64()),
    ([], pa.int32()),
    ([5, -6], pa.int32()),
    ([2**40, -1, 0], pa.int64()),
    ([1, 2, 3], pa.uint64()),
    (["a", None, "héllo", ""], pa.string()),
    (["x", "yy", None], pa.large_string()),
    ([True, None, False, True, True, False, True, False, True], pa.bool_()),
    ([None, None], pa.int64()),
    ([None], pa.string()),
]


@pytest.mark.parametrize(("values", "type"), CASES, ids=[f"{t}-{i}" for i, (_, t) in enumerate(CASES)])
def test_array_equals_pyarrows_own(values, type):
    got = array(values, type)
    got.validate(full=True)
    assert got.equals(pa.array(values, type))
    assert got.null_count == sum(v is None for v in values)


def test_array_of_a_numpy_array():
    assert array(np.arange(5, dtype=np.int64), pa.int64()).equals(pa.array(list(range(5)), pa.int64()))


def test_array_refuses_a_type_it_has_no_buffers_for():
    with pytest.raises(TypeError, match="no buffers for Arrow type double"):
        array([1.5], pa.float64())


def test_to_numpy_of_slices_and_chunks():
    ints = pa.array(list(range(10)), pa.int64()).slice(3, 4)
    assert to_numpy(ints).tolist() == [3, 4, 5, 6]
    assert to_numpy(ints).dtype == np.int64
    chunked = pa.chunked_array([pa.array([1, 2], pa.int32()), pa.array([3], pa.int32())])
    assert to_numpy(chunked, "int64").tolist() == [1, 2, 3]
    assert to_numpy(pa.array([255], pa.uint8()), "int64").tolist() == [255]
    bools = pa.array([True, False, True, True, False, False, False, False, True]).slice(1)
    assert to_numpy(bools, "bool").tolist() == [False, True, True, False, False, False, False, True]
    assert to_numpy(pa.array([], pa.int64())).tolist() == []


def test_to_numpy_refuses_nulls():
    with pytest.raises(ValueError, match="1 null values where numbers were expected"):
        to_numpy(pa.array([1, None], pa.int64()))


def test_null_mask():
    values = pa.array([1, None, 3, None, 5, 6, 7, 8, None, 10], pa.int64())
    assert null_mask(values.slice(1)).tolist() == [True, False, True, False, False, False, False, True, False]
    assert null_mask(pa.array([1, 2])).tolist() == [False, False]


def test_none_of_it_imports_pandas():
    code = ("import sys, pyarrow as pa\n"
            "from eosctl.base.arrowbuffers import array, null_mask, to_numpy\n"
            "a = array([1, None, 3], pa.int64()); s = array(['t', None], pa.string())\n"
            "to_numpy(array([1, 2], pa.int32())); null_mask(a); to_numpy(array([True], pa.bool_()), 'bool')\n"
            "print('pandas' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert out.stdout.strip() == "False", out.stderr
    # The rule's other side: pyarrow's own conversion does import it (else this test proves nothing).
    out = subprocess.run([sys.executable, "-c", "import sys, pyarrow as pa; pa.array([1]); "
                          "print('pandas' in sys.modules)"], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "True", out.stderr


def test_hash_arrow_reads_text_from_its_buffers_as_the_cast_did():
    """eosctl.cluster.recordkeys.hash_arrow hashes string and binary arrays from their own buffers (int32
    offsets) instead of casting them to large_binary (a cast imports pyarrow.compute): the same hashes,
    sliced or not, nulls included."""
    from eosctl.cluster.recordkeys import hash_arrow

    keys = pa.array(["k0", None, "héllo", "", "k4", "a longer key"])
    for arr in (keys, keys.slice(1), keys.slice(2, 3), pa.chunked_array([keys.slice(0, 2), keys.slice(2)])):
        want = hash_arrow(arr.cast(pa.large_binary()))
        assert hash_arrow(arr).tolist() == want.tolist()
        assert hash_arrow(arr.cast(pa.binary())).tolist() == want.tolist()
        assert hash_arrow(arr.cast(pa.large_string())).tolist() == want.tolist()
    assert len(set(hash_arrow(keys).tolist())) == 6  # the null, the empty key and the others all differ
