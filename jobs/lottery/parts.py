"""Lottery's parts, as joinlab reads them (joinlab.patterns.Job; the registry, jobs/__init__.py,
names this module). Apart from the package's __init__.py, which stays empty: Spark's Python
workers import a processor's module and with it its package, and should import no more."""
from jobs.lottery.consumer import actual, version
from jobs.lottery.in_memory import STAGES, InMemory
from jobs.lottery.job import (DEAD_LETTERS_TOPIC, INPUT_TOPICS, LOTTERY_TOPIC, OUTPUT_TOPICS, PROCESSORS,
                              REJECTIONS_TOPIC, SOLUTION, USER_TOPIC, WINNERS_TOPIC, build, query)
from joinlab.patterns import Interview

SPARK_CONF, LOOKUP, SETTINGS = {}, None, ("LOTTERY_SEED", "LOTTERY_WATERMARK_DELAY")
INTERVIEW = Interview(level="3, event-time rules across two keys", time_box="60-90 min", key="outcome")
