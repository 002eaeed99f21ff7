"""The JVM parts the lab runs, fetched from Maven Central with the ordinary Maven client.

    python -m joinlab.jars            # make install runs it; prints where the jars are
    python -m joinlab.jars --check    # exit 1 (and say what to run) when a bundle is missing

Two bundles, each a folder of jars under the cache ($LAB_JARS, else the lab's home, ./.lab/jars):
`kafka` (the broker, joinlab.broker) and `spark-kafka` (Spark's Kafka connector, joinlab.spark).
What they hold, how a fetch works and the way without `mvn`: docs/kafka.md.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from xml.sax.saxutils import escape

SCALA = "2.13"
KAFKA_VERSION = "4.1.1"  # the broker; docker-compose.yml pins the apache/kafka image of the same version
# The broker's log4j2 SLF4J binding: the log4j version of Kafka's own POM (log4j-api in its closure).
LOG4J_VERSION = "2.24.3"
# What Spark's parent POM pins for the connector's two dependencies, for the PySpark pyproject.toml pins.
CONNECTOR_KAFKA_CLIENTS = "3.9.2"
CONNECTOR_COMMONS_POOL2 = "2.13.1"
DEPENDENCY_PLUGIN = "3.8.1"


class JarsError(RuntimeError):
    """A bundle could not be fetched or is missing; the message names what and what to run."""


@dataclass(frozen=True)
class Bundle:
    name: str
    version: str
    artifacts: tuple[str, ...]  # group:artifact:version
    transitive: bool

    @property
    def folder(self) -> Path:
        return cache() / f"{self.name}-{self.version}"


def spark_version() -> str:
    import pyspark
    return pyspark.__version__


def connector_coordinates() -> tuple[str, ...]:
    spark = spark_version()
    return (f"org.apache.spark:spark-sql-kafka-0-10_{SCALA}:{spark}",
            f"org.apache.spark:spark-token-provider-kafka-0-10_{SCALA}:{spark}",
            f"org.apache.kafka:kafka-clients:{CONNECTOR_KAFKA_CLIENTS}",
            f"org.apache.commons:commons-pool2:{CONNECTOR_COMMONS_POOL2}")


def kafka_bundle() -> Bundle:
    return Bundle("kafka", KAFKA_VERSION, (f"org.apache.kafka:kafka_{SCALA}:{KAFKA_VERSION}",
                                           f"org.apache.logging.log4j:log4j-slf4j-impl:{LOG4J_VERSION}"),
                  transitive=True)


def connector_bundle() -> Bundle:
    # Not transitive: the rest of the connector's closure (Spark, Scala, compression codecs, slf4j)
    # is PySpark's own jars, and a second copy on the classpath could differ in version.
    return Bundle("spark-kafka", spark_version(), connector_coordinates(), transitive=False)


def cache() -> Path:
    if configured := os.environ.get("LAB_JARS"):
        return Path(configured).resolve()
    return Path(os.environ.get("LAB_HOME", ".lab")).resolve() / "jars"


MANIFEST = "MANIFEST"


def jars(bundle: Bundle) -> list[Path]:
    """The bundle's jars; JarsError naming the bundle and `make install` when it is not there."""
    if not (bundle.folder / MANIFEST).is_file():
        raise JarsError(f"{bundle.name} {bundle.version} is not in the jar cache {cache()}: run `make install` "
                        f"(it fetches it with Maven), or set LAB_JARS to the folder that holds it.")
    return sorted(bundle.folder.glob("*.jar"))


def pom(bundle: Bundle) -> str:
    dependencies = "\n".join(
        "    <dependency><groupId>{}</groupId><artifactId>{}</artifactId><version>{}</version></dependency>".format(
            *map(escape, coordinate.split(":"))) for coordinate in bundle.artifacts)
    return f"""<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>joinlab.fetch</groupId>
  <artifactId>{bundle.name}</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
{dependencies}
  </dependencies>
  <build><plugins><plugin>
    <artifactId>maven-dependency-plugin</artifactId><version>{DEPENDENCY_PLUGIN}</version>
  </plugin></plugins></build>
</project>
"""


def fetch(bundle: Bundle, mvn: str = "mvn") -> Path:
    """Resolve `bundle` with Maven into a temporary folder and rename it into the cache whole."""
    if (bundle.folder / MANIFEST).is_file():
        return bundle.folder
    if shutil.which(mvn) is None:
        raise JarsError(f"`{mvn}` is not on PATH, so {bundle.name} ({', '.join(bundle.artifacts)}) cannot be "
                        "fetched. Install Maven (Debian: apt-get install maven), or see docs/kafka.md "
                        "for the ways without it.")
    cache().mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f".{bundle.name}-", dir=cache()) as work:
        work = Path(work)
        (work / "pom.xml").write_text(pom(bundle))
        out = work / "jars"
        cmd = [mvn, "-B", "-q", "-f", str(work / "pom.xml"), "dependency:copy-dependencies",
               f"-DoutputDirectory={out}", "-DincludeScope=runtime",
               f"-DexcludeTransitive={str(not bundle.transitive).lower()}"]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            raise JarsError(f"Maven could not fetch {bundle.name} ({', '.join(bundle.artifacts)}): "
                            + (_maven_reason(done.stdout + done.stderr) or f"mvn exited with code {done.returncode}"))
        got = {p.name for p in out.glob("*.jar")}
        missing = [c for c in bundle.artifacts if "{1}-{2}.jar".format(*c.split(":")) not in got]
        if missing:
            raise JarsError(f"Maven fetched {bundle.name} without {', '.join(missing)}")
        (out / MANIFEST).write_text("\n".join(bundle.artifacts) + "\n")
        if not bundle.folder.exists():  # else another fetch put the bundle in place meanwhile
            out.rename(bundle.folder)
    return bundle.folder


def _maven_reason(output: str) -> str:
    """Maven's own first error line, without its colour codes, prefix and help pointer."""
    for line in output.splitlines():
        line = re.sub(r"\x1b\[[0-9;]*m", "", line).strip()
        if line.startswith("[ERROR]") and len(line) > len("[ERROR] "):
            return re.sub(r"\s*-> \[Help \d+\]$", "", line[len("[ERROR] "):])
    return ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m joinlab.jars", description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="only check that every bundle is in the cache")
    args = parser.parse_args(argv)
    try:
        for bundle in (kafka_bundle(), connector_bundle()):
            folder = bundle.folder if args.check else fetch(bundle)
            found = jars(bundle)
            print(f"{bundle.name} {bundle.version}: {len(found)} jars in {folder}")
    except JarsError as exc:
        print(f"joinlab.jars: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
