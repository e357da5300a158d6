"""The audit's policy over its final findings: waivers (what was accepted, until when) and levels (warn or
fail per kind, from a count). Read from a waiver file (`--waivers FILE`, `[audit] waivers`) and the config's
`[audit.levels]`; applied by eosctl.report.policy after the findings are built.

A waiver file is TOML, one `[[waivers]]` table per accepted finding range:

    [[waivers]]
    topic = "orders"
    partition = 0                # optional: every partition
    kind = "gap"
    first_offset = 1200          # optional, with last_offset: the range (inclusive) it covers
    last_offset = 1299
    reason = "lost in INC-4521, replayed into the warehouse by hand"
    reference = "INC-4521"       # optional: a ticket, a URL
    expires = 2026-12-31         # optional: a date (waived through that day, UTC) or a time
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path
from typing import Any

from eosctl.base.errors import ConfigError

LEVELS = ("ok", "warn", "fail")
_WAIVER_KEYS = {"topic", "partition", "kind", "first_offset", "last_offset", "reason", "reference", "expires"}


@dataclass(frozen=True)
class Waiver:
    """One accepted finding range. A finding is waived when its kind and topic are the waiver's, its
    partition too (where the waiver names one), and its offsets lie wholly inside the waiver's range (where
    it names one), until ``expires_ms``."""

    topic: str
    kind: str
    reason: str
    partition: int | None = None
    first_offset: int | None = None
    last_offset: int | None = None
    reference: str | None = None
    expires: str | None = None  # as written: 2026-12-31 or 2026-12-31T12:00:00Z
    expires_ms: int | None = None  # the first moment it no longer waives

    def covers(self, kind: str, topic: str | None, partition: int | None, first: int | None,
               last: int | None) -> bool:
        if kind != self.kind or topic != self.topic:
            return False
        if self.partition is not None and partition != self.partition:
            return False
        if self.first_offset is None:
            return True
        return first is not None and last is not None and self.first_offset <= first \
            and last <= (self.last_offset if self.last_offset is not None else first)

    def expired(self, now_ms: int) -> bool:
        return self.expires_ms is not None and now_ms >= self.expires_ms

    def to_dict(self) -> dict[str, Any]:
        return {"topic": self.topic, "partition": self.partition, "kind": self.kind,
                "first_offset": self.first_offset, "last_offset": self.last_offset, "reason": self.reason,
                "reference": self.reference, "expires": self.expires}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Waiver:
        expires = d.get("expires")
        return cls(str(d["topic"]), str(d["kind"]), str(d["reason"]), _int(d.get("partition")),
                   _int(d.get("first_offset")), _int(d.get("last_offset")), d.get("reference"),
                   expires, None if expires is None else _expiry_ms(expires))


@dataclass(frozen=True)
class Level:
    """A kind's levels: it warns from ``warn`` and fails from ``fail`` (each counted as the sum of its
    findings' `count` that are not waived: missing records, extra rows, ...); None: never."""

    kind: str
    warn: int | None = None
    fail: int | None = 1

    def of(self, total: int) -> str:
        if self.fail is not None and total >= self.fail:
            return "fail"
        if self.warn is not None and total >= self.warn:
            return "warn"
        return "ok"


def parse_level(kind: str, value: Any, where: str) -> Level:
    """A level as written: "warn" (warns from 1, never fails), "fail" (fails from 1: the default), a
    table {warn = N, fail = M}, or on the command line "warn:N,fail:M". ValueError saying what is wrong."""
    if value == "warn":
        return Level(kind, 1, None)
    if value == "fail":
        return Level(kind, None, 1)
    if isinstance(value, str) and ":" in value:
        table: dict[str, Any] = {}
        for part in value.split(","):
            name, _, n = part.partition(":")
            if not n.strip().isdigit():
                raise ValueError(f"{where}: {part!r} is not warn:N or fail:N")
            table[name.strip()] = int(n)
        value = table
    if isinstance(value, dict) and value and set(value) <= {"warn", "fail"} and all(
            isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in value.values()):
        return Level(kind, value.get("warn"), value.get("fail"))
    raise ValueError(f"{where}: expected \"warn\", \"fail\" or {{warn = N, fail = M}} (N, M at least 1)")


def load_waivers(path: str | Path, kinds: tuple[str, ...]) -> tuple[Waiver, ...]:
    """The waivers of a waiver file; a wrong one is a ConfigError naming the file, the waiver and the key."""
    p = Path(path)
    try:
        raw = tomllib.loads(p.read_text(encoding="utf-8"))
    except OSError as e:
        raise ConfigError(f"cannot read the waiver file {p}: {e.strerror or e}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise ConfigError(f"{p}: not valid TOML: {e}") from None
    unknown = sorted(set(raw) - {"waivers"})
    if unknown:
        raise ConfigError(f"{p}: unknown key {unknown[0]!r}; a waiver file holds [[waivers]] tables")
    entries = raw.get("waivers", [])
    if not isinstance(entries, list):
        raise ConfigError(f"{p}: waivers must be [[waivers]] tables")
    return tuple(_waiver(e, f"{p}: waivers[{i}]", kinds) for i, e in enumerate(entries))


def _waiver(e: Any, where: str, kinds: tuple[str, ...]) -> Waiver:
    if not isinstance(e, dict):
        raise ConfigError(f"{where} must be a table")
    unknown = sorted(set(e) - _WAIVER_KEYS)
    if unknown:
        raise ConfigError(f"{where}: unknown key {unknown[0]!r} (keys: {', '.join(sorted(_WAIVER_KEYS))})")
    for key in ("topic", "kind", "reason"):
        if not isinstance(e.get(key), str) or not e[key].strip():
            raise ConfigError(f"{where}: missing key {key} (a string)")
    if e["kind"] not in kinds:
        raise ConfigError(f"{where}: kind {e['kind']!r} is not a finding kind (kinds: {', '.join(kinds)})")
    for key in ("partition", "first_offset", "last_offset"):
        v = e.get(key)
        if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 0):
            raise ConfigError(f"{where}: {key} must be an integer of at least 0")
    if ("first_offset" in e) != ("last_offset" in e):
        raise ConfigError(f"{where}: give first_offset and last_offset together (the range it covers)")
    if "first_offset" in e and e["first_offset"] > e["last_offset"]:
        raise ConfigError(f"{where}: first_offset {e['first_offset']} is after last_offset "
                          f"{e['last_offset']}")
    if e.get("reference") is not None and not isinstance(e["reference"], str):
        raise ConfigError(f"{where}: reference must be a string")
    expires, expires_ms = e.get("expires"), None
    if expires is not None:
        try:
            expires_ms = _expiry_ms(expires)
        except ValueError:
            raise ConfigError(f"{where}: expires must be a date (2026-12-31) or a time "
                              "(2026-12-31T12:00:00Z)") from None
        expires = expires.isoformat() if isinstance(expires, date | datetime) else str(expires)
    return Waiver(e["topic"], e["kind"], e["reason"], e.get("partition"), e.get("first_offset"),
                  e.get("last_offset"), e.get("reference"), expires, expires_ms)


def _expiry_ms(value: Any) -> int:
    """When a waiver stops waiving: a date waives through that day (UTC), a time until then (UTC unless it
    says otherwise)."""
    if isinstance(value, str):
        text = value.strip()
        try:
            value = date.fromisoformat(text)
        except ValueError:
            value = datetime.fromisoformat(text[:-1] + "+00:00" if text[-1:] in "Zz" and text else text)
    if isinstance(value, datetime):
        when = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
    elif isinstance(value, date):
        when = datetime.combine(value + timedelta(days=1), time(), UTC)
    else:
        raise ValueError(value)
    return int(when.timestamp() * 1000)


def _int(v: Any) -> int | None:
    return None if v is None else int(v)
