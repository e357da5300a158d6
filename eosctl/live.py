"""The live model of a pipeline: the one thing every live reader of eosctl refreshes (TUI, `lag --watch`,
the exporter).

A `LiveModel` holds the latest `Capture` plus what only a watcher keeps between readings: when each
section was last read successfully, how often each failed, whether the cluster answered, and the lag
history with its Burrow-style statuses. `refresh()` brings it up to date and returns the current state;
`capture()` stays the one-shot reading, and a snapshot is `model.current` at one moment.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field

from eosctl.capture import SECTIONS, Capture, capture
from eosctl.clients import Admins
from eosctl.config import Sink
from eosctl.errors import BrokerError
from eosctl.lag import LagSnapshot, Status, Watch
from eosctl.target import Target
from eosctl.txns import DEFAULT_MAX_AGE_S

LagKey = tuple[str, str, int]  # group, topic, partition
# Lag samples kept per partition for the sparklines (and the Burrow-style window).
HISTORY = 20
DEFAULT_TIMEOUT_MS = 5_000


@dataclass
class LagHistory:
    """Each lag poll fed to eosctl.lag.Watch (statuses), and the recent series per partition."""

    window: int = HISTORY
    watch: Watch = field(init=False)
    series: dict[LagKey, deque[int]] = field(default_factory=dict)  # records behind, oldest first
    statuses: dict[LagKey, Status] = field(default_factory=dict)
    group_statuses: dict[str, Status] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.watch = Watch(window=self.window)

    def add(self, snap: LagSnapshot) -> None:
        self.watch.add(snap)
        seen = set()
        for p in snap.partitions:
            key = (p.group, p.topic, p.partition)
            seen.add(key)
            value = p.records_behind if p.records_behind is not None else (p.lag_to_lso or 0)
            self.series.setdefault(key, deque(maxlen=self.window)).append(value)
        for key in set(self.series) - seen:
            del self.series[key]
        self.statuses = {key: self.watch.partition_status(*key) for key in self.series}
        self.group_statuses = {g: self.watch.group_status(g) for g in snap.groups()}

    def lists(self) -> dict[LagKey, list[int]]:
        return {k: list(v) for k, v in self.series.items()}


class LiveModel:
    """The pipeline as last read, refreshed in place.

    ``tail``: keep at most the last N offsets of each partition's log (None: whole logs).
    ``sink_every_s``: how often the sink is read again (it may be huge; Kafka is read every refresh).
    ``admins``: clients to share; otherwise the model builds its own and closes them in close().
    An unreachable cluster makes refresh() raise BrokerError; ``current`` then keeps the last good state.
    """

    def __init__(self, target: Target, *, sink: Sink | None = None, tail: int | None = None,
                 sink_every_s: float = 30.0, max_age_s: float = DEFAULT_MAX_AGE_S,
                 admins: Admins | None = None, timeout_ms: int = DEFAULT_TIMEOUT_MS) -> None:
        self.target = target
        pipe = target.pipeline
        self.sink = sink if sink is not None else (pipe.sink if pipe else None)
        self.tail = tail
        self.sink_every_s = sink_every_s
        self.max_age_s = max_age_s
        self.timeout_ms = timeout_ms
        self._own_admins = admins is None
        self.admins = admins or Admins(target.cluster, timeout=timeout_ms / 1000)
        self._current: Capture | None = None
        self._ok_at: dict[str, float] = {}  # section -> time.time() of its last good read
        self.refresh_errors: dict[str, int] = {name: 0 for name in SECTIONS}
        self.last_refresh_seconds = 0.0
        self.up = False
        self.lag_history = LagHistory()

    @property
    def current(self) -> Capture | None:
        return self._current

    def refresh(self) -> Capture:
        started = time.monotonic()
        try:
            cap = capture(self.target, sink=self.sink, tail=self.tail, max_age_s=self.max_age_s,
                          admins=self.admins, timeout_ms=self.timeout_ms)
        except BrokerError:
            self.up = False
            for name in SECTIONS:
                if name != "ledger" or self.sink is not None:
                    self.refresh_errors[name] += 1
            self.admins.reset()
            raise
        finally:
            self.last_refresh_seconds = time.monotonic() - started
        self._settle(cap)
        return cap

    def _settle(self, cap: Capture) -> None:
        """Record what this reading says about each section, and keep it as the current state."""
        self.up = True
        now = time.time()
        failed = cap.errors()
        for name in cap.sections:
            if name in failed:
                self.refresh_errors[name] = self.refresh_errors.get(name, 0) + 1
            else:
                self._ok_at[name] = now
        if cap.lag is not None and cap.sections.get("lag") == "ok":
            self.lag_history.add(cap.lag)
        self._current = cap

    def section_age(self, name: str, now: float | None = None) -> float | None:
        """Seconds since the section was last read successfully (None: never)."""
        at = self._ok_at.get(name)
        if at is None:
            return None
        return max(0.0, (time.time() if now is None else now) - at)

    def close(self) -> None:
        if self._own_admins:
            self.admins.close()

    def __enter__(self) -> LiveModel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
