"""Checks on the paths a user hands eosctl, made before anything opens them.

Opening is where the danger is: ``-c /dev/zero`` reads forever, a FIFO blocks ``open()`` until a writer
comes, and a name over the OS limit raises OSError. A ``stat`` does none of that, so every file option
and every file eosctl reads whole goes through here first.
"""

from __future__ import annotations

import errno
import os
import stat

from eosctl.safetext import term

MB = 1024 * 1024
# Read whole into memory: a config is a few KB; anything near this is not a config.
CONFIG_MAX_BYTES = 4 * MB
# `eosctl audit --format json` reports: a finding is ~200 bytes, so this is over a million findings.
REPORT_MAX_BYTES = 256 * MB

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a named pipe (FIFO)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def shown(path: str, limit: int = 80) -> str:
    """The path for a message: an over-long one is cut in the middle so the message stays one line."""
    path = term(path)  # a control character must not break or spoof the message's line
    if len(path) <= limit:
        return path
    return f"{path[:limit // 2]}...{path[-(limit // 2):]} ({len(path)} characters)"


def kind_of(mode: int) -> str:
    for test, name in _KINDS:
        if test(mode):
            return name
    return "not a regular file"


def _stat(path: str) -> os.stat_result | None:
    """os.stat, None if nothing is there; any other failure is a ValueError with the reason."""
    if not path:
        raise ValueError("the path is empty")
    if "\0" in path:
        raise ValueError(f"{shown(path)}: a path cannot contain a NUL character")
    try:
        return os.stat(path)
    except FileNotFoundError:
        return None
    except OSError as e:
        if e.errno == errno.ENAMETOOLONG:
            raise ValueError(f"{shown(path)}: file name too long for the file system") from None
        raise ValueError(f"{shown(path)}: {e.strerror or type(e).__name__}") from None


def input_problem(path: str, max_bytes: int | None, must_exist: bool = True) -> str | None:
    """What is wrong with reading ``path`` as an input file, in one line; None if it is a sane regular file.

    max_bytes None: no size limit (DuckDB and Parquet files, which are read a page at a time).
    """
    try:
        st = _stat(path)
    except ValueError as e:
        return str(e)
    if st is None:
        return f"{shown(path)}: no such file" if must_exist else None
    if not stat.S_ISREG(st.st_mode):
        return f"{shown(path)} is {kind_of(st.st_mode)}, not a regular file"
    if max_bytes is not None and st.st_size > max_bytes:
        return (f"{shown(path)} is {st.st_size / MB:.0f} MB, more than the {max_bytes // MB} MB such a "
                "file can be")
    return None


def output_problem(path: str, special_ok: bool = False) -> str | None:
    """What is wrong with writing ``path`` (to be created or replaced), in one line; None if nothing.

    special_ok: a device such as /dev/null or /dev/stdout is fine (text written like a shell redirection).
    """
    try:
        st = _stat(path)
        parent = os.path.dirname(path)
        if parent:
            _stat(parent)  # an over-long directory name fails here rather than at the end of the work
    except ValueError as e:
        return str(e)
    if st is None or stat.S_ISREG(st.st_mode):
        return None
    if special_ok and (stat.S_ISCHR(st.st_mode) or stat.S_ISFIFO(st.st_mode)):
        return None
    return f"{shown(path)} is {kind_of(st.st_mode)}, not a regular file"


def directory_problem(path: str) -> str | None:
    """What is wrong with using ``path`` as a work directory (created if missing); None if nothing."""
    try:
        st = _stat(path)
    except ValueError as e:
        return str(e)
    if st is None or stat.S_ISDIR(st.st_mode):
        return None
    return f"{shown(path)} is {kind_of(st.st_mode)}, not a directory"


def glob_problem(pattern: str) -> str | None:
    """What is wrong with reading every local file a path or glob matches (a FIFO would block DuckDB's
    open, a device would be read forever); None if each match is a regular file, or if it is a URL."""
    # Here, not at the top: `eosctl --help` imports this module and needs neither.
    import glob
    import re

    if re.match(r"^[a-z0-9]+://", pattern):
        return None
    if not glob.has_magic(pattern):
        return input_problem(pattern, None, must_exist=False)
    matches = glob.glob(pattern, recursive=True)
    for match in matches:
        problem = input_problem(match, None)
        if problem:
            return problem
    return None
