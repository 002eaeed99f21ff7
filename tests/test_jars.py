"""The JVM parts fetched with Maven (joinlab.jars): what the cache holds, and a failed fetch that
names what it could not fetch and leaves nothing behind."""
import pytest

from joinlab import jars
from joinlab.jars import Bundle, JarsError


def test_the_installed_bundles_hold_the_broker_and_spark_s_own_connector_for_the_installed_pyspark():
    names = {p.name for p in jars.jars(jars.kafka_bundle())}
    assert f"kafka_2.13-{jars.KAFKA_VERSION}.jar" in names and f"kafka-clients-{jars.KAFKA_VERSION}.jar" in names
    assert f"log4j-slf4j-impl-{jars.LOG4J_VERSION}.jar" in names  # the binding the POM leaves out
    connector = {p.name for p in jars.jars(jars.connector_bundle())}
    spark = jars.spark_version()
    assert connector == {f"spark-sql-kafka-0-10_2.13-{spark}.jar", f"spark-token-provider-kafka-0-10_2.13-{spark}.jar",
                         f"kafka-clients-{jars.CONNECTOR_KAFKA_CLIENTS}.jar",
                         f"commons-pool2-{jars.CONNECTOR_COMMONS_POOL2}.jar"}


def test_a_failed_fetch_names_what_could_not_be_fetched_and_leaves_nothing_in_the_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("LAB_JARS", str(tmp_path / "cache"))
    bogus = Bundle("bogus", "0", ("org.apache.kafka:kafka-clients:0.0.0-no-such-version",), transitive=False)
    with pytest.raises(JarsError, match=r"Maven could not fetch bogus \(org\.apache\.kafka:kafka-clients:0\.0\.0-no-such-version\)"):
        jars.fetch(bogus)
    assert list((tmp_path / "cache").iterdir()) == []  # neither the bundle nor a half-written folder
    with pytest.raises(JarsError, match="bogus 0 is not in the jar cache .*`make install`"):
        jars.jars(bogus)


def test_without_mvn_the_install_says_what_it_could_not_fetch_and_the_ways_without_it(monkeypatch, tmp_path):
    monkeypatch.setenv("LAB_JARS", str(tmp_path / "cache"))
    with pytest.raises(JarsError, match=r"`no-such-mvn` is not on PATH, so kafka .*kafka_2\.13.*docs/kafka\.md"):
        jars.fetch(jars.kafka_bundle(), mvn="no-such-mvn")
