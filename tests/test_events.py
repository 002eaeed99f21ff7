"""The watermark guard of the shared parse (joinlab.kit.events): an event stamped beyond its record's
Kafka timestamp + $LAB_MAX_EVENT_SKEW is dead-lettered, by Spark and by the plain-Python
validator alike, for every pattern's schemas; old data passes unchanged."""
import importlib
import json
from datetime import datetime, timedelta, timezone

import pytest

from joinlab import patterns
from joinlab.kit.events import EVENT_TIME, Skew, parse_events, validate

PRODUCED = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)
PRODUCED_MS = int(PRODUCED.timestamp() * 1000)


def schemas(pattern: str) -> list:
    """The pattern's input schemas with an event time (all of them, today)."""
    return [value for value in vars(patterns.job(pattern)).values()
            if type(value).__name__ == "EventSchema" and EVENT_TIME in value.fields]


def valid_body(schema) -> dict:
    """A body that passes every rule of `schema` but the guard (the generators' first event)."""
    generator = patterns.generator(next(p for p in patterns.PATTERNS if schema.topic in patterns.all_topics(p)))
    from joinlab.generate import Disorder
    records = generator.generate(3, 200, disorder=Disorder())
    for record in records:
        if record.topic == schema.topic and validate(schema, record.value)[1] is None:
            return json.loads(record.value)
    pytest.skip(f"no generated event for {schema.topic}")


def at(body: dict, when: datetime) -> bytes:
    return json.dumps(dict(body, event_time=when.isoformat().replace("+00:00", "Z"))).encode()


def test_the_bound_is_the_records_timestamp_plus_the_skew(monkeypatch):
    monkeypatch.setenv("LAB_MAX_EVENT_SKEW", "10 minutes")
    schema = importlib.import_module("jobs.lottery.job").LOTTERY_EVENTS
    body = {"event_id": "s1", "type": "LotteryStarted", "lottery_id": 1}
    skew = Skew.configured()
    assert skew.reason == ("invalid field: event_time (more than 10 minutes after the record was produced; "
                           "LAB_MAX_EVENT_SKEW)")
    on_the_bound = at(body, PRODUCED + timedelta(minutes=10))
    assert validate(schema, on_the_bound, PRODUCED_MS)[1] is None
    assert validate(schema, at(body, PRODUCED + timedelta(minutes=10, milliseconds=1)), PRODUCED_MS)[1] == skew.reason
    assert validate(schema, at(body, PRODUCED - timedelta(days=400)), PRODUCED_MS)[1] is None, "a backfill"
    assert validate(schema, at(body, PRODUCED + timedelta(days=4000)), None)[1] is None, "no timestamp: no bound"
    monkeypatch.setenv("LAB_MAX_EVENT_SKEW", "soon")
    with pytest.raises(ValueError, match="LAB_MAX_EVENT_SKEW='soon'"):
        Skew.configured()


@pytest.mark.spark
@pytest.mark.parametrize("pattern", list(patterns.PATTERNS))
def test_spark_and_the_references_reject_the_same_future_events(spark, pattern):
    rows, expected = [], []
    for schema in schemas(pattern):
        body = valid_body(schema)
        for offset, when in enumerate([PRODUCED - timedelta(days=30), PRODUCED + timedelta(hours=1),
                                       PRODUCED + timedelta(hours=1, milliseconds=1), PRODUCED + timedelta(days=3650)]):
            value = at(body, when)
            rows.append((None, value, schema.topic, 0, offset, PRODUCED, 0))
            expected.append((schema.topic, offset, validate(schema, value, PRODUCED_MS)[1]))
    raw = spark.createDataFrame(rows, "key binary, value binary, topic string, partition int, offset bigint, "
                                      "timestamp timestamp, timestampType int")
    parsed = parse_events(raw, schemas(pattern), "dlq", job="test")
    letters = {(json.loads(r.value)["source_topic"], json.loads(r.value)["source_offset"]): json.loads(r.value)["reason"]
               for r in parsed.dead_letters.collect()}
    got = [(topic, offset, letters.get((topic, offset))) for topic, offset, _ in expected]
    assert got == expected
    assert [reason for _, offset, reason in expected if offset >= 2] == [Skew.configured().reason] * (2 * len(schemas(pattern)))
    assert all(reason is None for _, offset, reason in expected if offset < 2)
