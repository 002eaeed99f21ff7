"""Exercise 0 (Spark's own join, 20-30 min): ad clicks. Read ad_clicks.md first (in the lab:
jobs/ad_clicks/README.md, the part above its solution marker).

Write with_watermarks and join_condition. Everything else is given: the job (jobs/ad_clicks/job.py)
parses both topics, sends malformed records to the dead-letter topic, and runs Spark's own
stream-stream join, impressions LEFT OUTER JOIN clicks:

    impressions, clicks = with_watermarks(impressions, clicks)
    joined = impressions.join(clicks, join_condition(impressions, clicks), "leftOuter")

Both sides are streaming DataFrames with the columns of IMPRESSION_COLUMNS and CLICK_COLUMNS (in
given.py, beside the job), renamed so that no column is ambiguous:

    impressions   impression_id (bigint), ad_id (bigint), placement (string), impression_time (timestamp)
    clicks        click_id (bigint), click_impression_id (bigint: the impression clicked), click_time (timestamp)

The rules (given.py): a click counts for its impression when it happens within ATTRIBUTION (one
minute) after it, both ends included; each side's watermark trails the newest event time seen on
that side by DELAY (10 seconds). What comes out, to the ad-clicks topic keyed by impression_id:
each impression with its click, or with a null click once no click can come any more. A consumer
keeps, per impression, a click over none, and of two clicks the later one.

Spark checks the query as it starts, and refuses a left outer join it cannot bound with an
AnalysisException: the grader shows it as your code's error. What you may need (functions as F:
`from pyspark.sql import functions as F`):

    frame.withWatermark("some_time", "5 seconds")    # the frame, with an event-time watermark on a column
    F.expr("a = b AND x <= y + INTERVAL 5 SECONDS")  # a condition in SQL, over both sides' columns
    (F.col("a") == F.col("b")) & (F.col("x") <= F.col("y") + F.expr("INTERVAL 5 SECONDS"))  # the same, as Columns

Grade it: `make check-fast`, then `make check` (in a workspace), or in the lab
`joinlab interview check ad-clicks --solution THIS_FILE`.
"""
from __future__ import annotations

from pyspark.sql import Column, DataFrame


def with_watermarks(impressions: DataFrame, clicks: DataFrame) -> tuple[DataFrame, DataFrame]:
    # TODO: give each side its event-time watermark (the rules above).
    return impressions, clicks


def join_condition(impressions: DataFrame, clicks: DataFrame) -> Column:
    # TODO: return the join condition: which click belongs to which impression, and when.
    raise NotImplementedError("join_condition: which click is whose impression, and when (ad_clicks.md)")
