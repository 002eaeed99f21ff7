"""The patterns, one package each: job.py is the query (Kafka to Kafka), solution.py the processors
an exercise asks for, consumer.py the output as a consumer reads it, in_memory.py the stages
without Spark, README.md the pattern's spec page; parts.py gathers the parts joinlab reads.
joinlab finds them through PATTERNS, named in pyproject.toml's `joinlab.patterns` entry point."""

PATTERNS = {  # pattern name -> its parts, simplest first
    "ad-clicks": "jobs.ad_clicks.parts",
    "tweet-views": "jobs.tweet_views.parts",
    "car-pollution": "jobs.car_pollution.parts",
    "lottery": "jobs.lottery.parts",
    "money-enrichment": "jobs.money_enrichment.parts",
}
