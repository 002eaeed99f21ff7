"""Ad clicks, the solution: the two parts of Spark's stream-stream join a candidate writes. The
job (jobs/ad_clicks/job.py) joins `impressions` LEFT OUTER to `clicks` on join_condition, after
with_watermarks.

Why both parts: Spark keeps every row of both sides in state until the watermark and the
condition's time bound prove that no future row of the other side can match it. The watermarks
say how late a row may still arrive; the range in the condition says how far apart in event time
two matching rows can be. Without the range, state grows for ever (an inner join) or Spark
refuses the outer join; without a watermark on the clicks, it cannot drop an impression and so
never emits the unclicked ones.
"""
from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from jobs.ad_clicks.given import ATTRIBUTION, DELAY


def with_watermarks(impressions: DataFrame, clicks: DataFrame) -> tuple[DataFrame, DataFrame]:
    """Each side with its event-time watermark: DELAY behind the newest event time seen on it."""
    delay = f"{DELAY.total_seconds():.0f} seconds"
    return impressions.withWatermark("impression_time", delay), clicks.withWatermark("click_time", delay)


def join_condition(impressions: DataFrame, clicks: DataFrame) -> Column:
    """A click of this impression, within ATTRIBUTION after it (both ends included): the range that
    lets Spark drop an impression's state, and emit it unclicked, once the watermark passes it."""
    impression_time = F.col("impression_time")
    return ((F.col("click_impression_id") == F.col("impression_id"))
            & F.col("click_time").between(impression_time, impression_time + F.lit(ATTRIBUTION)))
