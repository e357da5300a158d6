"""JVM software from Maven Central, resolved by the project's own poms (``eosctl/sandbox/jvm/*.pom.xml``).

``jars("kafka", version="4.4.0")`` runs ``mvn dependency:copy-dependencies`` once into a cache directory
(``$EOSCTL_JAR_CACHE``, else ``~/.cache/eosctl/jars``) and returns it; later calls (and later runs) reuse it.
Maven keeps its own download cache (``~/.m2``), so a second version or pom costs only the copy. Nothing is
committed: a fresh machine resolves everything from Central on first use.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from eosctl.base.errors import EosctlError

POMS = Path(__file__).parent / "jvm"
# The poms whose main version can be chosen (``version=``): the property that sets it. Other poms resolve
# what they name, cached under their content's hash.
VERSION_PROPERTY = {"kafka": "kafka.version"}
_COMPLETE = ".complete"


def cache_root() -> Path:
    return Path(os.environ.get("EOSCTL_JAR_CACHE") or Path.home() / ".cache" / "eosctl" / "jars")


def pom(name: str) -> Path:
    path = POMS / f"{name}.pom.xml"
    if not path.is_file():
        raise EosctlError(f"no pom named {name!r} in {POMS}")
    return path


def default_version(name: str) -> str:
    """The version a pom resolves unless told (its ``<VERSION_PROPERTY>`` property), or for a pom without
    one a hash of its text (a changed pom resolves anew)."""
    if name not in VERSION_PROPERTY:
        return "pom-" + hashlib.sha256(pom(name).read_bytes()).hexdigest()[:12]
    prop = VERSION_PROPERTY[name]
    found = re.search(rf"<{re.escape(prop)}>([^<]+)</{re.escape(prop)}>", pom(name).read_text())
    if not found:
        raise EosctlError(f"{pom(name)} sets no <{prop}>")
    return found.group(1)


def java() -> str:
    """The java launcher, checked to be 17 or newer (Kafka 4.x needs it); one line otherwise."""
    home = os.environ.get("JAVA_HOME")
    in_home = Path(home) / "bin" / "java" if home else None
    exe = str(in_home) if in_home and in_home.exists() else shutil.which("java")
    if not exe:
        raise EosctlError("Java 17 or newer is needed for Apache Kafka and is not on PATH; install it "
                          "(Debian: apt-get install openjdk-17-jre-headless)")
    out = subprocess.run([exe, "-version"], capture_output=True, text=True, timeout=30).stderr
    found = re.search(r'version "(\d+)(?:\.(\d+))?', out)
    major = int(found.group(1)) if found else 0
    if major == 1 and found and found.group(2):
        major = int(found.group(2))
    if major < 17:
        first = out.splitlines()[0] if out else "?"
        raise EosctlError(f"Apache Kafka needs Java 17 or newer; {exe} is {first}")
    return exe


def jars(name: str, version: str | None = None, progress=None) -> Path:
    """The directory holding every runtime jar of pom ``name`` (``jvm/NAME.pom.xml``) at ``version``
    (resolved on first use). Its ``.complete`` file holds the version."""
    if version is not None and name not in VERSION_PROPERTY:
        raise EosctlError(f"the {name} pom has no version to choose")
    version = version or default_version(name)
    dest = cache_root() / f"{name}-{version}"
    if (dest / _COMPLETE).exists():
        return dest
    mvn = shutil.which("mvn")
    if not mvn:
        raise EosctlError(f"the {name} {version} jars are not cached in {dest} and Maven (mvn) is not on "
                          "PATH to fetch them; install Maven (Debian: apt-get install maven)")
    if progress:
        progress(f"resolving {name} {version} from Maven Central (once; cached in {dest})")
    dest.parent.mkdir(parents=True, exist_ok=True)
    # Resolve into a fresh directory and rename it into place, so two resolvers at once (parallel test
    # sessions) never see a half-copied directory.
    tmp = Path(tempfile.mkdtemp(prefix=f".{name}-{version}-", dir=dest.parent))
    try:
        cmd = [mvn, "-q", "-B", "-f", str(pom(name)), "dependency:copy-dependencies",
               "-DincludeScope=runtime", f"-DoutputDirectory={tmp}"]
        if name in VERSION_PROPERTY:
            cmd.append(f"-D{VERSION_PROPERTY[name]}={version}")
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=900, stdin=subprocess.DEVNULL)
        if done.returncode != 0:
            lines = [ln for ln in (done.stdout + done.stderr).splitlines() if "ERROR" in ln] or ["no output"]
            raise EosctlError(f"Maven could not resolve {name} {version}: {lines[0].strip()[:300]}")
        (tmp / _COMPLETE).write_text(version)
        try:
            tmp.rename(dest)
        except OSError:
            if not (dest / _COMPLETE).exists():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return dest


def classpath(directory: Path) -> str:
    return str(directory / "*")
