"""Car pollution: a one-to-many join (many cars in one zone) that stays right while cars move.

The query, top down: the topics and their schemas; how the first stage keys them (ROUTES); `build`,
its heart: parse each record (joinlab.kit.events), shuffle the events by the first stage's key,
group them by car, then by zone, through the two processors (solution.py), and write views and dead
letters. Last, `query`, Kafka to Kafka, which runs it. The row contract is given.py; the output as a
consumer reads it, consumer.py; the stages in memory, in_memory.py. One record's trip through it,
its key and what each stage keeps: README.md, "One record's trip".
"""
from __future__ import annotations

from types import ModuleType

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import DataStreamWriter

from jobs.car_pollution.given import EVENT_COLUMNS, OP, VIEW
from joinlab.kit import solutions
from joinlab.kit.events import Check, EventSchema, Route, parse_events, route_columns
from joinlab.kit.kafka import Kafka

ARRIVALS_TOPIC, READINGS_TOPIC = "car-arrivals", "zone-readings"
OUTPUT_TOPIC, DEAD_LETTERS_TOPIC = "car-pollution", "car-pollution-dlq"
INPUT_TOPICS = [ARRIVALS_TOPIC, READINGS_TOPIC]
OUTPUT_TOPICS = [OUTPUT_TOPIC, DEAD_LETTERS_TOPIC]

_SEQ = Check("seq >= 1", lambda e: e["seq"] >= 1, "invalid field: seq (must be >= 1)")
ARRIVALS = EventSchema(ARRIVALS_TOPIC, {"car_id": "bigint", "plate": "string", "to_zone_id": "bigint",
                                        "fuel_level": "double", "seq": "bigint", "event_time": "timestamp"},
                       checks=(_SEQ,))
READINGS = EventSchema(READINGS_TOPIC, {"zone_id": "bigint", "pollution_level": "double", "seq": "bigint",
                                        "event_time": "timestamp"}, checks=(_SEQ,))

KEY = ("entity", "entity_id")  # the first stage's key: a car's arrivals by car, a zone's readings by zone
ROUTES = [Route(ARRIVALS, "car", "car_id"), Route(READINGS, "zone", "zone_id")]

# The processors a solution module defines: the lab's (solution.py), or a candidate's of those names.
SOLUTION, PROCESSORS = "jobs.car_pollution.solution", ("CarMovesProcessor", "ZoneCarsProcessor")


def output_records(views: DataFrame) -> DataFrame:
    """Views (VIEW's columns) as the output topic's records, keyed by car."""
    value = F.to_json(F.struct(*views.columns), {"ignoreNullFields": "false"})
    return views.select(F.lit(OUTPUT_TOPIC).alias("topic"), F.col("car_id").cast("string").alias("key"),
                        value.alias("value"))


def build(raw: DataFrame, solution: ModuleType | None = None) -> DataFrame:
    """Kafka records in (the connector's columns), Kafka records (topic, key, value) out."""
    parsed = parse_events(raw, [ARRIVALS, READINGS], DEAD_LETTERS_TOPIC, job="car-pollution")
    by_entity = parsed.shuffle(route_columns(ROUTES, KEY))  # the query's first shuffle: the first stage's key
    processors = solutions.of(SOLUTION, PROCESSORS, solution)  # the lab's, or a candidate's module
    # By car: a move becomes DEL (old zone) and ADD (new zone). A zone's readings pass through as
    # READING rows, so the zone stage gets one frame of all events and Kafka is read once.
    moves = (by_entity.events.select(*EVENT_COLUMNS)
             .groupBy(*KEY)
             .transformWithState(processors.CarMovesProcessor(), OP, "Append", "None"))
    # By zone (the second shuffle): the zone's cars and its latest reading; a view per change.
    views = (moves
             .groupBy("zone_id")
             .transformWithState(processors.ZoneCarsProcessor(), VIEW, "Append", "None"))
    return output_records(views).unionByName(by_entity.dead_letters)


def query(spark: SparkSession, kafka: Kafka, solution: ModuleType | None = None) -> DataStreamWriter:
    """The job: its topics read, `build`, the rows written to the topics they name."""
    raw = spark.readStream.format("kafka").options(**kafka.source(INPUT_TOPICS)).load()
    out = build(kafka.incoming(raw), solution)
    return kafka.outgoing(out).writeStream.format("kafka").options(**kafka.sink()).outputMode("append")
