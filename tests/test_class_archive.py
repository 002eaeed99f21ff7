"""The driver JVM maps the class archive `make install` made, and a damaged archive is never put in place."""
import pytest

from joinlab import class_archive


def _driver_jvm(spark) -> tuple[str, str, list[str]]:
    arguments = list(spark._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments())
    return (*class_archive.driver_java(spark), arguments)


@pytest.mark.spark
def test_the_session_maps_the_installed_archive_and_a_jvm_with_its_classpath_accepts_it(spark):
    archive = class_archive.path()
    assert archive.is_file(), "no class archive: run `make install` (or python -m joinlab.class_archive)"
    java, classpath, arguments = _driver_jvm(spark)
    assert f"-XX:SharedArchiveFile={archive}" in arguments
    ok, said = class_archive.accepted(archive, java, classpath)  # -Xshare:on: fails rather than run without
    assert ok, said


@pytest.mark.spark
def test_an_archive_is_put_in_place_only_if_a_jvm_accepts_it(spark, tmp_path, monkeypatch):
    java, classpath, _ = _driver_jvm(spark)
    installed = class_archive.path().read_bytes()
    monkeypatch.setattr(class_archive, "path", lambda: tmp_path / "spark-driver.jsa")
    truncated = tmp_path / "truncated.jsa"
    truncated.write_bytes(installed[:1_000_000])  # a JVM given this one crashes at start
    with pytest.raises(RuntimeError, match="did not accept"):
        class_archive.install(truncated, java, classpath)
    assert not truncated.exists() and not class_archive.path().exists()
    whole = tmp_path / "whole.jsa"
    whole.write_bytes(installed)
    assert class_archive.install(whole, java, classpath) == tmp_path / "spark-driver.jsa"
    assert not whole.exists() and class_archive.path().read_bytes() == installed


def test_turned_off_or_absent_the_driver_gets_no_archive_option(monkeypatch, tmp_path):
    monkeypatch.setenv("LAB_CLASS_ARCHIVE", "off")
    assert class_archive.java_options() == ""
    monkeypatch.delenv("LAB_CLASS_ARCHIVE")
    monkeypatch.setattr(class_archive, "path", lambda: tmp_path / "none.jsa")
    assert class_archive.java_options() == ""
    (tmp_path / "none.jsa").write_bytes(b"x")
    assert class_archive.java_options().startswith(f"-XX:SharedArchiveFile={tmp_path / 'none.jsa'} ")
