"""Money enrichment's parts, as joinlab reads them (joinlab.patterns.Job; the registry, jobs/__init__.py,
names this module). Apart from the package's __init__.py, which stays empty: Spark's Python
workers import a processor's module and with it its package, and should import no more."""
from jobs.money_enrichment.consumer import actual, version
from jobs.money_enrichment.in_memory import STAGES, InMemory
from jobs.money_enrichment.job import (DEAD_LETTERS_TOPIC, ENRICHED_TOPIC, INPUT_TOPICS, OUTPUT_TOPICS, PROCESSORS,
                                       SESSIONS, SESSIONS_TOPIC, SOLUTION, TRANSACTIONS_TOPIC, USERS_TOPIC, build,
                                       query)
from joinlab.patterns import Interview, Lookup

# Avro-encoded state: a field added to a stored value (the user) is read as NULL from old entries
# on restart; Spark's default encoding refuses the changed schema (README.md). Fixed when a
# checkpoint is created; joinlab.runner.start applies it.
SPARK_CONF = {"spark.sql.streaming.stateStore.encodingFormat": "avro"}
SETTINGS = ("MONEY_WATERMARK_DELAY", "MONEY_SESSION_DURATION", "MONEY_WAIT_LIMIT", "MONEY_DEDUP_HORIZON",
            "MONEY_USERS_SNAPSHOT")
INTERVIEW = Interview(level="4, the hard one", time_box="90 min", key="transaction")
LOOKUP = Lookup(SESSIONS, "session_id")  # what arrives after its session left state is enriched by asking
