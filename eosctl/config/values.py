"""What is wrong with one setting, in a few words (None when it is usable): bootstrap servers, a Spark master
URL, a JVM memory size, a Kafka stage's lineage. The config file (eosctl.config.file) and the command-line
options (eosctl.config.target, the audit's engine) check their values with the same functions."""

from __future__ import annotations

import re

LINEAGE_MODES = ("headers", "value:PATH", "key", "value", "replica")


def check_lineage(value: str) -> str | None:
    """What is wrong with a kafka_topic sink's `lineage` (eosctl.sink.kafka_topic); None if it is usable."""
    if value in ("headers", "key", "value", "replica"):
        return None
    if value.startswith("value:") and all(value.removeprefix("value:").split(".")):
        return None
    return f"expected one of {', '.join(LINEAGE_MODES)} (e.g. value:source)"



_DURATION = re.compile(r"\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*", re.ASCII)
_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}


def duration_seconds(text: str) -> float | None:
    """Seconds of a duration such as 90s, 15m, 2h, 7d (a bare number: seconds); None if it is none."""
    m = _DURATION.fullmatch(text)
    return None if m is None else float(m.group(1)) * _UNITS[m.group(2) or "s"]


_MASTER = re.compile(r"local|local\[(\*|[1-9][0-9]*)(,[1-9][0-9]*)?\]|local-cluster\[[1-9][0-9]*,[1-9][0-9]*,"
                     r"[1-9][0-9]*\]|yarn|(spark|k8s|mesos)://\S+", re.ASCII)
# Spark's JavaUtils.byteStringAs: a number and an optional unit (b, k, kb, m, mb, g, gb, t, tb, p, pb).
_MEMORY = re.compile(r"[1-9][0-9]*([kmgtp]b?|b)?", re.ASCII | re.IGNORECASE)


def spark_master_problem(master: str) -> str | None:
    """What is wrong with a Spark master URL, in a few words; None if Spark would take it."""
    if _MASTER.fullmatch(master):
        return None
    return "expected local[N] (N at least 1), local[*], spark://HOST:PORT, yarn or k8s://URL"


def memory_problem(size: str) -> str | None:
    """What is wrong with a JVM memory size such as 2g, in a few words; None if Spark would take it."""
    if _MEMORY.fullmatch(size):
        return None
    return "expected a size such as 512m or 2g"


BOOTSTRAP_FORM = "expected HOST:PORT[,HOST:PORT...], e.g. localhost:9092"


def bootstrap_problem(value: str) -> str | None:
    """What is wrong with a bootstrap servers string, in a few words; None if every entry is HOST:PORT.

    Checked up front because kafka-python raises a bare ValueError deep inside its client for these.
    """
    entries = [e.strip() for e in value.split(",")]
    for entry in entries:
        which = f"entry {entry!r}: " if len(entries) > 1 else ""
        if not entry:
            return "an empty entry" if len(entries) > 1 else "empty"
        host, sep, port = entry.rpartition(":")
        if host.startswith("[") and host.endswith("]"):
            host = host[1:-1]  # IPv6 literal: [::1]:9092
        elif ":" in host:
            return f"{which}more than one ':' (write an IPv6 address as [ADDRESS]:PORT)"
        if not sep or not port:
            return f"{which}no port"
        if not host:
            return f"{which}no host"
        if not (port.isascii() and port.isdigit()):
            return f"{which}port {port!r} is not a number"
        if not 0 < int(port) < 65536:
            return f"{which}port {port} is out of range (1-65535)"
    return None


def normalize_bootstrap(value: str) -> str:
    """The entries without surrounding spaces (kafka-python does not strip them)."""
    return ",".join(e.strip() for e in value.split(","))
