"""A SparkSession sized for the machine, not Spark's defaults.

Spark's defaults cost most of an audit's time on a laptop: 200 shuffle partitions for a few MB of
findings, and a driver heap picked after the JVM started (too late to change). Settings that size the JVM
must be in the builder before the first session starts, so this module is the only place that creates one.
"""

from __future__ import annotations

import atexit
import logging
import os
import re
import shutil
import signal
import sys
import tempfile
import threading
import warnings
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from eosctl.base.errors import EosctlError, first_line

# The packages a task imports; shipped as one zip to executors that don't run this machine's Python.
_SHIPPED = ("eosctl", "auditors")
_LOOPBACK = {"127.0.0.1", "localhost", "::1"}

# Spark's own log4j2 defaults print INFO lines and a banner on stderr; the audit's stderr is for progress.
_LOG4J = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
# Same level as the root logger, so PySpark's gateway doesn't announce "Setting default log level".
logger.gateway.name = org.apache.spark.api.python.PythonGatewayServer
logger.gateway.level = error
"""


def _log4j_file(directory: str | None = None) -> str:
    path = Path(directory or tempfile.gettempdir()) / "eosctl-spark-log4j2.properties"
    if not path.exists() or path.read_text() != _LOG4J:
        tmp = path.with_suffix(f".{os.getpid()}")
        tmp.write_text(_LOG4J)
        tmp.replace(path)
    return str(path)


def active_session() -> Any | None:
    """The session this process already runs (a test suite's, a notebook's), if any."""
    from pyspark.sql import SparkSession  # lazy: see docs/imports.md

    return SparkSession.getActiveSession() or SparkSession._instantiatedSession


def session(
    master: str | None = None,
    remote: str | None = None,
    driver_memory: str = "2g",
    shuffle_partitions: int = 4,
    app_name: str = "eosctl-audit",
    extra: dict[str, str] | None = None,
    local_dir: str | None = None,
) -> Any:
    """Reuse the active session, or start one: local[*] by default, ``master`` (spark://, yarn, k8s://),
    or Spark Connect with ``remote`` (sc://host:port).

    ``local_dir``: where the driver JVM and local executors write (java.io.tmpdir, spark.local.dir), so
    that whoever owns that directory can remove everything Spark wrote, even after killing the JVM."""
    from pyspark.sql import SparkSession  # lazy: see docs/imports.md

    # pandas 3 works for the Arrow paths used here; PySpark warns about it on every pandas-backed call.
    warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas")
    # py4j logs every broken connection (a Ctrl-C mid-job, a killed JVM) with a traceback; the audit
    # turns Spark failures into one line of its own.
    logging.getLogger("py4j").setLevel(logging.CRITICAL + 1)
    # ...and a Ctrl-C in the middle of a call with logging.exception() on the root logger.
    if _from_py4j not in logging.getLogger().filters:
        logging.getLogger().addFilter(_from_py4j)
    if remote is None:
        existing = active_session()
        if existing is not None:
            return existing
    here = runs_here(master, remote)
    if here and remote is None:
        # Executors this driver starts on this machine (local mode, a loopback test cluster) run our
        # interpreter, so eosctl and auditors import there exactly as here. A real cluster has its own
        # Python (PYSPARK_PYTHON / spark.pyspark.python in its config): the code is shipped instead.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    try:
        if remote is not None:
            builder = SparkSession.builder.remote(remote)
            # Server-side settings are the server's business; only SQL settings apply per session.
            builder = builder.config("spark.sql.shuffle.partitions", str(shuffle_partitions))
            spark = builder.appName(app_name).getOrCreate()
            if not here:
                spark.addArtifacts(code_zip(), pyfile=True)
            return spark
        java_opts = java_option("log4j2.configurationFile", Path(_log4j_file(local_dir)).as_uri())
        if local_dir:
            java_opts += " " + java_option("java.io.tmpdir", local_dir)
        conf = {
            "spark.master": master or "local[*]",
            "spark.app.name": app_name,
            "spark.driver.memory": driver_memory,
            "spark.sql.shuffle.partitions": str(shuffle_partitions),
            # spark.default.parallelism stays Spark's: the executors' cores, which the audit's tasks match.
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
            "spark.driver.extraJavaOptions": java_opts,
            "spark.executor.extraJavaOptions": java_opts,
            "spark.python.worker.reuse": "true",
            "spark.sql.adaptive.enabled": "true",
            # Loopback clusters in tests and on laptops: keep the driver reachable from executors.
            "spark.driver.bindAddress": "127.0.0.1" if here else "0.0.0.0",
        }
        if local_dir:
            conf["spark.local.dir"] = local_dir
        if here:
            conf["spark.pyspark.python"] = os.environ["PYSPARK_PYTHON"]
            conf["spark.driver.host"] = "127.0.0.1"
        conf.update(extra or {})
        builder = SparkSession.builder
        for key, value in conf.items():
            builder = builder.config(key, value)
        main = threading.current_thread() is threading.main_thread()
        sigint = signal.getsignal(signal.SIGINT) if main else None
        with _without_jvm_notices():
            spark = builder.getOrCreate()
        if main:
            # SparkContext's own SIGINT handler calls into the JVM (cancelAllJobs) from inside the
            # signal handler, racing the call it interrupts; the caller's handler stops the JVM instead.
            signal.signal(signal.SIGINT, sigint)
        if not here:
            spark.sparkContext.addPyFile(code_zip())
    except EosctlError:
        raise
    except Exception as e:
        raise EosctlError(f"cannot start Spark ({_spark_where(master, remote)}): {first_line(e)}; "
                          "check --master/--remote and that Java 17 is on PATH") from None
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def java_option(name: str, value: str) -> str:
    """-Dname=value for spark.*.extraJavaOptions, which Spark splits like a shell (the launcher's
    CommandBuilderUtils.parseOptionString): every character but the plainest escaped with a backslash,
    so a TMPDIR with a space or a quote stays one option."""
    return "-D" + name + "=" + re.sub(r"([^A-Za-z0-9_./:%=+-])", r"\\\1", value)


# What the JVM says on stderr at start-up that is no news to the user (Spark 4 resolves an incubator
# module; the JDK warns about it on every start).
_JVM_NOTICES = (b"WARNING: Using incubator modules",)


@contextmanager
def _without_jvm_notices() -> Iterator[None]:
    """While the JVM starts, its stderr (inherited from ours) goes through a pipe that drops the
    start-up notices and passes everything else on, for as long as the JVM and its workers live."""
    try:
        saved = os.dup(2)
        read, write = os.pipe()
    except OSError:
        yield
        return

    def forward() -> None:
        with os.fdopen(read, "rb") as pipe:
            for line in pipe:
                if not line.startswith(_JVM_NOTICES):
                    os.write(saved, line)
        os.close(saved)

    sys.stderr.flush()
    os.dup2(write, 2)
    os.close(write)
    threading.Thread(target=forward, name="eosctl-jvm-stderr", daemon=True).start()
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)  # the JVM keeps the pipe; we write to the terminal again


def _from_py4j(record: Any) -> bool:
    """A root-logger filter: False (drop) for py4j's records."""
    return f"{os.sep}py4j{os.sep}" not in (record.pathname or "")


def describe(spark: Any) -> dict[str, Any]:
    """Where the audit ran, for the report."""
    info: dict[str, Any] = {"spark_version": spark.version}
    try:
        conf = spark.sparkContext.getConf()
        info["master"] = conf.get("spark.master")
        info["driver_memory"] = conf.get("spark.driver.memory", None)
    except Exception:  # Spark Connect has no SparkContext
        info["master"] = "spark-connect"
    info["shuffle_partitions"] = int(spark.conf.get("spark.sql.shuffle.partitions"))
    return info


def runs_here(master: str | None, remote: str | None = None) -> bool:
    """Do the executors run on this machine? local / local[N] / local[*] / local-cluster[...], or a
    standalone master or Spark Connect server on loopback (tests, a laptop cluster)."""
    if remote is not None:
        return urlparse(remote).hostname in _LOOPBACK
    if master is None or re.fullmatch(r"local(\[[^\]]*\])?|local-cluster\[[^\]]*\]", master.strip()):
        return True
    return master.startswith("spark://") and urlparse(master).hostname in _LOOPBACK


def require_reachable_sink(sink: Any, master: str | None, remote: str | None) -> None:
    """A DuckDB sink is a file on this machine: executors elsewhere can't open it. Fails before Spark
    starts."""
    if sink.duckdb and not runs_here(master, remote):
        raise EosctlError(f"the DuckDB sink {sink.duckdb} is a file on this machine, which executors on "
                          f"{_spark_where(master, remote)} can't read: audit a Parquet export on shared "
                          f"storage (--sink-parquet), or run with --master 'local[*]'")


def forget(spark: Any) -> None:
    """After the JVM this process started was killed: drop PySpark's handles to it, so nothing calls a
    dead gateway (SparkContext's atexit stop) and a later session in this process starts a new JVM."""
    # lazy: see docs/imports.md
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    sc = getattr(spark, "_sc", None)
    if sc is not None:
        sc._jsc = None  # SparkContext.stop() does nothing without it
        server = getattr(sc, "_accumulatorServer", None)
        if server is not None:
            # Its handler threads read from the JVM: when the JVM dies, socketserver would print each
            # broken connection's traceback on stderr.
            server.handle_error = lambda request, client_address: None
    SparkContext._gateway = None
    SparkContext._jvm = None
    SparkContext._active_spark_context = None
    SparkSession._instantiatedSession = None
    SparkSession._activeSession = None


_zip_path: str | None = None


def code_zip() -> str:
    """A zip of the eosctl and auditors packages (sources only), made once per process, for
    addPyFile / addArtifacts: the classic driver serves it from this path while the session lives."""
    global _zip_path
    if _zip_path is None or not os.path.exists(_zip_path):
        tmp = tempfile.mkdtemp(prefix="eosctl-code-")
        atexit.register(shutil.rmtree, tmp, True)
        path = os.path.join(tmp, "eosctl_code.zip")
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
            for package in _SHIPPED:
                init = __import__(package).__file__
                assert init is not None  # a regular package (its __init__.py), not a namespace one
                root = Path(init).parent
                for f in sorted(root.rglob("*")):
                    if f.is_file() and "__pycache__" not in f.parts and f.suffix not in (".pyc", ".pyo"):
                        z.write(f, f"{package}/{f.relative_to(root).as_posix()}")
        _zip_path = path
    return _zip_path


def _spark_where(master: str | None, remote: str | None) -> str:
    return f"remote {remote}" if remote else f"master {master or 'local[*]'}"
