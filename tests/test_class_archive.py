"""Spark's classes from one shared archive (joinlab.class_archive): it fits one Java and one set of
jars, on a cluster only, and a JVM accepts the one `make install` made. Every Spark JVM of the native
stack maps it: tests/test_lab_stack.py."""
from __future__ import annotations

from pathlib import Path

import pytest

from joinlab import class_archive
from joinlab import spark as lab_spark
from tests.server_side import server_jvm


@pytest.fixture
def jars(tmp_path, monkeypatch):
    """A Spark jars folder of our own, and the archives' folder in tmp_path."""
    folder = tmp_path / "spark-jars"
    folder.mkdir()
    (folder / "spark-core.jar").write_bytes(b"core")
    monkeypatch.setattr(class_archive, "_spark_jars", lambda: folder)
    monkeypatch.setattr(class_archive, "folder", lambda: tmp_path / "archives")
    return folder


def test_an_archive_is_named_by_its_java_and_jars_and_used_only_once_made(jars, monkeypatch):
    archive = class_archive.path()
    assert archive.parent == jars.parent / "archives"
    assert class_archive.java_options() == "", "no option while the archive is not made"
    archive.parent.mkdir(parents=True)
    archive.write_bytes(b"made")
    assert class_archive.java_options() == f"-XX:SharedArchiveFile={archive} {class_archive.AT_ITS_ADDRESS}"
    cluster, local = lab_spark.driver_java_options("spark://127.0.0.1:7077"), lab_spark.driver_java_options("local[2]")
    assert class_archive.java_options() in cluster and class_archive.java_options() in lab_spark.executor_java_options()
    assert "SharedArchiveFile" not in local, "a local session runs without the archive (docs/operations.md#memory)"
    (jars / "spark-core.jar").write_bytes(b"core, another build")  # another Spark: another archive
    assert class_archive.path() != archive and class_archive.java_options() == ""
    monkeypatch.setenv("JAVA_HOME", str(jars.parent / "no-jdk"))  # another Java (here none): none
    assert class_archive.path() is None and class_archive.java_options() == ""


def test_check_says_what_to_run_when_the_archive_is_missing(jars, capsys):
    assert class_archive.main(["--check"]) == 1
    assert "make install" in capsys.readouterr().err


@pytest.mark.spark
def test_the_archive_make_install_made_is_one_a_jvm_of_the_sessions_class_path_accepts(spark):
    """-Xshare:on fails rather than start without it. The stack's JVMs map it: tests/test_lab_stack.py."""
    archive = class_archive.path()
    assert archive.is_file(), f"no class archive at {archive}: `make install` makes it"
    server = server_jvm()  # the session's Connect server: this process's child, on the lab's class path
    line = server.cmdline()
    java, classpath = Path(server.exe()), line[line.index("-cp") + 1]
    assert str(class_archive._spark_jars()) in classpath, classpath  # Spark's jars, as the server loads them
    assert class_archive.refusal(archive, java, classpath) == ""
