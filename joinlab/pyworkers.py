"""The daemon Spark forks its Python workers from (`spark.python.daemon.module`, set by
joinlab.spark.server_conf): pyspark's own daemon, started with what every worker of a lab job imports
already imported and compiled.

Why: Spark puts its installation's `pyspark.zip` first on a worker's path, and Python compiles a
module it imports from a zip archive every time (it keeps bytecode only beside plain files). Each
new worker then spent about half a second of CPU compiling pyspark before its first row, and a
job's first micro-batch waited for it (docs/benchmarks.md). Here pyspark is imported from the same
installation's plain files instead, where its bytecode is kept, and the daemon imports the worker's
modules before it forks, so that every worker starts with them.

And one cache: a value a transformWithState stage reads from its state arrives pickled with its
schema as JSON text, which pyspark parses again for every value read
(`pyspark.sql.types._parse_datatype_json_string`), a third of the cost of reading it back. The
workers here parse each schema once (types are immutable values).
"""
from __future__ import annotations

import functools
import sys
from pathlib import Path


def _spark_archive(entry: str) -> bool:
    """Whether a path entry is one of the archives Spark puts on a worker's path."""
    name = Path(entry).name
    return name == "pyspark.zip" or (name.startswith("py4j-") and name.endswith(".zip"))


def _plain_files_path() -> list[str]:
    """sys.path without Spark's archives where pyspark and py4j are installed as plain files too
    (the lab's venv and image); else as it is."""
    rest = [entry for entry in sys.path if not _spark_archive(entry)]
    installed = all(any(Path(entry or ".", package, "__init__.py").is_file() for entry in rest)
                    for package in ("pyspark", "py4j"))
    return rest if installed else sys.path


if __name__ == "__main__":
    sys.path[:] = _plain_files_path()
    import pyarrow  # noqa: F401  (transformWithState's serializers import both in every worker)
    import pandas  # noqa: F401
    import pyspark.worker  # noqa: F401
    from pyspark.sql import types
    types._parse_datatype_json_string = functools.lru_cache(maxsize=1024)(types._parse_datatype_json_string)
    from pyspark.daemon import manager
    manager()
