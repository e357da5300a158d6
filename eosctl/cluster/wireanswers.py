"""What the raw Kafka client's answers carry (eosctl.cluster.wire): a partition's offsets, a partition's Fetch
answer, and the cross-check of the offsets ListOffsets lists against those a Fetch answer carries (a broker
that disagrees with itself). Plain data: eosctl.cluster.logclassify and the audit read them without the
client.
"""

from __future__ import annotations

from dataclasses import dataclass

import kafka.errors as Errors

from eosctl.cluster.clientcauses import denied
from eosctl.cluster.model import TP

OFFSET_NAMES = ("log start", "high watermark", "LSO")


@dataclass(frozen=True, slots=True)
class Offsets:
    log_start: int
    high_watermark: int
    last_stable: int
    # Set when ListOffsets and the offsets a Fetch answer carries disagree: which broker answer is wrong.
    # The three offsets are then the Fetch answer's (what a read_committed consumer is served), and no
    # verdict may rest on them (see WireClient.offsets).
    disagreement: str | None = None
    listed: tuple[int, int, int] | None = None  # ListOffsets' own answer, when it was found wrong

    @property
    def triple(self) -> tuple[int, int, int]:
        return self.log_start, self.high_watermark, self.last_stable


@dataclass(frozen=True, slots=True)
class FetchResult:
    topic: str
    partition: int
    fetch_offset: int
    error_code: int
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    aborted: tuple[tuple[int, int], ...]  # (producer_id, first_offset), only sent for read_committed
    records: bytes
    throttle_ms: int = 0  # the response's throttle_time_ms (KIP-219: don't ask that broker again sooner)
    # False: the broker's answer left this partition out (a throttled fetch is answered with no
    # partitions at all, KIP-219); every other field is then a placeholder.
    answered: bool = True
    max_wait_ms: int = 0  # the wait this answer was asked with (the last of FETCH_WAITS_MS tried)

    @property
    def error(self) -> str | None:
        if self.error_code == 0:
            return None
        return denied(self.error_code, "Fetch", self.topic) or Errors.for_code(self.error_code).__name__


def served(r: FetchResult) -> tuple[int, int, int] | None:
    """(log start, HW, LSO) as a Fetch answer carries them; None when it has none (an error, left out)."""
    if not r.answered or r.error_code or min(r.log_start_offset, r.high_watermark, r.last_stable_offset) < 0:
        return None
    return r.log_start_offset, r.high_watermark, r.last_stable_offset


def checked(tp: TP, first: Offsets, second: Offsets | None, served: tuple[int, int, int]) -> Offsets:
    """The partition's offsets after the cross-check (see WireClient.offsets)."""
    wrong = []
    for name, f, l1, l2 in zip(OFFSET_NAMES, served, first.triple, (second or first).triple, strict=True):
        if second is not None and f > l2:
            wrong.append(f"ListOffsets answers {name} {l2}, but a Fetch already showed {f}")
        elif f < l1:
            wrong.append(f"a Fetch shows {name} {f}, after ListOffsets answered {l1}")
    if not wrong:
        return Offsets(*served)
    culprit = ("ListOffsets is wrong (these offsets never go back)" if all(w.startswith("ListOffsets")
               for w in wrong) else "one of its ListOffsets or Fetch answers is wrong (these offsets never "
               "go back)")
    return Offsets(*served, disagreement=f"the broker disagrees with itself on {tp[0]}-{tp[1]}: "
                   f"{'; '.join(wrong)}: {culprit}; a read_committed consumer is served the Fetch's",
                   listed=(second or first).triple)
