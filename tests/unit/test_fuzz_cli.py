"""A bounded, seeded fuzz of every subcommand's real flags with hostile values (issue 10).

The command tree is introspected from `eosctl.cli.main`, so a new command or flag is fuzzed without
touching this file. Each case must end with exit 0, 1 or 2, no Python traceback, exactly one stderr line
for exit 2 (see ALLOWED_PREAMBLE), and no file created anywhere but under the paths its arguments name.

Nothing here reaches a real broker or starts one: every --bootstrap the fuzzer does not choose is
127.0.0.1:1 (refused), the Kafka clients get short timeouts, and the few things a valid command line would
start for real are replaced by a one-line EosctlError (sandbox broker, reference pipeline, Spark session,
the Textual app). Cases run in-process (CliRunner, fast); a sample of the usage errors is replayed in
subprocesses, where a traceback would really reach the terminal.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections import Counter
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace

import click
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eosctl.base import stopsignals
from eosctl.base.errors import EosctlError
from eosctl.cli import main

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = 1000
UNREACHABLE = "127.0.0.1:1"

# Placeholders, replaced per run by real paths in the case's sandbox directory.
FIFO, DIRECTORY, MISSING, CONFIG, SINK = "<fifo>", "<directory>", "<missing>", "<config>", "<sink>"
HOSTILE = [
    "-1", "-5", "0", "-0.5", "nan", "inf", "-inf", "1e309", "9" * 40, "-" + "9" * 30, "18446744073709551616",
    "", " ", "\t", "x" * 5000, "é𝔘\u202eÅ", "名前", "\U0001f4a5", "%s%n%x", "'; DROP TABLE sink; --",
    "${HOME}", "$(id)", "../../escape", "-", "--", "a,b,,c", "s3://bucket/x/*.parquet",
    "/dev/zero", "/dev/null", "/dev/stdin", "/proc/self/mem", FIFO, DIRECTORY, MISSING, "x" * 300,
    "127.0.0.1:1", "host:99999", "[::1]", "a:b:c", "1s", "15m", "-3h", "0ms", "9" * 20 + "d",
]
# Plausible values, so that some cases get past parsing and into the commands' own checks.
BENIGN = ["1", "3", "t", "g", "p", "0.5", "json", CONFIG, SINK, UNREACHABLE]
# Commands whose refusal may print more than the error line, and why.
ALLOWED_PREAMBLE = {
    # On a cluster that is not the sandbox it lists what the run would delete before refusing without --yes.
    ("sandbox", "pipeline"): "lists the topics and groups it would reset before asking for --yes",
}


def leaf_commands(group: click.Group = main, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...],
                                                                                     click.Command]]:
    out = []
    for name, command in sorted(group.commands.items()):
        if isinstance(command, click.Group):
            out += leaf_commands(command, (*path, name))
        else:
            out.append(((*path, name), command))
    return out


LEAVES = leaf_commands()


def options_of(command: click.Command) -> list[click.Option]:
    return [p for p in command.params if isinstance(p, click.Option) and p.name != "help"]


def value_strategy(option: click.Option) -> st.SearchStrategy[str]:
    hostile = st.sampled_from(HOSTILE)
    if isinstance(option.type, click.Choice):
        return st.one_of(hostile, st.sampled_from([str(c) for c in option.type.choices]))
    return st.one_of(hostile, st.sampled_from(BENIGN),
                     st.text(min_size=0, max_size=30).filter(lambda s: "\0" not in s))


@st.composite
def cases(draw: st.DrawFn) -> tuple[tuple[str, ...], list[str]]:
    path, command = draw(st.sampled_from(LEAVES))
    options = options_of(command)
    chosen = draw(st.lists(st.sampled_from(options), max_size=4, unique_by=lambda o: o.name)) \
        if options else []
    args: list[str] = []
    for option in chosen:
        flag = max(option.opts, key=len)
        if option.is_flag:
            args.append(flag)
        else:
            args += [flag, draw(value_strategy(option))]
    names = {o.name for o in chosen}
    if any(o.name == "bootstrap" for o in options) and "bootstrap" not in names:
        args += ["--bootstrap", UNREACHABLE]
    return path, args


@pytest.fixture(scope="module")
def tamed(tmp_path_factory: pytest.TempPathFactory):
    """What a valid command line would start for real is replaced by one EosctlError line; timeouts short."""
    from auditors import engine, local, spark
    from eosctl.cluster import clients, wire
    from eosctl.sandbox import kafka_sandbox, noida, pipeline
    from tui import app

    mp = pytest.MonkeyPatch()

    def refuse(what: str):
        def fail(*args, **kwargs):
            raise EosctlError(f"fuzz: {what} is not started in this test")
        return fail

    mp.setattr(noida, "up", refuse("the sandbox broker"))
    mp.setattr(kafka_sandbox, "up", refuse("the sandbox broker"))
    mp.setattr(pipeline, "run_pipeline", refuse("the reference pipeline"))
    mp.setattr(spark, "session", refuse("Spark"))
    mp.setattr(engine, "_start_spark", refuse("Spark"))
    mp.setattr(local, "run_local", refuse("the local audit engine"))
    mp.setattr(app.EosApp, "run", lambda self, *a, **kw: None)
    # The watchers run until stopped, and an unreachable cluster is an outage they serve through: each one
    # here ends after its first refresh, as a clean exit, where it would wait for the next.
    from eosctl.commands import exporter_cmd, lag_cmd

    def end_here(*args, **kwargs):
        raise SystemExit(0)

    class FirstRefreshOnly(stopsignals.StopEvent):
        wait = end_here

    @contextmanager
    def stop_after_first_refresh():
        yield FirstRefreshOnly()

    mp.setattr(exporter_cmd, "stop_event", stop_after_first_refresh)
    mp.setattr(lag_cmd, "time", SimpleNamespace(monotonic=time.monotonic, sleep=end_here))
    init = wire.WireClient.__init__
    mp.setattr(wire.WireClient, "__init__", lambda self, target, *, timeout_ms=10_000, **kw: init(
        self, target, timeout_ms=min(timeout_ms, 400), **kw))
    for name in ("confluent_admin", "kafka_admin"):
        real = getattr(clients, name)
        mp.setattr(clients, name, lambda cluster, timeout=5.0, _real=real: _real(cluster, min(timeout, 0.4)))
    yield
    mp.undo()


def tree(root: Path) -> set[Path]:
    return {p for p in root.rglob("*")}


def resolve_placeholders(args: list[str], root: Path) -> list[str]:
    table = {FIFO: str(root / "pipe"), DIRECTORY: str(root / "adir"), MISSING: str(root / "missing" / "f"),
             CONFIG: str(root / "eosctl.toml"), SINK: str(root / "sink.duckdb")}
    return [table.get(a, a) for a in args]


def named_by(args: list[str], cwd: Path) -> list[Path]:
    """Every argument read as a path (relative to the case's cwd): where a command may create files."""
    out = []
    for a in args:
        if a and not a.startswith("-") and "\0" not in a and len(a) < 4096:
            p = Path(a) if os.path.isabs(a) else cwd / a
            out.append(Path(os.path.normpath(p)))
    return out


def check(result, path: tuple[str, ...], args: list[str]) -> None:
    where = f"eosctl {' '.join(path)} {args!r}"
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise AssertionError(f"{where}: unhandled {type(result.exception).__name__}: {result.exception}") \
            from result.exception
    assert result.exit_code in (0, 1, 2), f"{where}: exit {result.exit_code}\n{result.output}"
    assert "Traceback" not in result.stderr, f"{where}:\n{result.stderr}"
    if result.exit_code == 2:
        lines = result.stderr.splitlines()
        assert lines and lines[-1].startswith("eosctl: error: "), f"{where}:\n{result.stderr}"
        if path not in ALLOWED_PREAMBLE:
            assert len(lines) == 1, f"{where}: {len(lines)} stderr lines:\n{result.stderr}"


COUNTS: Counter = Counter()
USAGE_SAMPLES: list[tuple[tuple[str, ...], list[str], str]] = []


@pytest.mark.timeout(600)
def test_hostile_flags_never_crash(tamed, tmp_path_factory):
    root = tmp_path_factory.mktemp("fuzz")
    cwd = root / "a" / "b" / "c"  # ../../escape still lands inside root, where the tree check sees it
    cwd.mkdir(parents=True)
    os.mkfifo(root / "pipe")
    (root / "adir").mkdir()
    import duckdb

    with duckdb.connect(str(root / "sink.duckdb")) as con:
        con.execute("CREATE TABLE sink (src_topic VARCHAR, src_partition INT, src_offset BIGINT)")
        con.execute("INSERT INTO sink VALUES ('t', 0, 0), ('t', 0, 1)")
    (root / "eosctl.toml").write_text(
        f'[clusters.c]\nbootstrap_servers = "{UNREACHABLE}"\n\n[pipelines.p]\nsource_topics = ["t"]\n'
        f'group = "g"\n\n[pipelines.p.sink]\nduckdb = "{root / "sink.duckdb"}"\n')
    home = cwd / ".eosctl"

    @settings(max_examples=EXAMPLES, derandomize=True, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(cases())
    def one(case: tuple[tuple[str, ...], list[str]]) -> None:
        path, raw = case
        args = resolve_placeholders(raw, root)
        before = tree(root)
        old = os.getcwd()
        os.chdir(cwd)
        try:
            result = CliRunner().invoke(main, [*path, *args], env={"EOSCTL_HOME": str(home),
                                                                    "EOSCTL_CONFIG": None})
        finally:
            os.chdir(old)
        check(result, path, args)
        allowed = named_by(args, cwd)
        created = tree(root) - before
        stray = [p for p in created if not any(p == a or a in p.parents for a in allowed)]
        assert not stray, f"eosctl {' '.join(path)} {args!r} created {sorted(map(str, stray))}"
        for p in sorted(created, reverse=True):  # the next case starts from the same tree
            p.unlink() if p.is_file() or p.is_symlink() else p.rmdir()
        COUNTS[result.exit_code] += 1
        COUNTS["cases"] += 1
        COUNTS[path] += 1
        if result.exit_code == 2:
            COUNTS["usage" if "(see `main " in result.stderr else "refused by the command"] += 1
        if (result.exit_code == 2 and "(see `main " in result.stderr and len(USAGE_SAMPLES) < 12
                and all("\0" not in a and len(a) < 1000 for a in args)):
            USAGE_SAMPLES.append((path, args, result.stderr))

    one()
    print(f"\nfuzz: {COUNTS['cases']} cases over {len(LEAVES)} commands; exit 0: {COUNTS[0]}, "
          f"exit 1: {COUNTS[1]}, exit 2: {COUNTS[2]} ({COUNTS['usage']} usage errors, "
          f"{COUNTS['refused by the command']} refused by the command)")
    assert COUNTS["cases"] >= EXAMPLES // 2
    assert [path for path, _ in LEAVES if not COUNTS[path]] == []  # every command, new ones included
    # A fuzzer that never reaches a command body (every case a usage error) would prove little.
    assert COUNTS[0] + COUNTS[1] > 0

    # The same usage errors in a real process: one line, no traceback, same exit code.
    assert USAGE_SAMPLES
    for path, args, in_process in USAGE_SAMPLES:
        proc = subprocess.run([sys.executable, "-m", "eosctl", *path, *args], capture_output=True, text=True,
                              timeout=60, cwd=cwd, env={**os.environ, "PYTHONPATH": str(REPO),
                                                        "EOSCTL_HOME": str(home)})
        assert proc.returncode == 2, (path, args, proc.stderr)
        assert "Traceback" not in proc.stderr
        assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("eosctl: error: `python -m eosctl "), \
            proc.stderr
        assert proc.stderr == in_process.replace("`main", "`python -m eosctl")
