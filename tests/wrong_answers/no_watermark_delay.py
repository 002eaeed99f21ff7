"""Wrong answer: watermarks with no delay ("the freshest results"). Each side's watermark is then its
newest event time, so a click read after a newer event is late and dropped, though the rules allow
10 s of disorder; with "10 seconds" it passes."""
from pyspark.sql import functions as F

DELAY = "0 seconds"


def with_watermarks(impressions, clicks):
    return impressions.withWatermark("impression_time", DELAY), clicks.withWatermark("click_time", DELAY)


def join_condition(impressions, clicks):
    return F.expr("""click_impression_id = impression_id AND
                     click_time BETWEEN impression_time AND impression_time + INTERVAL 1 MINUTE""")
