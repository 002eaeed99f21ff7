"""Put Spark's Kafka connector bundle (docker/fetch_jars.py spark-kafka, a folder of jars with the
MANIFEST joinlab.jars writes) into the installed pyspark's jars folder, where joinlab.spark finds it
and adds nothing to the session (every driver and executor of the image then has it).

    python3 install_connector.py BUNDLE [JARS_DIR]    # JARS_DIR: pyspark's jars folder by default

It refuses a bundle made for another Spark version than the installed pyspark's, and a pyspark
that already holds another version of the connector.
"""
from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    if len(argv) not in (1, 2):
        sys.exit("usage: install_connector.py BUNDLE [JARS_DIR]")
    import pyspark
    bundle = Path(argv[0])
    dest = Path(argv[1]) if len(argv) == 2 else Path(pyspark.__file__).parent / "jars"
    manifest = bundle / "MANIFEST"
    if not manifest.is_file():
        sys.exit(f"{bundle} is not a jar bundle of joinlab.jars (no MANIFEST)")
    coordinates = manifest.read_text().split()
    connector = [c for c in coordinates if re.fullmatch(r"org\.apache\.spark:spark-sql-kafka-0-10_[\d.]+:.+", c)]
    if len(connector) != 1:
        sys.exit(f"{manifest} names no spark-sql-kafka-0-10 connector: {coordinates}")
    made_for = connector[0].rsplit(":", 1)[1]
    if made_for != pyspark.__version__:
        sys.exit(f"the connector bundle is for Spark {made_for}, but pyspark {pyspark.__version__} is installed: "
                 "the image's pyspark and pyproject.toml's pyspark==X pin must agree")
    for old in dest.glob("spark-sql-kafka-0-10_*.jar"):
        if not (bundle / old.name).exists():
            sys.exit(f"{dest} already holds another Kafka connector: {old.name}")
    jars = []
    for coordinate in coordinates:
        _, artifact, version = coordinate.split(":")
        jar = bundle / f"{artifact}-{version}.jar"
        if not jar.is_file():
            sys.exit(f"{bundle} lacks {jar.name} ({coordinate})")
        jars.append(jar)
    for jar in jars:
        shutil.copy2(jar, dest / jar.name)
        print(f"added {dest / jar.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
