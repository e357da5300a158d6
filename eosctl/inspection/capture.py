"""Everything eosctl reads about a pipeline at one moment: the only code that gathers it.

`capture()` reads (never writes) Kafka and the sink and returns one `Capture`: the partition logs, the
transactions, the producers, the lag, the hanging check and the sink ledger, each section with a status
("ok" or the one-line reason it is empty). `eosctl snapshot` writes a Capture to a file and the TUI shows
one (live: a fresh capture per refresh, tail-scanned; offline: a Capture loaded from a snapshot file), so
the live and the offline views show the same thing by construction.

Why the hanging check keeps candidates at every age: a capture is taken during an incident, when the
transaction that matters may be minutes old, younger than Kafka's 15-minute timeout. So the rules run
with max-age 0 (every LSO-holding or coordinator-orphaned open transaction, with its age) and `hanging`
keeps those at least `max_age_s` old; `hanging_at()` re-applies another max-age later, offline.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from eosctl import __version__
from eosctl.base.errors import BrokerError, EosctlError, SinkError
from eosctl.base.progress import Progress
from eosctl.cluster.clients import Admins
from eosctl.cluster.logscan import scan_partitions
from eosctl.cluster.model import TP, PartitionLog
from eosctl.cluster.wire import Offsets, WireClient
from eosctl.config.model import Sink
from eosctl.config.target import Target
from eosctl.inspection import lag as lag_mod
from eosctl.inspection.lag import LagSnapshot
from eosctl.inspection.ledger import Ledger, collect
from eosctl.report.findings import AuditReport
from eosctl.txn import producers as producers_mod
from eosctl.txn import transactions as txns_mod
from eosctl.txn.producers import ProducerRow
from eosctl.txn.transactions import DEFAULT_MAX_AGE_S, Described, Hanging, HangingReport, TxnInfo

SECTIONS = ("logs", "transactions", "producers", "lag", "hanging", "ledger")
NOT_CAPTURED = "not captured: "  # how a section's status starts when it could not be read
SKIPPED = "skipped: "  # ... and when there was nothing to read (no sink, no topics): not an error


@dataclass
class Capture:
    """One reading of a pipeline. Offsets follow Kafka: first/last inclusive, HW and LSO exclusive."""

    captured_at: datetime
    bootstrap: str
    pipeline: str | None
    group: str | None
    topics: list[str]  # the source topics and the pipeline's output topic
    eosctl_version: str = __version__
    # None: every partition's whole log, [log start, HW); N: at most its last N offsets.
    tail: int | None = None
    logs: dict[TP, PartitionLog] = field(default_factory=dict)
    transactions: list[TxnInfo] = field(default_factory=list)  # filtered to the transactional id prefix
    producers: list[ProducerRow] = field(default_factory=list)
    lag: LagSnapshot | None = None
    # The hanging rules at `max_age_s` (as `txns hanging` reports them), every candidate at any age and
    # the time ages are measured from; None / [] when not checked.
    hanging: HangingReport | None = None
    hanging_candidates: list[Hanging] = field(default_factory=list)
    hanging_checked_ms: int | None = None
    ledger: Ledger | None = None
    audit: AuditReport | None = None  # stored with a snapshot, or the last one the TUI ran
    audit_origin: str | None = None  # "run", or the JSON report file it was read from
    # Section name -> "ok", or the one-line reason it is empty (an older broker, no sink, ...).
    sections: dict[str, str] = field(default_factory=dict)
    # Partitions this reading could not read, with why (no leader: the brokers holding their replicas are
    # down); the sections hold the others (the live model, eosctl.inspection.live).
    unreadable: dict[TP, str] = field(default_factory=dict)
    # `snapshot --records N`: each partition's last data records as eosctl.inspection.records documents
    # them (decoded through the registry unless --raw); empty unless asked (records hold the payloads).
    records: dict[TP, list[dict[str, Any]]] = field(default_factory=dict)

    def log_of(self, topic: str, partition: int) -> PartitionLog | None:
        return self.logs.get((topic, partition))

    def errors(self) -> dict[str, str]:
        """The sections that could not be read, with the reason (not those with nothing to read)."""
        return {name: status.removeprefix(NOT_CAPTURED) for name, status in self.sections.items()
                if status != "ok" and not status.startswith(SKIPPED)}


def capture(
    target: Target,
    *,
    sink: Sink | None = None,
    where: str = "sink",
    scan: bool = True,
    tail: int | None = None,
    max_age_s: float = DEFAULT_MAX_AGE_S,
    admins: Admins | None = None,
    timeout_ms: int = 10_000,
    progress: Progress | None = None,
) -> Capture:
    """Everything about the target's pipeline, read now. A failing section is recorded, not fatal.

    ``sink``: the sink to build the ledger from (default: the pipeline's); ``scan``: check the ledger
    against the log. ``tail``: scan only the last N offsets of each partition (the TUI's refresh); the
    ledger then scans the whole logs it needs itself. ``admins``: clients to reuse across captures; a
    broker error in a section drops them so the next use reconnects. An unreachable broker raises
    BrokerError (there is nothing to capture).
    """
    pipe = target.pipeline
    sink = sink if sink is not None else (pipe.sink if pipe else None)
    topics = list(target.watched)
    cap = Capture(captured_at=datetime.now(UTC), bootstrap=target.cluster.bootstrap_servers,
                  pipeline=pipe.name if pipe else None, group=target.group, topics=topics, tail=tail)
    own = admins is None
    admins = admins or Admins(target.cluster, timeout=timeout_ms / 1000)
    try:
        with WireClient(target.cluster, timeout_ms=timeout_ms) as client:
            _read_kafka(cap, target, client, admins, max_age_s, progress)
    finally:
        if own:
            admins.close()
    hops = target.pipeline.hops if target.pipeline else ()
    if sink is None and hops:  # each hop has its own sink: say how to capture one
        cap.sections["ledger"] = (f"{SKIPPED}the pipeline is audited hop by hop and has no sink of its own "
                                  f"(a hop's ledger: -p {' or -p '.join(hops)})")
    elif sink is None:
        cap.sections["ledger"] = f"{SKIPPED}the pipeline has no sink"
    else:
        # The ledger compares the sink with whole logs only: a tail would make every record before it look
        # missing. It scans the partitions a tail capture left short itself.
        whole = {tp: lg for tp, lg in cap.logs.items() if tp[0] in target.topics and covers_whole_log(lg)}
        _section(cap, "ledger", lambda: collect(
            target.cluster, sink, target.topics, target.group, pipeline=cap.pipeline, where=where,
            scan=scan, logs=whole, progress=progress), admins, errors=(EosctlError, SinkError))
    return cap


def _read_kafka(cap: Capture, target: Target, client: WireClient, admins: Admins, max_age_s: float,
                progress: Progress | None) -> None:
    known = client.metadata(cap.topics) if cap.topics else {}
    tps = [(t, p) for t, parts in known.items() for p in sorted(parts)]
    starts = None
    if cap.tail is not None and tps:
        offsets = client.offsets(tps)
        starts = {tp: max(o.log_start, o.high_watermark - cap.tail) for tp, o in offsets.items()}
    cap.logs = scan_partitions(client, tps, start=starts, progress=progress) if tps else {}
    cap.sections["logs"] = "ok" if cap.topics else f"{SKIPPED}no topics (pass --topic or a pipeline)"
    read_sections(cap, target, client, admins, known, max_age_s)


def read_sections(cap: Capture, target: Target, client: WireClient, admins: Admins,
                  known: dict[str, dict[int, int]], max_age_s: float,
                  offsets: dict[TP, Offsets] | None = None, only: Collection[str] = SECTIONS,
                  lag_groups: Sequence[str] | None = None,
                  scan_limit: int = lag_mod.DEFAULT_SCAN_LIMIT,
                  describe: Callable[[list[TP]], Described] | None = None,
                  unreadable: Mapping[TP, str] | None = None) -> None:
    """The sections besides the logs and the ledger (transactions, producers, lag, hanging), each one
    failing on its own; ``cap.logs`` is read already. ``offsets``: the partitions' offsets if just read;
    ``only``: the sections wanted; ``lag_groups``: the groups whose lag is measured (default: the
    target's group, else every group of the topics); ``describe``: DescribeProducers for partitions (the
    live model's asks only where the log changed); ``unreadable``: partitions left out of ``known`` (no
    leader), the lag's rows for them naming why."""
    tps = [(t, p) for t, parts in known.items() for p in sorted(parts)]
    answers: list[Described] = []

    def described() -> Described:
        # DescribeProducers once, for both the hanging rules and the producers table; inside a section, so
        # a broker that fails it costs only those sections.
        if not answers:
            ask = describe or (lambda parts: txns_mod.describe_producers(admins.kafka, parts))
            answers.append(ask(tps) if tps else ({}, "ok"))
        return answers[0]

    def transactions() -> list[TxnInfo]:
        # The pipeline's prefixes filtered by the brokers where they can (ListTransactions v2, KIP-1152):
        # the TUI's and the exporter's refresh describes only the pipeline's ids.
        rows = [t for t in txns_mod.list_transactions(admins.kafka, prefixes=target.txn_id_prefixes)
                if target.owns_txn(t.transactional_id)]
        # ListTransactions leaves out the ids this principal may not Describe: zeros would be no answer.
        unseen = next(filter(None, (txns_mod.coordinator_unseen(client, p)
                                    for p in target.txn_id_prefixes or ("",))), None)
        if unseen and (target.txn_id_prefixes or not rows):
            raise EosctlError(unseen)
        return rows

    def producers() -> list[ProducerRow]:
        return producers_mod.find(client, admins.kafka, tps, logs=cap.logs, described=described()).rows \
            if tps else []

    def lag() -> LagSnapshot:
        groups = list(lag_groups) if lag_groups else target.lag_groups() or None
        return lag_mod.poll(client, groups=groups, topics=list(target.topics) or None,
                            scan_limit=scan_limit, offsets=offsets,
                            per_group=None if lag_groups else dict(target.group_topics),
                            unreadable=unreadable)

    def hanging() -> HangingReport:
        if not known:
            raise EosctlError("no topics to check (pass --topic or a pipeline)")
        cap.hanging_checked_ms = int(time.time() * 1000)
        every = txns_mod.find_hanging(client, admins.kafka, list(known), max_age_s=0.0,
                                      now_ms=cap.hanging_checked_ms, described=described(), known=offsets)
        cap.hanging_candidates = every.hanging
        if every.could_not_look and not every.hanging:
            raise EosctlError(f"cannot rule out hanging transactions: {every.could_not_look}")
        return over_max_age(every, max_age_s)

    for name, read in (("transactions", transactions), ("producers", producers), ("lag", lag),
                       ("hanging", hanging)):
        if name in only:
            _section(cap, name, read, admins)


def _section(cap: Capture, name: str, read: Callable[[], object], admins: Admins,
             errors: tuple[type[Exception], ...] = (EosctlError,)) -> None:
    """Run one section; a problem the user can fix (an old broker, a locked sink) is recorded, not fatal."""
    try:
        setattr(cap, name, read())
        cap.sections[name] = "ok"
    except errors as e:
        cap.sections[name] = f"{NOT_CAPTURED}{e}"
        if isinstance(e, BrokerError):
            admins.reset()  # the broker went away: reconnect on the next use


def covers_whole_log(log: PartitionLog) -> bool:
    """Whether a scan covers its partition's whole log, [log start, HW)."""
    return log.scanned_from == log.log_start_offset and log.scanned_to == log.high_watermark


def over_max_age(report: HangingReport, max_age_s: float) -> HangingReport:
    """The report keeping only the findings at least ``max_age_s`` old (the rules' age threshold)."""
    young = [h for h in report.hanging if not _old_enough(h, max_age_s) and h.lso == h.first_offset]
    return dataclasses.replace(report, max_age_s=max_age_s,
                               hanging=[h for h in report.hanging if _old_enough(h, max_age_s)],
                               blocking=sorted({(h.topic, h.partition, h.producer_id): h
                                                for h in [*report.blocking, *young]}.values(),
                                               key=lambda h: (h.topic, h.partition, h.first_offset)))


def _old_enough(h: Hanging, max_age_s: float) -> bool:
    return h.age_s is not None and h.age_s >= max_age_s


def hanging_at(cap: Capture, max_age_s: float) -> HangingReport | None:
    """The capture's hanging report re-applied with another max-age (None if hanging wasn't checked)."""
    if cap.hanging is None:
        return None
    every = dataclasses.replace(cap.hanging, hanging=candidates(cap))
    return over_max_age(every, max_age_s)


def candidates(cap: Capture) -> list[Hanging]:
    """Every candidate, plus any report finding missing from them (a hand-built Capture)."""
    extra = [h for h in (cap.hanging.hanging if cap.hanging else []) if h not in cap.hanging_candidates]
    return sorted([*cap.hanging_candidates, *extra], key=lambda h: (h.topic, h.partition, h.first_offset))
