"""The exporter's --once reading: written beside the --textfile and renamed there (node_exporter's textfile
collector never reads half a file); it replaces an earlier reading of eosctl's, any other file only with
--force."""

from __future__ import annotations

from typing import TYPE_CHECKING

from eosctl.base.errors import EosctlError
from eosctl.base.files import check_output, shown, writing_output
from eosctl.sink.base import local_files

if TYPE_CHECKING:
    from eosctl.config.target import Target


def reads(config: str | None, targets: list[Target]) -> tuple[str, ...]:
    """Every local file the exporter reads: the config and each pipeline's sink."""
    sinks = [t.pipeline.sink for t in targets if t.pipeline is not None]
    return (*([config] if config else []), *(f for s in sinks for f in local_files(s)))


def earlier_reading(path: str) -> bool:
    """Whether ``path`` holds an exposition eosctl wrote (its first line a HELP or TYPE of an eosctl_
    metric): the reading a cron job replaces every run, which needs no --force."""
    try:
        with open(path, "rb") as f:
            first = f.readline(200)
    except OSError:
        return False
    return first.startswith((b"# HELP eosctl_", b"# TYPE eosctl_"))


def check_textfile(path: str, reads: tuple[str, ...], force: bool) -> None:
    check_output(path, reads, force, "--textfile", earlier_reading)


def write_textfile(path: str, body: bytes, reads: tuple[str, ...] = (), force: bool = False) -> None:
    """Write ``body`` beside ``path`` and rename it there: node_exporter never reads half a file. A full
    disk is one line (the temporary file is removed, the earlier reading stays)."""
    try:
        with writing_output(path, reads, force, "--textfile", ours=earlier_reading) as tmp, \
                open(tmp, "wb") as f:
            f.write(body)
    except OSError as e:
        raise EosctlError(f"cannot write --textfile {shown(path)}: {e.strerror or e}; the earlier reading "
                          "is kept") from None
