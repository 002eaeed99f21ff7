"""Wrong answer: a watermark on the clicks only, what Spark's refusal of the join asks for ("a
watermark on the nullable side and an appropriate range condition"). Spark starts it, but the join
gets a watermark only when both its inputs have one: it drops no late click, keeps every row of
both sides for ever, and never emits an impression unclicked."""
from pyspark.sql import functions as F


def with_watermarks(impressions, clicks):
    return impressions, clicks.withWatermark("click_time", "10 seconds")


def join_condition(impressions, clicks):
    return F.expr("""click_impression_id = impression_id AND
                     click_time BETWEEN impression_time AND impression_time + INTERVAL 1 MINUTE""")
