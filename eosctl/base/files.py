"""Checks on the paths a user hands eosctl, made before anything opens them.

Opening is where the danger is: ``-c /dev/zero`` reads forever, a FIFO blocks ``open()`` until a writer
comes, and a name over the OS limit raises OSError. A ``stat`` does none of that, so every file option
and every file eosctl reads whole goes through here first.
"""

from __future__ import annotations

import errno
import glob
import os
import re
import stat
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from eosctl.base.errors import EosctlError
from eosctl.base.safetext import term
from eosctl.base.stopsignals import held, refuse_if_stopped

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
    if re.match(r"^[a-z0-9]+://", pattern):
        return None
    if not glob.has_magic(pattern):
        return input_problem(pattern, None, must_exist=False)
    for match in glob_paths(pattern):
        problem = input_problem(match, None)
        if problem:
            return problem
    return None


def glob_split(pattern: str) -> tuple[str, str, str]:
    """A glob as (head, base, rest): its leading directories without wildcards as written ("" if none),
    the directory to search from (head, or "." or "/"), and the part with the wildcards."""
    parts = pattern.split(os.sep)
    fixed = 0
    while fixed < len(parts) - 1 and not glob.has_magic(parts[fixed]):
        fixed += 1
    head = os.sep.join(parts[:fixed])
    base = head or (os.sep if pattern.startswith(os.sep) else ".")
    return head, base, os.sep.join(parts[fixed:])


def glob_paths(pattern: str) -> list[str]:
    """The local paths a glob matches, sorted, as DuckDB's own glob finds them: ``**`` never descends into
    a symbolically linked directory. (Python's glob.glob(recursive=True) does, so a link loop such as
    ``d/up -> ..`` is walked until memory runs out.)"""
    if not glob.has_magic(pattern):
        return [pattern] if os.path.lexists(pattern) else []
    head, base, rest = glob_split(pattern)
    # pathlib: `**` does not follow symlinks to directories. Paths keep the pattern's own head ("./").
    return sorted(os.path.join(head, str(p.relative_to(base))) if head else str(p)
                  for p in Path(base).glob(rest))


def same_file(a: str, b: str) -> bool:
    """Whether two paths name one file (the same inode: a hard link, a symlink, ``./x`` and ``x`` alike)."""
    try:
        sa, sb = os.stat(a), os.stat(b)
    except (OSError, ValueError):
        return False
    return (sa.st_dev, sa.st_ino) == (sb.st_dev, sb.st_ino)


def output_refusal(path: str, reads: Iterable[str | None] = (), force: bool = False,
                   option: str = "--out", ours: Callable[[str], bool] | None = None) -> str | None:
    """Why eosctl must not write ``path``, in one line; None if it may.

    The one rule for every output (`audit --out`, `report --out`, `snapshot --out`, `exporter --textfile`,
    the files `sandbox pipeline` writes): an output never replaces a file the command reads (``reads``:
    its config, sink, report or snapshot; compared by inode, so a link or another spelling is caught too),
    whatever --force says; and it replaces an existing file only with ``force``, or when ``ours`` says
    the command itself wrote it (the textfile a cron job rewrites every minute). A device or FIFO
    (``/dev/stdout``, ``/dev/null``) is written like a shell redirection and replaces nothing."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None  # nothing there (or a name output_problem already refused): nothing to replace
    for read in reads:
        if read and same_file(path, read):
            what = "" if read == path else f" ({shown(read)})"
            return (f"{option} {shown(path)} is a file this command reads{what}; an output never replaces "
                    f"an input: pick another {option}")
    if not stat.S_ISREG(st.st_mode):
        return None
    if not force and not (ours is not None and ours(path)):
        return f"{option} {shown(path)} already exists; pass --force to replace it or pick another {option}"
    return None


def check_output(path: str | None, reads: Iterable[str | None] = (), force: bool = False,
                 option: str = "--out", ours: Callable[[str], bool] | None = None) -> None:
    """`output_refusal` as the CLI's one-line error (exit 2); nothing to check without a path."""
    if path is None:
        return
    problem = output_refusal(path, reads, force, option, ours)
    if problem:
        raise EosctlError(problem)


@contextmanager
def writing_output(path: str, reads: Iterable[str | None] = (), force: bool = False, option: str = "--out",
                   also: tuple[str, ...] = (), ours: Callable[[str], bool] | None = None) -> Iterator[str]:
    """`check_output` again (a file may have appeared, or become an input, while the command worked), then
    `replacing`: a temporary name beside ``path`` that replaces it only when the block ends normally."""
    check_output(path, reads, force, option, ours)
    with replacing(path, also) as tmp:
        yield tmp


@contextmanager
def replacing(path: str, also: tuple[str, ...] = ()) -> Iterator[str]:
    """A temporary name beside ``path`` to write to; it replaces ``path`` when the block ends normally.

    On any other way out (an error, Ctrl-C, SIGTERM, or one that came earlier and was swallowed) the
    temporary file, and the files named by it plus each suffix of ``also`` (DuckDB's ``.wal``), are removed:
    a reader never sees half a report and nothing is left beside it. A device or FIFO (``--out
    /dev/stdout``) is written directly."""
    try:
        st = os.stat(path)
    except OSError:
        st = None
    if st is not None and not stat.S_ISREG(st.st_mode):
        yield path
        return
    head, name = os.path.split(path)
    tmp = os.path.join(head, f".{name}.{os.getpid()}.tmp")
    leftovers = [tmp, *(tmp + suffix for suffix in also)]
    for leftover in leftovers:
        _remove(leftover)
    try:
        yield tmp
        refuse_if_stopped()  # a stop signal whose exception a library swallowed: no output after it
        os.replace(tmp, path)
    finally:
        for leftover in leftovers:
            _remove(leftover)


def write_replacing(path: str, text: str) -> None:
    """Write ``text`` to ``path`` through `replacing` (UTF-8)."""
    with replacing(path) as tmp, open(tmp, "w", encoding="utf-8") as f:
        f.write(text)


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:  # gone already, or not ours to remove: nothing to clean
        pass


# The temp_dir blocks still open in this process (any thread). A process that ends with os._exit (the TUI
# once its grace is over) runs no `finally`: it removes these first (remove_open_temp_dirs), since the thread
# inside the block (an audit reading its frozen sink copy) never gets to.
_OPEN: set[str] = set()


def remove_open_temp_dirs() -> None:
    """Remove every temp_dir whose block has not ended: for a process about to end without unwinding."""
    import shutil  # lazy: see docs/imports.md

    for path in list(_OPEN):
        shutil.rmtree(path, ignore_errors=True)
        _OPEN.discard(path)


@contextmanager
def temp_dir(prefix: str) -> Iterator[str]:
    """A new temporary directory, removed on every way out of the block.

    Ctrl-C and SIGTERM are held while it is made: one arriving between the mkdir and the block's `try`
    would otherwise leave the directory behind (a test that signals as soon as it appears caught that).
    A held signal is delivered when the block starts, inside it."""
    # lazy: see docs/imports.md
    import shutil
    import tempfile


    with held() as release:
        path = tempfile.mkdtemp(prefix=prefix)
        _OPEN.add(path)
        try:
            release()
            yield path
        finally:
            shutil.rmtree(path, ignore_errors=True)
            _OPEN.discard(path)
