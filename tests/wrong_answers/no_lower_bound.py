"""Wrong answer: the range's upper end only ("within a minute" read as "at most a minute after").
Spark starts it, since the impressions' state is still bounded; but a click stamped before its
impression counts, and a click stays in the state for ever (any later impression could match it).
With the lower end, click_time >= impression_time, it passes."""
from pyspark.sql import functions as F


def with_watermarks(impressions, clicks):
    return impressions.withWatermark("impression_time", "10 seconds"), clicks.withWatermark("click_time", "10 seconds")


def join_condition(impressions, clicks):
    return F.expr("""click_impression_id = impression_id AND
                     click_time <= impression_time + INTERVAL 1 MINUTE""")
