"""Spark's classes parsed once, into a file every Spark JVM of the native stack maps: HotSpot's
class data sharing (CDS), as a dynamic archive on top of the JDK's own.

    python -m joinlab.class_archive            # make install runs it: makes the archive when missing
    python -m joinlab.class_archive --check    # exit 1 (and say what to run) when it is missing

A Spark JVM loads tens of thousands of classes. Without an archive each driver, executor, master
and worker parses them into a metaspace of its own, a third of its memory, and spends seconds doing
it at every start. With one, the classes' parsed form is mapped from the file: pages the stack's
JVMs share (docs/operations.md#memory). A local server runs without it (joinlab.spark).

The archive is made by a local server in a process of its own with -XX:ArchiveClassesAtExit, which
runs each registered pattern's query (joinlab.archive_training: joinlab.microbatch, no broker) on a
few generated records, so that what the jobs load is in it. It fits one Java and one set of Spark
jars, and every Spark JVM of the lab starts with the same class path: its name holds a fingerprint
of the JDK and the jars, so a JVM of another Java or another Spark finds no archive and starts
without one, never with a wrong one. It is mapped at the address it was made for (AT_ITS_ADDRESS),
without the randomisation Java applies by default, or nothing would be shared; the lab's JVMs listen
on 127.0.0.1 only (docs/operations.md#memory).
"""
from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

from joinlab.config import java, spark_home
from joinlab.jars import spark_version

# Map the archive at the address it was made for. Java 17's later updates map it elsewhere by
# default (address space randomisation for class metadata), which rewrites every pointer in it: each
# JVM then holds a private copy of the whole archive, and nothing is shared (docs/benchmarks.md).
AT_ITS_ADDRESS = "-XX:+UnlockDiagnosticVMOptions -XX:ArchiveRelocationMode=0"
# The dumping JVM's list of the classes it cannot archive (signed jars, generated classes): noise.
QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"


def _spark_jars() -> Path:
    return Path(spark_home(), "jars")


def fingerprint() -> str | None:
    """Of the JDK (its release file and libjvm) and of Spark's jars (names, sizes, times): what the
    JVM checks an archive against. None without a java."""
    found = java()
    if found is None:
        return None
    binary = found.resolve()
    home = binary.parent.parent
    digest = hashlib.sha256(str(binary).encode())
    for part in (home / "release", *sorted(home.glob("lib/server/libjvm.so"))):
        if part.exists():
            stat = part.stat()
            digest.update(f"{part}:{stat.st_size}:{stat.st_mtime_ns}".encode())
    for jar in sorted(_spark_jars().glob("*.jar")):
        stat = jar.stat()
        digest.update(f"{jar.name}:{stat.st_size}:{stat.st_mtime_ns}".encode())
    return digest.hexdigest()[:16]


def folder() -> Path:
    """Beside the installed PySpark, whose jars it is made from: in the venv."""
    return Path(sys.prefix) / "share" / "joinlab" / "class-archive"


def path() -> Path | None:
    """Where the archive of this Java and these jars is (or goes); None without a java."""
    found = fingerprint()
    return folder() / f"spark-{spark_version()}-{found}.jsa" if found else None


def java_options() -> str:
    """The options that map the archive, for the stack's Spark JVMs; empty while there is none."""
    archive = path()
    if not (archive and archive.is_file()):
        return ""
    return f"-XX:SharedArchiveFile={archive} {AT_ITS_ADDRESS}"


def make(log=print) -> Path:
    """Make the archive (a local server that runs every registered pattern's query), unless it is
    there; the archives of other Javas or jars go."""
    archive = path()
    if archive is None:
        raise SystemExit("no java found (JAVA_HOME or PATH): Spark needs Java 17+, see `make check-java`")
    if archive.is_file():
        return archive
    archive.parent.mkdir(parents=True, exist_ok=True)
    began = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="making-", dir=archive.parent) as tmp:
        dumped = Path(tmp, archive.name)
        env = {**os.environ, "SPARK_MASTER": "local[2]"}
        done = subprocess.run([sys.executable, "-m", "joinlab.archive_training", str(dumped)],
                              check=False, env=env, capture_output=True, text=True)
        if done.returncode != 0:
            tail = "\n".join((done.stdout + done.stderr).splitlines()[-20:])
            raise SystemExit(f"the class archive could not be made (Spark's JVMs would start without one):\n{tail}")
        jvm = json.loads(done.stdout.strip().splitlines()[-1])
        # The JVM exits when its Python parent has (its stdin closes), and dumps on its way out; it
        # is no child of ours, so its exit status is not ours to read: the check below is the test.
        with contextlib.suppress(psutil.NoSuchProcess):
            psutil.Process(jvm["pid"]).wait(timeout=600)
        refused = refusal(dumped, Path(jvm["java"]), jvm["classpath"]) if dumped.is_file() else "no archive written"
        if refused:
            raise SystemExit(f"a JVM refused the archive it made: {refused}")
        for old in archive.parent.glob("*.jsa"):
            old.unlink()
        dumped.chmod(0o444)
        dumped.rename(archive)
    log(f"class archive: {archive} ({archive.stat().st_size >> 20} MiB, made in {time.monotonic() - began:.0f} s)")
    return archive


def refusal(archive: Path, binary: Path, classpath: str) -> str:
    """What a JVM of this java and class path says when it refuses `archive` (-Xshare:on fails rather
    than start without it); empty when it maps it."""
    check = subprocess.run([str(binary), "-Xshare:on", f"-XX:SharedArchiveFile={archive}", *AT_ITS_ADDRESS.split(),
                            "-cp", classpath, "-version"], check=False, capture_output=True, text=True, timeout=120)
    return "" if check.returncode == 0 else (check.stderr + check.stdout)[-500:]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m joinlab.class_archive", description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when this Java's and these jars' archive is missing")
    args = parser.parse_args(argv)
    if args.check:
        if java_options():
            return 0
        print(f"no class archive for this Java and these Spark jars at {path()}: run `make install`", file=sys.stderr)
        return 1
    make()
    return 0


if __name__ == "__main__":
    sys.exit(main())
