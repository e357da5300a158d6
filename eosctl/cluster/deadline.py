"""One deadline per command, and the retry of idempotent reads within it.

A network that drops a connection or stalls for a moment should cost a command a retry, not its answer;
one that stays away should end it within a bound the user chose (``--timeout``), with the time it waited.
This follows Kafka's own Admin client (KIP-533: ``default.api.timeout.ms`` bounds an operation and its
retries, ``request.timeout.ms`` each request), not kafka-python's or librdkafka's per-request settings
alone, which bound one try and leave the number of tries to the caller.

- ``Deadline``: when a command (or one refresh of a watcher) must have its answer. The CLI starts one per
  command (``start``); a long-lived reader renews it per refresh (``renew``, per thread). A thread that
  never started one gives each read a budget of its own of the configured length.
- ``request_timeout_ms``: the first try of a request gets the client's short timeout (an unreachable or
  half-open connection is noticed in seconds), each retry twice the last one: a slow link (a Fetch answer
  of a MiB at 200 KB/s takes 5 s) still gets a try long enough, within what is left of the deadline.
- ``reads``: run one idempotent read (metadata, ListOffsets, Fetch, OffsetFetch, FindCoordinator,
  DescribeGroups, DescribeProducers, ListTransactions, DescribeTransactions) again after a dropped
  connection or a request timeout, with a short backoff, until it answers or the deadline passes; then one
  BrokerError saying how long it waited. A write (WriteTxnMarkers) is never retried here.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import kafka.errors as Errors

from eosctl.base.errors import BrokerError

T = TypeVar("T")

# The default --timeout: Kafka's Admin request.timeout.ms (30 s). A command that cannot read what it needs
# in 30 s is better ended with the reason than left hanging; --timeout gives a slow link more.
DEFAULT_TIMEOUT_S = 30.0
# Backoff between tries: Kafka's retry.backoff.ms (100 ms) growing to retry.backoff.max.ms (1 s).
BACKOFF_S = 0.1
BACKOFF_MAX_S = 1.0
# A connection that keeps dropping or being refused is retried this long at most (a reset costs one retry; a
# broker restarting is back within seconds); then the read fails with that error, so a broker that is down
# is said in seconds, not at the deadline (a watcher shows ERR at its next poll). Timeouts (a stall, a slow
# link, a black hole) are retried until the deadline.
RECONNECT_FOR_S = 5.0
# A try never gets less than this, even when the deadline is nearer: a shorter one could never be answered.
MIN_TRY_MS = 200

# Errors of a request that an identical request may not meet again: the connection dropped (a reset, a
# broker restart, a proxy that closed it), the answer did not come in time (a stall, a black hole, a slow
# link), or no connection could be made yet. Kafka's protocol errors are answers, not transient here.
TRANSIENT = (Errors.KafkaConnectionError, Errors.RequestTimedOutError, Errors.KafkaTimeoutError,
             Errors.NodeNotReadyError, ConnectionError, TimeoutError)


class Transient(BrokerError):
    """A read that met a dropped connection or a timeout: ``reads`` tries it again."""

    def __init__(self, message: str, timed_out: bool = False) -> None:
        super().__init__(message)
        self.timed_out = timed_out


@dataclass
class Deadline:
    """``seconds`` from ``started`` (time.monotonic())."""

    seconds: float
    started: float = field(default_factory=time.monotonic)

    def remaining_s(self) -> float:
        return self.seconds - (time.monotonic() - self.started)

    def waited_s(self) -> float:
        return time.monotonic() - self.started

    def passed(self) -> bool:
        return self.remaining_s() <= 0


# The command's --timeout and, for a one-shot command, when it ends (wall clock), in the environment: the
# processes a command starts (the local engine's forked workers, Spark's Python workers) read within the
# same deadline.
ENV_TIMEOUT = "EOSCTL_TIMEOUT"
ENV_ENDS_AT = "EOSCTL_DEADLINE_AT"
# "1" while the --timeout in force is the option's default: a cluster's configured timeout replaces it.
ENV_DEFAULTED = "EOSCTL_TIMEOUT_DEFAULTED"
_local = threading.local()


def configured_s() -> float:
    """The --timeout of this process (DEFAULT_TIMEOUT_S unless a command said otherwise)."""
    try:
        return float(os.environ.get(ENV_TIMEOUT, DEFAULT_TIMEOUT_S))
    except ValueError:
        return DEFAULT_TIMEOUT_S


def start(seconds: float | None = None, one_shot: bool = True) -> Deadline:
    """A command's deadline from now: ``seconds`` (default: the configured --timeout), for this thread and
    (``one_shot``) every thread and process the command starts; ``finish()`` ends it."""
    if seconds is not None:
        os.environ[ENV_TIMEOUT] = repr(float(seconds))
    deadline = Deadline(configured_s())
    _local.deadline = deadline
    if one_shot:
        os.environ[ENV_ENDS_AT] = repr(time.time() + deadline.seconds)
    else:
        os.environ.pop(ENV_ENDS_AT, None)
    return deadline


def configure(seconds: float) -> None:
    """The --timeout of a long-lived command (a watcher): no clock starts; each refresh renews one."""
    os.environ[ENV_TIMEOUT] = repr(float(seconds))
    os.environ.pop(ENV_ENDS_AT, None)


def renew() -> Deadline:
    """A new deadline of the configured length for this thread: one refresh of a watcher (lag --watch, the
    exporter, the TUI) is one command's worth of waiting; the threads and processes it starts then give
    each read a budget of its own."""
    return start(one_shot=False)


def finish() -> None:
    """The command is over (its context closed): later reads in this process (a test runner's next
    command) start afresh."""
    _local.deadline = None
    os.environ.pop(ENV_ENDS_AT, None)
    os.environ.pop(ENV_TIMEOUT, None)
    os.environ.pop(ENV_DEFAULTED, None)


def defaulted(yes: bool) -> None:
    """Whether the --timeout in force is the option's default (set by the command line's callback)."""
    if yes:
        os.environ[ENV_DEFAULTED] = "1"
    else:
        os.environ.pop(ENV_DEFAULTED, None)


def prefer(seconds: float | None) -> None:
    """A cluster's configured timeout (``clusters.NAME.timeout``), where no --timeout was given and it is
    longer than the command's default (30 s; the audit's 10 min is its whole run): the command's deadline
    (a watcher's, per refresh) is that long instead, from when it started. A --timeout on the command line
    wins."""
    if seconds is None or os.environ.get(ENV_DEFAULTED) != "1" or seconds <= configured_s():
        return
    os.environ[ENV_TIMEOUT] = repr(float(seconds))
    d = getattr(_local, "deadline", None)
    if d is not None and d.seconds != seconds:
        d.seconds = float(seconds)
        if ENV_ENDS_AT in os.environ:  # a one-shot command: the processes it starts read within it too
            os.environ[ENV_ENDS_AT] = repr(time.time() + d.remaining_s())


def current() -> Deadline:
    """This thread's deadline; else the one-shot command's that started this thread or process; else a
    fresh one for this read alone."""
    deadline = getattr(_local, "deadline", None)
    if deadline is not None:
        return deadline
    seconds = configured_s()
    try:
        ends_at = float(os.environ[ENV_ENDS_AT])
    except (KeyError, ValueError):
        return Deadline(seconds)
    return Deadline(seconds, started=time.monotonic() + (ends_at - time.time()) - seconds)


def request_timeout_ms(base_ms: int, attempt: int, deadline: Deadline | None = None) -> int:
    """The timeout of try ``attempt`` (0 first) of a request: ``base_ms`` doubled per retry, never past
    the deadline (but at least MIN_TRY_MS)."""
    d = deadline or current()
    return max(MIN_TRY_MS, min(int(base_ms * 2 ** attempt), int(d.remaining_s() * 1000)))


def connect_timeout_ms(deadline: Deadline | None = None) -> int:
    """How long a bootstrap (TCP, TLS, SASL, ApiVersions, Metadata: several round trips), or a request a
    library sends while it connects, may wait: what is left of the command's deadline. No fixed cap below
    it: at 4.5 s of latency a bootstrap takes 9-14 s, and a cap the user cannot change (Kafka's
    socket.connection.setup.timeout.ms, 10 s, was one) ended `lag --timeout 120s` after 10 s."""
    d = deadline or current()
    return max(MIN_TRY_MS, int(d.remaining_s() * 1000))


def bound(manager: Any, deadline: Deadline | None = None) -> int:
    """Give kafka-python's own waits on ``manager`` (its KafkaConnectionManager) what is left of the
    deadline now, and return it (ms). A client keeps the timeouts it was made with: a new connection's set-up
    and every request it sends without a timeout of eosctl's (the admin client's, a connection's ApiVersions
    and SASL) took what was left at its making, counted from when it began: a client made early whose wait
    began late (a black hole after its first answers) ended past --timeout by the time in between. Called
    before each phase (each wave of requests, each library call)."""
    ms = connect_timeout_ms(deadline)
    config = getattr(manager, "config", None)
    if isinstance(config, dict):
        config["request_timeout_ms"] = ms
        config["socket_connection_setup_timeout_ms"] = ms
        config["socket_connection_setup_timeout_max_ms"] = ms
    for conn in list(getattr(manager, "_conns", {}).values()):
        # Each connection copied the config at its making and keeps its request timeout from its first use.
        if isinstance(getattr(conn, "config", None), dict):
            conn.config["request_timeout_ms"] = ms
        conn._timeout_secs = ms / 1000
    backoff = getattr(manager, "_backoff", None)
    if isinstance(backoff, dict):
        # A failed connection's next set-up timeout (grown and jittered up to 1.2x from the config's).
        for node, entry in list(backoff.items()):
            if isinstance(entry, tuple) and len(entry) == 3:
                backoff[node] = (entry[0], entry[1], min(entry[2], ms))
    return ms


# A wait that ended with less than this left of the deadline was ended by the deadline, whatever the
# library's error says ("Unable to bootstrap", a request timeout).
ENDED_BY_DEADLINE_S = 0.5


def ended_by(deadline: Deadline) -> bool:
    """Whether a wait that just failed was cut short by the deadline (nothing, or next to nothing, left)."""
    return deadline.remaining_s() <= ENDED_BY_DEADLINE_S


def at_deadline(what: str, waiting_for: str, deadline: Deadline) -> str:
    """The one line for a wait the deadline ended that no retry loop ran (a bootstrap): that it was the
    deadline, how long the command read in all, and what it was waiting for."""
    return (f"{what}: no answer within the deadline: waited {deadline.waited_s():.1f} s (--timeout "
            f"{deadline.seconds:g}s), waiting for {waiting_for}; check the network to the broker, or pass a "
            "longer --timeout for a slow link")


def gave_up(what: str, why: object, deadline: Deadline, tries: int) -> str:
    """The one line for a read the deadline ended."""
    return (f"{what}: no answer within the deadline: waited {deadline.waited_s():.1f} s over {tries} "
            f"tr{'y' if tries == 1 else 'ies'} (--timeout {deadline.seconds:g}s); last: {why}; check the "
            "network to the broker, or pass a longer --timeout for a slow link")


def library_call(what: str, fn: Callable[..., T], *args: object, **kwargs: object) -> T:
    """One idempotent call of a client library (kafka-python's admin: ListTransactions,
    DescribeTransactions, DescribeProducers), called again after a dropped connection or a timeout within
    the deadline; the library reconnects by itself."""

    # The library's client behind a bound method (kafka-python's admin): its waits renewed per try.
    manager = getattr(getattr(fn, "__self__", None), "_manager", None)

    def attempt(_: int) -> T:
        if manager is not None:
            bound(manager)
        try:
            return fn(*args, **kwargs)
        except TRANSIENT as e:
            dropped = isinstance(e, Errors.KafkaConnectionError)
            raise Transient(named(e), timed_out=not dropped) from None

    return reads(what, attempt)


def named(e: BaseException) -> str:
    """An error as one phrase with its class name once (kafka-python's errors print theirs already)."""
    text = str(e)
    return text if text.startswith(type(e).__name__) else f"{type(e).__name__}: {text}".rstrip(": ")


def reads(what: str, attempt: Callable[[int], T], after_failure: Callable[[Transient], None] | None = None,
          deadline: Deadline | None = None, retry_if: Callable[[Transient, int], bool] | None = None) -> T:
    """``attempt(n)`` (n = 0, 1, ...) until it returns, retrying on Transient within the deadline;
    ``after_failure`` runs before each retry (drop the broken connections); ``retry_if(failure, tries)``
    False ends the retries early with the failure itself (the caller has a better way on)."""
    d = deadline or current()
    tries = 0
    dropping_since: float | None = None
    while True:
        try:
            return attempt(tries)
        except Transient as e:
            tries += 1
            now = time.monotonic()
            dropping_since = None if e.timed_out else (dropping_since or now)
            if retry_if is not None and not retry_if(e, tries):
                raise BrokerError(f"{what} failed: {e}") from None
            if dropping_since is not None and now - dropping_since >= RECONNECT_FOR_S:
                raise BrokerError(f"{what} failed: {e} (connection lost for {now - dropping_since:.1f} s, "
                                  f"{tries} tries)") from None
            pause = min(BACKOFF_MAX_S, BACKOFF_S * 2 ** (tries - 1))
            if d.remaining_s() < pause + MIN_TRY_MS / 1000:
                raise BrokerError(gave_up(what, e, d, tries)) from None
            if after_failure is not None:
                after_failure(e)
            time.sleep(pause)
