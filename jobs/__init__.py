"""The patterns, one package each: job.py wires the Spark job (topics, parsing, keying, sink),
solution.py holds the processors an exercise asks for, README.md is the pattern's spec page.
joinlab finds them through PATTERNS, named in pyproject.toml's `joinlab.patterns` entry point."""

PATTERNS = {  # pattern name -> its job module, simplest first
    "ad-clicks": "jobs.ad_clicks.job",
    "tweet-views": "jobs.tweet_views.job",
    "car-pollution": "jobs.car_pollution.job",
    "lottery": "jobs.lottery.job",
    "money-enrichment": "jobs.money_enrichment.job",
}
