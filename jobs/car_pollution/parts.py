"""Car pollution's parts, as joinlab reads them (joinlab.patterns.Job; the registry, jobs/__init__.py,
names this module). Apart from the package's __init__.py, which stays empty: Spark's Python
workers import a processor's module and with it its package, and should import no more."""
from jobs.car_pollution.consumer import actual, version
from jobs.car_pollution.in_memory import STAGES, InMemory
from jobs.car_pollution.job import (ARRIVALS_TOPIC, DEAD_LETTERS_TOPIC, INPUT_TOPICS, OUTPUT_TOPIC, OUTPUT_TOPICS,
                                    PROCESSORS, READINGS_TOPIC, SOLUTION, build, query)
from joinlab.patterns import Interview

SPARK_CONF, LOOKUP, SETTINGS = {}, None, ()
INTERVIEW = Interview(level="2, one-to-many", time_box="45-60 min", key="car")
