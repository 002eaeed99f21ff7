"""Add Spark's official Kafka connector to pyspark's jars directory, for the Spark version of the
installed pyspark and the Scala suffix of its jars, every jar checked against the repository's SHA-1.

KAFKA_CONNECTOR=labkafka builds without it (where Maven Central is not reachable): the jobs then
read and write Kafka through the lab's own Python data source (`labkafka`), as the native lab does.
CONNECTOR_JARS_DIR only exists for tests/test_compose.py.
"""
import hashlib
import os
import re
import sys
import urllib.request
from pathlib import Path

import pyspark

if os.environ.get("KAFKA_CONNECTOR", "official") == "labkafka":
    print("KAFKA_CONNECTOR=labkafka: building WITHOUT Spark's official Kafka connector; "
          "the jobs will use the lab's Python Kafka source and sink (labkafka)", file=sys.stderr)
    sys.exit(0)
if os.environ.get("KAFKA_CONNECTOR", "official") != "official":
    sys.exit(f"KAFKA_CONNECTOR must be 'official' or 'labkafka', not {os.environ['KAFKA_CONNECTOR']!r}")

spark_version = pyspark.__version__
spark_jars = Path(pyspark.__file__).parent / "jars"
dest = Path(os.environ.get("CONNECTOR_JARS_DIR") or spark_jars)
repo = os.environ["MAVEN_REPO"].rstrip("/")
pins = {"kafka.version": os.environ["KAFKA_CLIENTS_VERSION"],
        "commons-pool2.version": os.environ["COMMONS_POOL2_VERSION"]}

# The connector's Scala suffix must be the installed Spark's: read it off spark-core_<scala>-<ver>.jar.
core = re.compile(r"spark-core_(\d+\.\d+)-" + re.escape(spark_version) + r"\.jar")
scalas = sorted({m.group(1) for p in spark_jars.glob("spark-core_*.jar") if (m := core.fullmatch(p.name))})
if len(scalas) != 1:
    sys.exit(f"cannot tell the Scala version of pyspark {spark_version} from {spark_jars}: {scalas}")
scala = scalas[0]


def fetch(path: str) -> bytes:
    url = f"{repo}/{path}"
    try:
        with urllib.request.urlopen(url, timeout=120) as response:
            return response.read()
    except OSError as exc:
        raise SystemExit(f"could not download {url}: {exc} (without Maven Central, build with "
                         "KAFKA_CONNECTOR=labkafka: the lab's own Kafka source instead)") from None


try:
    pom = fetch(f"org/apache/spark/spark-parent_{scala}/{spark_version}/spark-parent_{scala}-{spark_version}.pom").decode()
except SystemExit as exc:
    print(f"note: {exc}; using the build args as they are", file=sys.stderr)
else:
    for prop, chosen in pins.items():
        pinned = re.search(rf"<{re.escape(prop)}>\s*([^<\s]+)\s*</{re.escape(prop)}>", pom)
        if pinned and pinned.group(1) != chosen:
            print(f"WARNING: Spark {spark_version} pins {prop} {pinned.group(1)} but this build uses {chosen}; "
                  "pass --build-arg KAFKA_CLIENTS_VERSION=... / COMMONS_POOL2_VERSION=... to match",
                  file=sys.stderr)

artifacts = [
    ("org/apache/spark", f"spark-sql-kafka-0-10_{scala}", spark_version),
    ("org/apache/spark", f"spark-token-provider-kafka-0-10_{scala}", spark_version),
    ("org/apache/kafka", "kafka-clients", pins["kafka.version"]),
    ("org/apache/commons", "commons-pool2", pins["commons-pool2.version"]),
]
for group, artifact, version in artifacts:
    name = f"{artifact}-{version}.jar"
    path = f"{group}/{artifact}/{version}/{name}"
    data = fetch(path)
    expected = fetch(path + ".sha1").decode().split()[0].lower()
    actual = hashlib.sha1(data).hexdigest()
    if actual != expected:
        sys.exit(f"SHA-1 mismatch for {name}: downloaded {actual}, the repository says {expected}")
    (dest / name).write_bytes(data)
    print(f"added {dest / name} (sha1 {actual})")
