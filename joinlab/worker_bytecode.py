"""Bytecode in PySpark's own zip files, so that every Python process Spark starts imports fast.

    python -m joinlab.worker_bytecode      # make install and the Docker image run it once

Spark puts $SPARK_HOME/python/lib/pyspark.zip (and py4j's zip) first on the path of every Python
process it starts: task workers, and at each query start one process per Python data source call
(create, plan the read, write, the streaming source and sink runners, the transformWithState
driver step). Python cannot cache bytecode for modules it imports from a zip, so each of those
processes compiled PySpark's modules from source again: importing
pyspark.sql.worker.create_data_source took 3.1 s from the zip as installed and 0.7 s with the
bytecode added (0.6 s from site-packages), on the lab's 2-core machine.

The bytecode is added next to each module inside the zip as an unchecked hash-based .pyc (PEP
552): zipimport prefers it to the source. It is valid for exactly the zip it was made from; a
reinstall of PySpark replaces the zip (and drops it), and `make install` adds it again. The zip is
replaced atomically, and only here: never rewrite it while Spark runs (a running process reads
modules at the offsets it cached).
"""
from __future__ import annotations

import importlib.util
import marshal
import os
import sys
import time
import warnings
import zipfile
from pathlib import Path

MARKERS = {"pyspark.zip": "pyspark/__init__.pyc", "py4j": "py4j/__init__.pyc"}
UNCHECKED_HASH = (0b01).to_bytes(4, "little")  # PEP 552 flags: hash-based, source not checked


def zips() -> list[Path]:
    """PySpark's zip files that Spark puts on its Python processes' path."""
    import pyspark
    lib = Path(pyspark.__file__).parent / "python" / "lib"
    return sorted(lib.glob("pyspark.zip")) + sorted(lib.glob("py4j-*-src.zip"))


def has_bytecode(path: Path) -> bool:
    marker = MARKERS["pyspark.zip"] if path.name == "pyspark.zip" else MARKERS["py4j"]
    with zipfile.ZipFile(path) as archive:
        return marker in archive.NameToInfo


def _pyc(source: bytes, filename: str) -> bytes:
    code = compile(source, filename, "exec", dont_inherit=True)
    return importlib.util.MAGIC_NUMBER + UNCHECKED_HASH + importlib.util.source_hash(source) + marshal.dumps(code)


def add_bytecode(path: Path) -> int:
    """Rewrite `path` with a .pyc beside every module outside tests/; returns how many."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    added = 0
    with zipfile.ZipFile(path) as source, zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as target:
        names = set(source.namelist())
        for info in source.infolist():
            data = source.read(info)
            target.writestr(info, data)
            name = info.filename
            if name.endswith(".py") and "/tests/" not in name and name + "c" not in names:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # PySpark's own SyntaxWarnings, printed at every compile
                    pyc = _pyc(data, name)
                target.writestr(zipfile.ZipInfo(name + "c", info.date_time), pyc)
                added += 1
    os.replace(tmp, path)
    return added


def main() -> int:
    for path in zips():
        if has_bytecode(path):
            print(f"{path.name}: bytecode already there")
            continue
        began = time.monotonic()
        try:
            added = add_bytecode(path)
        except OSError as exc:  # a read-only install: slower process starts, nothing wrong
            print(f"{path.name}: could not add bytecode ({exc}); Spark's Python processes start slower", file=sys.stderr)
            continue
        print(f"{path.name}: bytecode added for {added} modules ({time.monotonic() - began:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
