"""The ground truth: every offset the pipeline wrote, as the writers saw it (not to be confused with the
sink ledger of `eosctl ledger`, which is what the sink holds).

Record offsets come from delivery reports, marker offsets from the high watermark right after a commit or
abort (nothing else writes concurrently, so the marker is the last offset of each partition the
transaction touched), and a record's fate from what its transaction did. Reading the log back would
make the manifest depend on the very thing the audits test.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field

COMMITTED = "committed"  # committed transaction, or a non-transactional write
ABORTED = "aborted"
OPEN = "open"  # transaction never finished (hanging), or a fenced zombie's write that got through


@dataclass
class Record:
    topic: str
    partition: int
    offset: int
    key: str
    status: str
    producer_id: int = -1
    transactional_id: str | None = None
    # For a stage's output record: the input record it was derived from (topic, partition, offset).
    source: tuple[str, int, int] | None = None


@dataclass(frozen=True)
class Marker:
    topic: str
    partition: int
    offset: int
    type: str  # "COMMIT" | "ABORT"
    producer_id: int


@dataclass
class GroundTruth:
    records: list[Record] = field(default_factory=list)
    markers: list[Marker] = field(default_factory=list)

    def add(self, records: Iterable[Record]) -> None:
        self.records.extend(records)

    def of(self, topic: str, status: str | None = None) -> list[Record]:
        chosen = (r for r in self.records if r.topic == topic and (status is None or r.status == status))
        return sorted(chosen, key=lambda r: (r.partition, r.offset))

    def topics(self) -> list[str]:
        return sorted({r.topic for r in self.records} | {m.topic for m in self.markers})

    def markers_at(self, topic: str, partition: int) -> set[int]:
        return {m.offset for m in self.markers if m.topic == topic and m.partition == partition}

    def aborted_ranges(self) -> list[dict]:
        """One range per aborted transaction and partition: its data records (the marker is listed
        separately). Consecutive aborted records of one producer with no marker between them belong to
        the same transaction, because the pipeline's writers never interleave."""
        out: list[dict] = []
        for topic in self.topics():
            for partition, recs in _by_partition(self.of(topic, ABORTED)):
                markers = self.markers_at(topic, partition)

                def same_txn(a: Record, b: Record, markers: set[int] = markers) -> bool:
                    between = range(a.offset + 1, b.offset)
                    return a.producer_id == b.producer_id and markers.isdisjoint(between)

                for run in _runs(recs, same_txn):
                    out.append({"topic": topic, "partition": partition, "first_offset": run[0].offset,
                                "last_offset": run[-1].offset, "producer_id": run[0].producer_id})
        return out

    def marker_dicts(self) -> list[dict]:
        return [asdict(m) for m in sorted(self.markers, key=lambda m: (m.topic, m.partition, m.offset))]


def _by_partition(records: list[Record]) -> Iterator[tuple[int, list[Record]]]:
    parts: dict[int, list[Record]] = {}
    for r in records:
        parts.setdefault(r.partition, []).append(r)
    for p in sorted(parts):
        yield p, parts[p]


def _runs(items: list[Record], joins) -> Iterator[list[Record]]:
    run: list[Record] = []
    for item in items:
        if run and not joins(run[-1], item):
            yield run
            run = []
        run.append(item)
    if run:
        yield run
