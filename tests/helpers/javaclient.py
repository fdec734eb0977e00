"""The real Java client (kafka-clients) for tests: the programs in tests/helpers/java, compiled
with javac against the kafka-clients jar and run with java.

The kafka-clients jar comes from ``$SPARK_KAFKA_JARS_ROOT/spark-4.3`` (default: the folder
``shared/jars`` beside the checkout, /work/shared/jars on the project's machines); its
runtime dependencies (slf4j-api, lz4, snappy, zstd-jni) from pyspark's ``jars`` folder.
Anything missing fails the test with what to set, never skips it.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
JAVA_DIR = Path(__file__).resolve().parent / "java"
CLIENT_SET = "spark-4.3"
#: kafka-clients' runtime dependencies, found in pyspark's jars folder
DEPENDENCIES = ("slf4j-api-", "lz4-java-", "snappy-java-", "zstd-jni-")
#: short-lived JVMs (javac, the test programs): the quick JIT tier and the serial collector
#: spend a third less CPU than the defaults on a run of a few seconds (CI's 2 cores are shared)
JVM_FLAGS = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")


def jars_root() -> Path:
    return Path(os.environ.get("SPARK_KAFKA_JARS_ROOT") or REPO.parent / "shared" / "jars")


def classpath() -> list[Path]:
    """kafka-clients and its runtime dependencies; AssertionError naming what is missing."""
    folder = jars_root() / CLIENT_SET
    clients = sorted(folder.glob("kafka-clients-*.jar"))
    if not clients:
        raise AssertionError(
            f"no kafka-clients jar in {folder}: set SPARK_KAFKA_JARS_ROOT to the folder that "
            f"holds {CLIENT_SET}/kafka-clients-*.jar (default ../shared/jars beside the checkout)")
    import pyspark  # a test dependency: its jars folder has kafka-clients' dependencies

    pyspark_jars = Path(pyspark.__file__).resolve().parent / "jars"
    found = [clients[-1]]
    for prefix in DEPENDENCIES:
        matches = sorted(pyspark_jars.glob(f"{prefix}*.jar"))
        if not matches:
            raise AssertionError(f"no {prefix}*.jar in {pyspark_jars} (kafka-clients needs it)")
        found.append(matches[-1])
    return found


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise AssertionError(f"{name} is not installed; the Java client tests need a JDK "
                             f"(Debian: apt-get install openjdk-17-jdk-headless)")
    return path


#: (program, build dir) -> the command that runs it: each program compiles once a process
_compiled: dict[tuple[str, Path], list[str]] = {}


def compile_java(program: str, build_dir: Path, timeout: float = 180.0) -> list[str]:
    """Compile tests/helpers/java/``program``.java (and the classes of that folder it uses)
    into ``build_dir``, once per process and folder; the command that runs it."""
    known = _compiled.get((program, build_dir))
    if known is not None:
        return known
    jars = os.pathsep.join(str(p) for p in classpath())
    build_dir.mkdir(parents=True, exist_ok=True)
    compiled = subprocess.run(
        [_tool("javac"), *(f"-J{flag}" for flag in JVM_FLAGS), "-d", str(build_dir), "-cp", jars,
         "-sourcepath", str(JAVA_DIR), str(JAVA_DIR / f"{program}.java")],
        capture_output=True, text=True, timeout=timeout, check=False)
    if compiled.returncode != 0:
        raise AssertionError(f"javac {program}.java failed:\n{compiled.stderr[-3000:]}")
    command = [_tool("java"), *JVM_FLAGS, "-cp", os.pathsep.join([str(build_dir), jars]), program]
    _compiled[(program, build_dir)] = command
    return command


def compile_shared(program: str, root: Path) -> list[str]:
    """``program`` compiled once for every process sharing ``root`` (the pytest-xdist
    workers of one run): into a folder named by a hash of the sources and the jars, under
    a file lock, skipped when that folder is complete. The command that runs it."""
    digest = hashlib.sha256()
    for item in [*sorted(JAVA_DIR.glob("*.java")), *classpath()]:
        digest.update(str(item).encode() + b"\0" + item.read_bytes())
    build_dir = root / f"java-{program}-{digest.hexdigest()[:16]}"
    root.mkdir(parents=True, exist_ok=True)
    with open(root / f"{build_dir.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = build_dir / ".compiled"
        if not done.exists():
            compile_java(program, build_dir)
            done.touch()
    jars = os.pathsep.join(str(p) for p in classpath())
    return [_tool("java"), *JVM_FLAGS, "-cp", os.pathsep.join([str(build_dir), jars]), program]


def run_java(program: str, build_dir: Path, *args: str,
             timeout: float = 180.0) -> subprocess.CompletedProcess[str]:
    """Compile tests/helpers/java/``program``.java into ``build_dir`` and run it; output captured."""
    return subprocess.run([*compile_java(program, build_dir, timeout), *args],
                          capture_output=True, text=True, timeout=timeout, check=False)


def start_java(program: str, build_dir: Path, *args: str) -> subprocess.Popen[str]:
    """Compile and start tests/helpers/java/``program``.java with pipes for stdin and stdout
    (stderr into stdout); the caller stops it (kill and wait, by its pid)."""
    return subprocess.Popen([*compile_java(program, build_dir), *args], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            bufsize=1)


def run_facts(command: list[str], *args: str, timeout: float = 90.0) -> dict[str, str]:
    """Run a compiled program that prints "fact NAME=VALUE" lines (tests/helpers/java/
    ClientTier.java) and ends with "done ..."; its facts, or AssertionError with its output."""
    done = subprocess.run([*command, *args], capture_output=True, text=True, timeout=timeout,
                          check=False)
    output = f"stdout:\n{done.stdout[-6000:]}\nstderr:\n{done.stderr[-6000:]}"
    assert done.returncode == 0 and "\ndone " in f"\n{done.stdout}", (
        f"{' '.join(command[-1:] + list(args))} exited {done.returncode}\n{output}")
    facts: dict[str, str] = {}
    for line in done.stdout.splitlines():
        if line.startswith("fact "):
            name, _, value = line[5:].partition("=")
            facts[name] = value
    return facts
