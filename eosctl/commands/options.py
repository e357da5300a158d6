"""Options and small formatters shared by the inspection commands."""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import click

from eosctl.base.errors import ConfigError
from eosctl.base.files import (
    CONFIG_MAX_BYTES,
    REPORT_MAX_BYTES,
    directory_problem,
    glob_problem,
    input_problem,
    output_problem,
)
from eosctl.output import INSPECT_FORMATS
from eosctl.output.terminal import set_plain

# Short, so an unreachable broker is one line within a few seconds, not a hang.
TIMEOUT_MS = 3000


class Duration(click.ParamType):
    """Seconds, or a number with a unit: 500ms, 90s, 15m, 2h, 1d."""

    name = "duration"
    _UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}

    def convert(self, value: Any, param: Any, ctx: Any) -> float:
        if isinstance(value, int | float):
            return float(value)
        m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*", str(value), re.ASCII)
        if not m:
            self.fail(f"{value!r} is not a duration (examples: 30, 90s, 15m, 2h, 1d)", param, ctx)
        return float(m.group(1)) * self._UNITS[m.group(2) or "s"]


DURATION = Duration()


class Seconds(click.FloatRange):
    """A number of seconds from ``min`` to a day: `inf` and `nan` are numbers to float(), not waits (a
    sleep of `inf` raised OverflowError)."""

    name = "seconds"

    def __init__(self, min: float) -> None:  # noqa: A002 (click's name)
        super().__init__(min=min, max=86_400.0)

    def convert(self, value: Any, param: Any, ctx: Any) -> Any:
        rv = super().convert(value, param, ctx)
        if rv != rv:  # NaN passes every comparison of FloatRange
            self.fail(f"{value!r} is not a number of seconds", param, ctx)
        return rv


class InputFile(click.ParamType):
    """A file eosctl reads: an existing regular file of sane size (refuses /dev/zero, FIFOs, directories,
    names over the OS limit) before anything opens it. Every file option goes through one of these."""

    name = "file"

    def __init__(self, max_bytes: int | None, must_exist: bool = True, hint: str = ""):
        self.max_bytes, self.must_exist, self.hint = max_bytes, must_exist, hint

    def convert(self, value: Any, param: Any, ctx: Any) -> str:
        path = os.fspath(value)
        problem = input_problem(path, self.max_bytes, self.must_exist)
        if problem:
            self.fail(f"{problem}{'; ' + self.hint if self.hint else ''}", param, ctx)
        return path


class OutputFile(click.ParamType):
    """A file eosctl writes: a name the OS accepts, and not a directory or device (unless special_ok)."""

    name = "file"

    def __init__(self, special_ok: bool = False):
        self.special_ok = special_ok

    def convert(self, value: Any, param: Any, ctx: Any) -> str:
        path = os.fspath(value)
        problem = output_problem(path, self.special_ok)
        if problem:
            self.fail(problem, param, ctx)
        return path


class WorkDir(click.ParamType):
    """A directory eosctl creates or writes into: a name the OS accepts, and not an existing file."""

    name = "directory"

    def convert(self, value: Any, param: Any, ctx: Any) -> Any:
        problem = directory_problem(os.fspath(value))
        if problem:
            self.fail(problem, param, ctx)
        return Path(value)


class ParquetPaths(click.ParamType):
    """A Parquet path or glob (or a URL): every local file it matches must be a regular file; or a directory
    (its table as Spark reads it)."""

    name = "text"

    def convert(self, value: Any, param: Any, ctx: Any) -> str:
        from eosctl.sink.spark_files import is_table_dir  # lazy: see docs/imports.md

        problem = None if is_table_dir(str(value)) else glob_problem(str(value))
        if problem:
            self.fail(problem, param, ctx)
        return str(value)


def config_file() -> InputFile:
    return InputFile(CONFIG_MAX_BYTES, hint="pass an eosctl TOML config file")


def duckdb_file() -> InputFile:
    """A DuckDB file (a sink, a snapshot): no size limit, DuckDB reads it a page at a time."""
    return InputFile(None, must_exist=False)


def report_file() -> InputFile:
    return InputFile(REPORT_MAX_BYTES, hint="write one with `eosctl audit --format json --out FILE`")


def target_options(f: Callable | None = None, *, formats: tuple[str, ...] = INSPECT_FORMATS,
                   format_help: str = "Rich tables, or stable JSON (see the module docs / README).",
                   timeout: str = "30s") -> Any:
    """--config/--pipeline/--bootstrap/--format, shared by every inspection command.

    Use bare (``@target_options``) or with other --format choices (``@target_options(formats=...)``).
    """

    def decorate(f: Callable) -> Callable:
        for option in reversed((
            click.option("--config", "-c", envvar="EOSCTL_CONFIG", type=config_file(),
                         help="eosctl config file (env EOSCTL_CONFIG)."),
            click.option("--pipeline", "-p", help="Pipeline in the config (its cluster, topics and group)."),
            click.option("--bootstrap", help="HOST:PORT of the cluster (overrides the config)."),
            click.option("--format", "fmt", type=click.Choice(formats), default=formats[0], show_default=True,
                         help=format_help, callback=_plain_tables),
            timeout_option(default=timeout),
        )):
            f = option(f)
        return f

    return decorate(f) if f is not None else decorate


def timeout_option(watcher: bool = False, default: str = "30s") -> Callable:
    """--timeout: how long a command (a watcher: each refresh) may wait for Kafka in all. Reads that meet a
    dropped connection or a timeout are retried within it (eosctl.cluster.deadline); when it passes, one
    line says how long the command waited."""
    what = "each refresh" if watcher else "the command"
    return click.option("--timeout", type=DURATION, default=default, show_default=True, expose_value=False,
                        callback=_configure_deadline if watcher else _start_deadline, metavar="DURATION",
                        help=f"How long {what} may wait for Kafka, retries of dropped connections and "
                             "timeouts included (a slow link may need more).")


def _start_deadline(ctx: click.Context, param: click.Parameter, value: float) -> float:
    from eosctl.cluster import deadline  # lazy: see docs/imports.md

    if value <= 0:
        raise click.BadParameter("must be more than 0 (e.g. 30s, 2m)", ctx, param)
    deadline.start(value)
    deadline.defaulted(_defaulted(ctx, param))
    ctx.call_on_close(deadline.finish)
    return value


def _defaulted(ctx: click.Context, param: click.Parameter) -> bool:
    """Whether --timeout was left at its default (a cluster's configured timeout then applies)."""
    return param.name is not None and ctx.get_parameter_source(param.name) in (
        click.core.ParameterSource.DEFAULT, click.core.ParameterSource.DEFAULT_MAP, None)


def _configure_deadline(ctx: click.Context, param: click.Parameter, value: float) -> float:
    """A watcher's --timeout: each refresh renews it (eosctl.inspection.live), no clock starts here."""
    from eosctl.cluster import deadline  # lazy: see docs/imports.md

    if value <= 0:
        raise click.BadParameter("must be more than 0 (e.g. 30s, 2m)", ctx, param)
    deadline.configure(value)
    deadline.defaulted(_defaulted(ctx, param))
    ctx.call_on_close(deadline.finish)
    return value


def _plain_tables(ctx: click.Context, param: click.Parameter, value: str) -> str:
    """`--format plain` is the table format printed as tab-separated lines: the commands print "table"."""
    set_plain(value == "plain")
    return "table" if value == "plain" else value


def sink_options(f: Callable) -> Callable:
    """--topic/--group and the sink overrides, for commands that read a sink next to Kafka."""
    for option in reversed((
        click.option("--topic", "-t", "topics", multiple=True,
                     help="Source topic (default: the pipeline's)."),
        click.option("--group", "-g", help="Consumer group (default: the pipeline's)."),
        click.option("--sink-duckdb", type=duckdb_file(),
                     help="DuckDB sink file (overrides [pipelines.X.sink].duckdb)."),
        click.option("--sink-parquet", type=ParquetPaths(),
                     help="Parquet sink path or glob (overrides the config)."),
        click.option("--sink-table", help="Sink table (overrides [pipelines.X.sink].table)."),
    )):
        f = option(f)
    return f


def check_one_sink(sink_duckdb: str | None, sink_parquet: str | None) -> None:
    """--sink-duckdb and --sink-parquet name two different sinks: refuse the pair (before any work)."""
    if sink_duckdb and sink_parquet:
        raise click.UsageError("pass either --sink-duckdb or --sink-parquet, not both")


def sink_of(target: Any, sink_duckdb: str | None, sink_parquet: str | None,
            sink_table: str | None) -> tuple[Any, str]:
    """The pipeline's sink with the command line's overrides, and where it came from (for messages)."""
    from eosctl.config.model import Sink  # lazy: see docs/imports.md

    pipe = target.pipeline
    sink = pipe.sink if pipe and pipe.sink else None
    if sink is None and not (sink_duckdb or sink_parquet):
        if pipe and pipe.hops:  # each hop has its sink: say which to choose, as a command that works
            choices = " or ".join(f"-p {shlex.quote(h)}" for h in pipe.hops)
            raise ConfigError(f"pipeline {pipe.name} is audited hop by hop and has no sink of its own: "
                              f"choose a hop, {choices}")
        where = f"[pipelines.{pipe.name}.sink]" if pipe else "--config FILE --pipeline NAME"
        raise ConfigError(f"no sink to read: set {where} (duckdb or parquet) or pass --sink-duckdb / "
                          "--sink-parquet")
    sink = sink or Sink(table="sink")
    if sink_duckdb or sink_parquet:
        sink = replace(sink, duckdb=sink_duckdb, parquet=sink_parquet)
    if sink_table:
        sink = replace(sink, table=sink_table)
    where = f"pipelines.{pipe.name}.sink" if pipe else "sink"
    return sink, where
