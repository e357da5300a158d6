"""Kafka's record-batch compression codecs: their names, the library that decodes each, and one line naming
the codec when a batch cannot be decompressed.

A batch's codec is its attributes' low three bits (Kafka's CompressionType: 0 none, 1 gzip, 2 snappy, 3 lz4,
4 zstd). kafka-python's ``kafka.codec`` decodes them with optional imports: gzip from the standard library,
snappy with ``python-snappy``, lz4 with ``lz4`` (``lz4.frame``), zstd with ``zstandard``. eosctl declares
those three as dependencies (pyproject.toml), so a missing one means a broken or partial install: the
message says which package to install, never a bare codec number.
"""

from __future__ import annotations

from kafka import codec as codecs

from eosctl.base.errors import EosctlError

COMPRESSION = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}  # Kafka's CompressionType ids

# The PyPI distribution whose module ``kafka.codec`` imports for each codec not in the standard library
# (declared in pyproject.toml; tests/unit/cluster/test_compression.py holds them equal).
LIBRARIES = {"snappy": "python-snappy", "lz4": "lz4", "zstd": "zstandard"}
_CODECS = ("gzip", "snappy", "lz4", "zstd")


class BatchDecodeError(EosctlError):
    """A record batch eosctl cannot read: corrupt, or compressed with a codec this Python lacks."""


def _has(name: str) -> bool:
    # Looked up at each call, as kafka-python's record reader does: the same answer as the reader it guards.
    return bool(getattr(codecs, f"has_{name}")())


def codec_name(codec: int) -> str:
    """Kafka's name of a batch's codec number ("lz4"); an undefined number as "codec 5"."""
    return COMPRESSION.get(codec, f"codec {codec}")


def missing() -> list[str]:
    """The codecs this Python cannot decode (each one's library is not importable)."""
    return [name for name in _CODECS if not _has(name)]


def check(codec: int, base: int) -> None:
    """Raises BatchDecodeError, naming the codec and what to do, if the batch at ``base`` cannot be
    decompressed here."""
    if codec == 0:
        return
    name = codec_name(codec)
    if name not in _CODECS:
        raise BatchDecodeError(
            f"the batch at offset {base} names compression {name}, which Kafka does not define (0 none, "
            "1 gzip, 2 snappy, 3 lz4, 4 zstd): the batch is corrupt, or written by a newer Kafka than "
            "this eosctl knows")
    if not _has(name):
        lib = LIBRARIES[name]
        raise BatchDecodeError(
            f"the batch at offset {base} is {name}-compressed and this Python has no {name} codec "
            f"(kafka-python decodes {name} with the `{lib}` package, a dependency of eosctl): "
            f"reinstall eosctl (`pip install -e .` in its checkout) or `pip install {lib}`")


def decompress(codec: int, raw: bytes, base: int) -> bytes:
    """The records' bytes of the batch at ``base`` whose payload ``raw`` is compressed with ``codec``."""
    check(codec, base)
    decode = getattr(codecs, f"{codec_name(codec)}_decode")
    try:
        return decode(raw)
    except Exception as e:  # each library raises its own types (BadGzipFile, LZ4FrameError, ZstdError...)
        raise corrupt(codec, base, e) from None


def corrupt(codec: int, base: int, e: BaseException) -> BatchDecodeError:
    """The one line for a batch its (present) codec could not decompress or whose records do not parse."""
    kind = f"{codec_name(codec)} " if codec else ""
    return BatchDecodeError(f"corrupt {kind}record batch at offset {base}: {type(e).__name__}: {e}")
