"""`python -m joinlab.archive_training DUMP`: the run joinlab.class_archive.make starts to make the
class archive (an entry point: nothing imports it, so the archive's module imports no job code).

A server in this process whose JVM dumps the classes it loaded to DUMP when it exits: it runs each
registered pattern's query on two micro-batches of generated records. Prints the JVM's pid, java and
class path (JSON), for `make` to wait for the dump and check it: a JVM given a truncated archive
crashes at start, so a dump that did not finish, or that a JVM refuses, fails there and is never
put in place.
"""
from __future__ import annotations

import json
import os
import sys

from joinlab import microbatch
from joinlab import spark as lab_spark
from joinlab.class_archive import QUIET


def main(dump_to: str) -> None:
    os.environ["SPARK_SUBMIT_OPTS"] = " ".join(filter(None, [os.environ.get("SPARK_SUBMIT_OPTS"),
                                                             f"-XX:ArchiveClassesAtExit={dump_to}", QUIET]))
    session = lab_spark.connect(*lab_spark.embedded("class-archive"))  # never a running lab's server
    microbatch.every_pattern(session, 60)  # not a job that asks the lookup service: no install runs one
    session.stop()
    jvm = lab_spark.server_jvms()[0]
    line = jvm.cmdline()
    print(json.dumps({"pid": jvm.pid, "java": jvm.exe(), "classpath": line[line.index("-cp") + 1]}))


if __name__ == "__main__":
    main(sys.argv[1])
