"""A class-data sharing archive of the Spark driver's classes, so that a fresh JVM starts faster.

    python -m joinlab.class_archive      # make install runs it once

Every `joinlab run`, `make demo` and notebook starts a JVM that loads and verifies the same
thousands of classes from Spark's jars before its first batch. Java's application class-data
sharing maps them from an archive instead: 3-5 s less per cold start on the lab's 2-core machine,
most of it in the session's start (`make bench` step 7 measures it; docs/benchmarks.md).

The archive is made once per installation (it lives under the interpreter's prefix, the venv) by
a JVM that starts a session, runs a query and exits with -XX:ArchiveClassesAtExit. It is valid for
exactly the JVM and the jars it was made with; the JVM checks both at start and runs without it,
silently, when either changed (Java updated, PySpark reinstalled: `make install` makes it again).
A JVM given a truncated archive crashes at start, so the archive is written to a temporary file,
mapped by a JVM that must accept it (-Xshare:on) and only then renamed into place.
$LAB_CLASS_ARCHIVE=off starts Spark without it.
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

# The JVM says nothing about the archive: whether it was used shows only in the start-up time.
QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"


def path() -> Path:
    return Path(sys.prefix) / "share" / "joinlab" / "spark-driver.jsa"


def java_options() -> str:
    """The driver JVM's options that map the archive: empty when there is none or it is turned off."""
    if os.environ.get("LAB_CLASS_ARCHIVE", "on").strip().lower() in ("off", "0", "false", "no"):
        return ""
    archive = path()
    return f"-XX:SharedArchiveFile={archive} {QUIET}" if archive.is_file() else ""


def accepted(archive: Path, java: str, classpath: str) -> tuple[bool, str]:
    """Whether a JVM with this classpath maps the archive (-Xshare:on fails rather than run without
    it); and what the JVM said."""
    done = subprocess.run([java, "-Xshare:on", f"-XX:SharedArchiveFile={archive}", "-cp", classpath, "-version"],
                          capture_output=True, text=True, timeout=120)
    return done.returncode == 0, (done.stderr + done.stdout).strip()


def driver_java(spark) -> tuple[str, str]:
    """The running driver JVM's java binary and classpath: what an archive for it must match."""
    system = spark._jvm.java.lang.System
    return str(Path(system.getProperty("java.home")) / "bin" / "java"), system.getProperty("java.class.path")


def install(made: Path, java: str, classpath: str) -> Path:
    """Move a freshly made archive into place if a JVM accepts it; else remove it and say why."""
    ok, said = accepted(made, java, classpath)
    if not ok:
        made.unlink(missing_ok=True)
        raise RuntimeError(f"a JVM did not accept the class archive made at {made}: {said[-500:]}")
    made.chmod(0o444)
    os.replace(made, path())
    return path()


def make() -> Path:
    """Start Spark in a JVM that writes the archive when it exits, run a small query, and install it."""
    from pyspark import SparkContext
    from joinlab.spark import session
    target = path()
    target.parent.mkdir(parents=True, exist_ok=True)
    made = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    if SparkContext._active_spark_context is not None:
        raise RuntimeError("a Spark session runs in this process already: make the archive in a new one")
    os.environ["LAB_CLASS_ARCHIVE"] = "off"  # the dumping JVM must not map an older archive
    spark = session("class-archive", **{"spark.driver.extraJavaOptions": f"-XX:ArchiveClassesAtExit={made} {QUIET}",
                                         "spark.ui.enabled": "false"})
    java, classpath = driver_java(spark)
    spark.range(1000).selectExpr("id % 7 AS k").groupBy("k").count().collect()
    gateway = SparkContext._gateway
    process = gateway.proc
    spark.stop()
    gateway.shutdown()
    process.stdin.close()  # the JVM exits at the end of its input and writes the archive then
    try:
        if process.wait(timeout=300) != 0 or not made.is_file():
            raise RuntimeError(f"the JVM exited with {process.returncode} and wrote no class archive")
    except BaseException:
        made.unlink(missing_ok=True)  # never leave a partly written archive behind
        raise
    return install(made, java, classpath)


def main() -> int:
    started = time.monotonic()
    try:
        archive = make()
    except Exception as error:  # the lab runs without it, only slower to start: say so, do not fail
        print(f"class archive: not made ({error}); Spark's JVM will start without it, about 5 s slower",
              file=sys.stderr)
        return 0
    print(f"class archive: {archive} ({archive.stat().st_size / 2**20:.0f} MiB, "
          f"{time.monotonic() - started:.0f} s); Spark's driver JVM maps it at start")
    return 0


if __name__ == "__main__":
    sys.exit(main())
