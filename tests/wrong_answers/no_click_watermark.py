"""Wrong answer: a watermark on the impressions only. The clicks are the join's nullable side: with
no watermark on them Spark cannot tell when an impression's clicks are all in, and refuses the left
outer join when the query starts."""
from pyspark.sql import functions as F


def with_watermarks(impressions, clicks):
    return impressions.withWatermark("impression_time", "10 seconds"), clicks


def join_condition(impressions, clicks):
    return F.expr("""click_impression_id = impression_id AND
                     click_time BETWEEN impression_time AND impression_time + INTERVAL 1 MINUTE""")
