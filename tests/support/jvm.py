"""Java snippets for tests that need Kafka's Java client or a JVM framework (transactions v2, Kafka Streams,
Flink, Connect): compiled by the test against a pom's jars (``eosctl.sandbox.maven``), run as a process the
test owns and stops (its JVM dies with the test process too).

    jar_dir = maven.jars("kafka")
    classes = compile_java(tmp_path, "TxnProducer", SOURCE, jar_dir)
    proc = start_java(classes, "TxnProducer", jar_dir, ["127.0.0.1:9092", "topic"], log=tmp_path / "p.log")
"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

from eosctl.base import procs
from eosctl.sandbox import maven


def compile_java(workdir: Path, main: str, source: str, *jar_dirs: Path) -> Path:
    """Compile one public class ``main`` from ``source``; the directory of its classes."""
    src = workdir / "src" / f"{main}.java"
    out = workdir / "classes"
    src.parent.mkdir(parents=True, exist_ok=True)
    out.mkdir(parents=True, exist_ok=True)
    src.write_text(source)
    cp = os.pathsep.join(maven.classpath(d) for d in jar_dirs)
    done = subprocess.run(["javac", "-nowarn", "-cp", cp, "-d", str(out), str(src)], capture_output=True,
                          text=True, timeout=180)
    if done.returncode != 0:
        raise AssertionError(f"javac {src} failed:\n{done.stderr[-3000:]}")
    return out


# For a process a test starts itself: its own session, and SIGKILLed if the test process dies first.
die_with_test = procs.die_with_parent

# The tests' JVMs run seconds on small data: C1 alone (C2's compiles are CPU never repaid) and the serial
# collector. tests/conftest.py hands the same to Spark's launcher.
SMALL_JVM = ["-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"]


def java_cmd(classes: Path | None, main: str, *jar_dirs: Path, heap: str = "384m",
             props: dict[str, str] | None = None) -> list[str]:
    cp = os.pathsep.join(([str(classes)] if classes else []) + [maven.classpath(d) for d in jar_dirs])
    quiet = Path(__file__).parent / "jvm-log4j2.properties"
    return [maven.java(), f"-Xmx{heap}", *SMALL_JVM, "-XX:-UsePerfData",
            f"-Dlog4j2.configurationFile=file:{quiet}",
            *(f"-D{k}={v}" for k, v in (props or {}).items()), "-cp", cp, main]


def start_java(classes: Path | None, main: str, jar_dirs: list[Path], args: list[str], log: Path,
               heap: str = "384m", props: dict[str, str] | None = None) -> subprocess.Popen:
    """Start ``main`` (from ``classes`` or the jars) with its output in ``log``; the caller stops it (SIGKILL
    for a crash, SIGSTOP/SIGCONT to freeze it); it also dies with the test process."""
    with open(log, "ab") as out:
        return subprocess.Popen([*java_cmd(classes, main, *jar_dirs, heap=heap, props=props), *args],
                                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                preexec_fn=die_with_test)


def run_java(classes: Path | None, main: str, jar_dirs: list[Path], args: list[str], timeout: float = 120.0,
             heap: str = "384m") -> subprocess.CompletedProcess:
    return subprocess.run([*java_cmd(classes, main, *jar_dirs, heap=heap), *args], capture_output=True,
                          text=True, timeout=timeout, stdin=subprocess.DEVNULL, preexec_fn=die_with_test)


def stop(proc: subprocess.Popen, sig: int = signal.SIGTERM, timeout: float = 20.0) -> None:
    """Stop a started JVM (SIGCONT first, in case the test froze it), SIGKILL after ``timeout``."""
    if proc.poll() is not None:
        return
    try:
        os.kill(proc.pid, signal.SIGCONT)
        proc.send_signal(sig)
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)
    except ProcessLookupError:
        pass
