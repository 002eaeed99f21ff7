"""Car pollution: job.py is the query, solution.py its processors, README.md its spec page. The
pattern's parts, as joinlab reads them (joinlab.patterns.Job):"""
from jobs.car_pollution.consumer import actual, version
from jobs.car_pollution.in_memory import STAGES, InMemory
from jobs.car_pollution.job import (ARRIVALS_TOPIC, DEAD_LETTERS_TOPIC, INPUT_TOPICS, OUTPUT_TOPIC, OUTPUT_TOPICS,
                                    PROCESSORS, READINGS_TOPIC, SOLUTION, build, query)
from joinlab.patterns import Interview

SPARK_CONF, LOOKUP, SETTINGS = {}, None, ()
INTERVIEW = Interview(level="2, one-to-many", time_box="45-60 min", key="car")
