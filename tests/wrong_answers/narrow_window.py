"""Wrong answer: the watermark's 10 s delay taken for the attribution window. A click 56 s after its
impression matches nothing; replace 10 SECONDS by 1 MINUTE in the condition and it passes."""
from pyspark.sql import functions as F


def with_watermarks(impressions, clicks):
    return impressions.withWatermark("impression_time", "10 seconds"), clicks.withWatermark("click_time", "10 seconds")


def join_condition(impressions, clicks):
    return F.expr("""click_impression_id = impression_id AND
                     click_time BETWEEN impression_time AND impression_time + INTERVAL 10 SECONDS""")
