"""Every codec Kafka writes decodes on a plain install (pyproject.toml declares what kafka.codec imports for
it), and a batch that still cannot be decompressed is named by its codec with what to install."""

from __future__ import annotations

import importlib.metadata
import re
import struct
import tomllib
from pathlib import Path

import pytest
from kafka import codec as kafka_codec
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder

from eosctl.cluster import compression
from eosctl.cluster.batches import BatchDecodeError, decode, decode_batch
from eosctl.cluster.recordkeys import decode_keys

REPO = Path(__file__).resolve().parents[3]
NAMES = {1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}


def _declared() -> set[str]:
    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    return {re.split(r"[<>=!~\[; ]", d, maxsplit=1)[0].lower() for d in deps}


def test_this_python_decodes_every_codec() -> None:
    assert (kafka_codec.has_gzip(), kafka_codec.has_snappy(), kafka_codec.has_lz4(),
            kafka_codec.has_zstd()) == (True, True, True, True)
    assert compression.missing() == []


def test_pyproject_declares_the_library_kafka_codec_imports_for_each_codec() -> None:
    """The modules kafka.codec bound (snappy, lz4.frame, zstandard) belong to distributions that
    pyproject.toml names, so a fresh `pip install -e .` has them, not a dependency's dependency."""
    modules = {"snappy": kafka_codec.snappy, "lz4": kafka_codec.lz4, "zstd": kafka_codec.zstd}
    owners = importlib.metadata.packages_distributions()
    declared = _declared()
    for name, module in modules.items():
        assert module is not None, f"kafka.codec found no {name} library"
        top = module.__name__.split(".")[0]
        dists = {d.lower() for d in owners[top]}
        assert compression.LIBRARIES[name] in dists, (name, dists)
        assert dists & declared, f"pyproject.toml declares none of {sorted(dists)} (the {name} codec)"


def _v2(codec: int, deltas: list[int], base: int = 40) -> bytes:
    b = DefaultRecordBatchBuilder(2, codec, False, -1, -1, -1, 1 << 20)
    for d in deltas:
        b.append(d, timestamp=1_700_000_000_000 + d, key=b"k%d" % d, value=b"v" * 50, headers=[])
    raw = bytearray(b.build())
    struct.pack_into(">q", raw, 0, base)
    return bytes(raw)


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_each_codec_decodes_in_the_header_reader_and_the_key_reader(codec: int) -> None:
    # offsets 41 and 43 removed (a compacted batch): the header reader must decompress to list the rest
    raw = _v2(codec, [0, 2, 4], base=40)
    b = decode_batch(raw)
    assert (b.compression, b.offsets) == (NAMES[codec], (40, 42, 44))
    got = decode_keys(raw)
    assert got is not None and got[0].tolist() == [40, 42, 44]


@pytest.mark.parametrize("codec", [2, 3, 4])
def test_a_missing_codec_is_named_with_what_to_install(codec: int, monkeypatch) -> None:
    name = NAMES[codec]
    raw = _v2(codec, [0, 2, 4], base=40)
    monkeypatch.setattr(kafka_codec, f"has_{name}", lambda: False)
    want = (f"the batch at offset 40 is {name}-compressed and this Python has no {name} codec "
            f"(kafka-python decodes {name} with the `{compression.LIBRARIES[name]}` package, a dependency "
            f"of eosctl): reinstall eosctl (`pip install -e .` in its checkout) or "
            f"`pip install {compression.LIBRARIES[name]}`")
    for read in (decode_batch, decode_keys):
        with pytest.raises(BatchDecodeError) as info:
            read(raw)
        assert str(info.value) == want
    assert compression.missing() == [name]


def test_a_legacy_message_set_with_a_missing_codec_is_named(monkeypatch) -> None:
    b = LegacyRecordBatchBuilder(1, 2, 1 << 20)  # magic 1, snappy
    for i in range(3):
        b.append(i, timestamp=1_700_000_000_000, key=b"k", value=b"v")
    data = bytes(b.build())
    monkeypatch.setattr(kafka_codec, "has_snappy", lambda: False)
    with pytest.raises(BatchDecodeError, match=r"^the batch at offset 0 is snappy-compressed .* `pip install "
                                               r"python-snappy`$"):
        decode(data)


def test_an_undefined_codec_number_is_named_as_such() -> None:
    raw = bytearray(_v2(0, [0, 2], base=7))
    struct.pack_into(">h", raw, 21, 5)  # attributes: codec 5 (the CRC is not checked here)
    for read in (decode_batch, decode_keys):
        with pytest.raises(BatchDecodeError) as info:
            read(bytes(raw))
        assert str(info.value) == ("the batch at offset 7 names compression codec 5, which Kafka does not "
                                   "define (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd): the batch is corrupt, "
                                   "or written by a newer Kafka than this eosctl knows")
        assert "unknown" not in str(info.value)


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_a_corrupt_payload_is_named_corrupt_with_its_codec_not_a_missing_codec(codec: int) -> None:
    raw = bytearray(_v2(codec, [0, 2, 4], base=9))
    raw[61:] = b"\x00" * (len(raw) - 61)
    for read in (decode_batch, decode_keys):
        with pytest.raises(BatchDecodeError) as info:
            read(bytes(raw))
        assert str(info.value).startswith(f"corrupt {NAMES[codec]} record batch at offset 9: ")
        assert "install" not in str(info.value)


def test_librdkafka_decodes_every_codec_for_the_readers_that_consume() -> None:
    """The readers that consume through confluent-kafka (stage and replica lineage, a Kafka-topic sink, the
    sandbox pipeline) decode with librdkafka's own codecs: setting builtin.features to the features an
    application needs fails where the build lacks one (librdkafka checks its builds so:
    packaging/cp/check_features.c)."""
    from confluent_kafka import Consumer, KafkaException

    Consumer({"group.id": "codecs", "builtin.features": "gzip,snappy,lz4,zstd"}).close()
    with pytest.raises(KafkaException, match="builtin.features"):
        Consumer({"group.id": "codecs", "builtin.features": "gzip,snappy,lz4,zstd,brotli"})
