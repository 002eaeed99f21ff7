"""Wrong answer: the condition of an inner join, the ids alone, with no time range. Spark refuses
the left outer join when the query starts: without a range it could never tell that no click can
come any more, so it could neither drop an impression from its state nor emit it unclicked."""
from pyspark.sql import functions as F


def with_watermarks(impressions, clicks):
    return impressions.withWatermark("impression_time", "10 seconds"), clicks.withWatermark("click_time", "10 seconds")


def join_condition(impressions, clicks):
    return F.expr("click_impression_id = impression_id")
