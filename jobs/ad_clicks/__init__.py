"""Ad clicks: job.py is the query (Spark's own join), solution.py the join's two parts, README.md
its spec page. The pattern's parts, as joinlab reads them (joinlab.patterns.Job):"""
from jobs.ad_clicks.consumer import actual, version
from jobs.ad_clicks.in_memory import STAGES, InMemory
from jobs.ad_clicks.job import (CLICKS_TOPIC, DEAD_LETTERS_TOPIC, IMPRESSIONS_TOPIC, INPUT_TOPICS, OUTPUT_TOPIC,
                                OUTPUT_TOPICS, PROCESSORS, SOLUTION, build, query)
from joinlab.patterns import Interview

SPARK_CONF, LOOKUP, SETTINGS = {}, None, ()
INTERVIEW = Interview(level="0, Spark's own join", time_box="20-30 min", key="impression")
