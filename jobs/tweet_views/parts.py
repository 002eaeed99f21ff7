"""Tweet views' parts, as joinlab reads them (joinlab.patterns.Job; the registry, jobs/__init__.py,
names this module). Apart from the package's __init__.py, which stays empty: Spark's Python
workers import a processor's module and with it its package, and should import no more."""
from jobs.tweet_views.consumer import actual, version
from jobs.tweet_views.in_memory import STAGES, InMemory
from jobs.tweet_views.job import (DEAD_LETTERS_TOPIC, INPUT_TOPICS, OUTPUT_TOPICS, PROCESSORS, SOLUTION,
                                  TWEETS_TOPIC, USERS_TOPIC, VIEWS_TOPIC, build, query)
from joinlab.patterns import Interview

SPARK_CONF, LOOKUP, SETTINGS = {}, None, ("LAB_TWEET_VIEWS_RETENTION",)
INTERVIEW = Interview(level="1, warm-up", time_box="30-45 min", key="tweet")
