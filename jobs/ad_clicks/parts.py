"""Ad clicks' parts, as joinlab reads them (joinlab.patterns.Job; the registry, jobs/__init__.py,
names this module). Apart from the package's __init__.py, which stays empty: Spark's Python
workers import a processor's module and with it its package, and should import no more."""
from jobs.ad_clicks.consumer import actual, version
from jobs.ad_clicks.in_memory import STAGES, InMemory
from jobs.ad_clicks.job import (CLICKS_TOPIC, DEAD_LETTERS_TOPIC, IMPRESSIONS_TOPIC, INPUT_TOPICS, OUTPUT_TOPIC,
                                OUTPUT_TOPICS, PROCESSORS, SOLUTION, build, query)
from joinlab.patterns import Interview

SPARK_CONF, LOOKUP, SETTINGS = {}, None, ()
INTERVIEW = Interview(level="0, Spark's own join", time_box="20-30 min", key="impression")
