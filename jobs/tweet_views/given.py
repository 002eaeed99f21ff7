"""Tweet views' row contract: what the job hands the processor, and what the processor emits."""
from __future__ import annotations

import os
from datetime import timedelta

from joinlab.config import duration_ms

# One input row shape for both sides, grouped by author: side is "user" or "tweet".
EVENT_COLUMNS = ["side", "user_id", "version", "event_time", "tweet_id", "text", "name", "handle"]
# What the processor emits: one row per view.
VIEW = ("tweet_id bigint, tweet_version bigint, text string, tweet_time timestamp, "
        "user_id bigint, user_version bigint, name string, handle string, user_time timestamp")


def retention() -> timedelta:
    """How far (event time) behind the author's newest event an author's tweets are kept, and so
    still get the author's profile updates: $LAB_TWEET_VIEWS_RETENTION, default 30 days."""
    return timedelta(milliseconds=duration_ms(os.environ.get("LAB_TWEET_VIEWS_RETENTION", "30 days"),
                                              "LAB_TWEET_VIEWS_RETENTION"))
