"""Fetch one of joinlab.jars' bundles with Maven into DEST, in a build stage of docker/Dockerfile:

    python3 fetch_jars.py kafka DEST          # Apache Kafka's broker jars (joinlab.jars.KAFKA_VERSION)
    python3 fetch_jars.py spark-kafka DEST    # Spark's Kafka connector for the pyspark pyproject.toml pins

The same code as `make install` on the host (joinlab.jars: a throwaway POM, `mvn dependency:copy-
dependencies`), so the images and the native lab run the same jars. The build stage has Maven and
Java but no pyspark (installing it there would cost minutes): the connector's Spark version is the
exact `pyspark==X` pin of pyproject.toml, which is what the lab image's pip installs; the lab stage
checks that they agree (docker/install_connector.py).

MAVEN_REPO: a Maven repository to use instead of Maven Central (a mirror), for Maven's every download.
"""
from __future__ import annotations

import os
import re
import shutil
import stat
import sys
import tempfile
import tomllib
from pathlib import Path

CENTRAL = "https://repo1.maven.org/maven2"
HERE = Path(__file__).resolve().parent


def pinned_pyspark(pyproject: Path) -> str:
    """X of the `pyspark==X` dependency (with extras or without: `pyspark[connect]==X`); SystemExit
    naming the file when there is no exact pin."""
    if not pyproject.is_file():
        sys.exit(f"no {pyproject}: the connector's Spark version is pyproject.toml's pyspark==X pin "
                 "(copy it beside this script, or name it in $PYPROJECT)")
    dependencies = tomllib.loads(pyproject.read_text())["project"]["dependencies"]
    for requirement in dependencies:
        name = re.match(r"\s*([A-Za-z0-9_.-]+)", requirement).group(1)
        if name.lower() == "pyspark":
            pin = re.fullmatch(r"\s*pyspark\s*(?:\[[\w\s,.-]*\])?\s*==\s*([0-9][0-9A-Za-z.+-]*)\s*",
                               requirement, re.I)
            if not pin:
                sys.exit(f"{pyproject} must pin pyspark exactly (pyspark==X) for the image's Kafka connector, "
                         f"not {requirement!r}")
            return pin.group(1)
    sys.exit(f"{pyproject} has no pyspark dependency")


def maven_command(repository: str, work: Path) -> str:
    """`mvn`, or, for a repository other than Maven Central, a wrapper that mirrors every repository to it."""
    if repository.rstrip("/") == CENTRAL:
        return "mvn"
    settings = work / "settings.xml"
    settings.write_text(
        "<settings><mirrors><mirror><id>lab-mirror</id><mirrorOf>*</mirrorOf>"
        f"<url>{repository}</url></mirror></mirrors></settings>\n")
    wrapper = work / "mvn"
    wrapper.write_text(f'#!/bin/sh\nexec mvn -s "{settings}" "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    return str(wrapper)


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("kafka", "spark-kafka"):
        sys.exit("usage: fetch_jars.py kafka|spark-kafka DEST")
    name, dest = argv[0], Path(argv[1])
    sys.path.insert(0, str(HERE))  # joinlab/__init__.py and joinlab/jars.py are copied beside this script
    from joinlab import jars
    if name == "spark-kafka":
        version = pinned_pyspark(Path(os.environ.get("PYPROJECT", HERE / "pyproject.toml")))
        jars.spark_version = lambda: version  # no pyspark here: the version pip will install
    bundle = jars.kafka_bundle() if name == "kafka" else jars.connector_bundle()
    with tempfile.TemporaryDirectory(prefix="fetch-jars-") as work:
        os.environ["LAB_JARS"] = str(Path(work) / "cache")
        try:
            folder = jars.fetch(bundle, mvn=maven_command(os.environ.get("MAVEN_REPO") or CENTRAL, Path(work)))
        except jars.JarsError as exc:
            sys.exit(f"fetch_jars: {exc}")
        if dest.exists():
            shutil.rmtree(dest)
        shutil.copytree(folder, dest)
    found = sorted(p.name for p in dest.glob("*.jar"))
    print(f"fetch_jars: {bundle.name} {bundle.version}: {len(found)} jars in {dest} "
          f"({', '.join(bundle.artifacts)})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
