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


def with_watermarks(impressions: DataFrame, clicks: DataFrame) -> tuple[DataFrame, DataFrame]:
    """Each side with its event-time watermark: 10 seconds behind the newest event time seen on it."""
    return (impressions.withWatermark("impression_time", "10 seconds"),
            clicks.withWatermark("click_time", "10 seconds"))


def join_condition(impressions: DataFrame, clicks: DataFrame) -> Column:
    """A click of this impression, within a minute after it (both ends included): the range that
    lets Spark drop an impression's state, and emit it unclicked, once the watermark passes it."""
    return F.expr("""click_impression_id = impression_id AND
                     click_time >= impression_time AND
                     click_time <= impression_time + INTERVAL 1 MINUTE""")
