"""Ad clicks' row contract: the two sides the job hands the join, the rules it keeps, and the rows it emits."""
from __future__ import annotations

from datetime import timedelta

# The two sides as the join gets them (the job renames the fields so that no column is ambiguous).
IMPRESSION_COLUMNS = ["impression_id", "ad_id", "placement", "impression_time"]
CLICK_COLUMNS = ["click_id", "click_impression_id", "click_time"]
# What the join emits: an impression with its click, or with nulls once no click can come any more.
VIEW = ("impression_id bigint, ad_id bigint, placement string, impression_time timestamp, "
        "click_id bigint, click_time timestamp")

# A click counts for its impression when it happens within ATTRIBUTION after it (both ends included).
ATTRIBUTION = timedelta(minutes=1)
# How far each side's watermark trails the newest event time seen on that side.
DELAY = timedelta(seconds=10)
