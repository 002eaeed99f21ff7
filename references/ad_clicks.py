"""The right answer for ad clicks, in plain Python from the input topics: Spark's left outer
stream-stream join with its watermarks (jobs/ad_clicks/given.py's rules), one record at a time in
arrival order, no micro-batches.

- A row is late, and Spark's join drops it, when on arrival the watermark already passed it (its
  event time at or behind it). The watermark is the smaller of the two sides' (the newest event time
  of the side's earlier records - DELAY): Spark takes the minimum across its inputs by default, and
  an input with no events yet counts as 0, so nothing is late before both sides have events. The job knows the watermark per micro-batch, the reference
  per record (records sent strictly earlier, by Kafka timestamp, or by list position for generated
  records): where no record is late per record, none is late per micro-batch either, and the two
  agree exactly. The tests keep disorder within the delay, and send a late event only after the
  job has moved past it.
- A clicked impression: every on-time click of it within ATTRIBUTION after it is a match (Spark
  emits each); a consumer keeps the last by version (consumer.version: the latest click).
- An unclicked impression comes out only once the final watermark is past its event time +
  ATTRIBUTION by a millisecond or more (Spark's state cleanup predicate: impression_time <= watermark
  - 1 minute - 1 ms); before that a click could still come. Impressions after that point are undecided and
  not expected yet.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from references import join_watermarks
from jobs.ad_clicks.given import ATTRIBUTION, DELAY
from jobs.ad_clicks.job import CLICKS, IMPRESSIONS
from jobs.ad_clicks.consumer import actual, version, view  # noqa: F401 (the output contract)

_MICRO = timedelta(microseconds=1)
DELAY_US, ATTRIBUTION_US = DELAY // _MICRO, ATTRIBUTION // _MICRO


@dataclass
class Arrival:
    """One valid event as the join sees it: its side, its event time (us), and the watermark (us;
    None before any event) when it arrived."""
    topic: str
    event: dict
    t_us: int
    watermark_us: int | None

    @property
    def late(self) -> bool:
        return self.watermark_us is not None and self.t_us <= self.watermark_us


def arrivals(records: list) -> tuple[list[Arrival], int | None]:
    """Every valid event in arrival order with the watermark it met, and the final watermark (us).
    Arrival is the Kafka timestamp where a record has one (records read back from topics), else its
    position (a generator's records); records of one timestamp arrive together, none before another,
    as one micro-batch."""
    groups: dict[int, list] = {}
    for index, record in enumerate(records):
        groups.setdefault(getattr(record, "timestamp_ms", index), []).append(record)
    found, final = join_watermarks([groups[t] for t in sorted(groups)], [IMPRESSIONS, CLICKS], DELAY_US // 1000)
    return [Arrival(schema.topic, event, t_us, mark) for _, schema, event, t_us, mark in found], final


def expected(records: list) -> dict[int, dict]:
    """impression_id -> the view a consumer of the output topic ends with."""
    found, final = arrivals(records)
    on_time = [a for a in found if not a.late]
    clicks: dict[int, list[dict]] = {}
    for a in on_time:
        if a.topic == CLICKS.topic:
            clicks.setdefault(a.event["impression_id"], []).append(a)
    views: dict[int, dict] = {}
    for a in on_time:
        if a.topic != IMPRESSIONS.topic:
            continue
        impression = a.event
        matches = [c for c in clicks.get(impression["impression_id"], [])
                   if a.t_us <= c.t_us <= a.t_us + ATTRIBUTION_US]
        if matches:
            candidates = [_view(impression, c.event) for c in matches]
        elif final is not None and a.t_us + ATTRIBUTION_US <= final - 1000:  # Spark's state cleanup predicate
            candidates = [_view(impression, None)]
        else:
            continue  # undecided: a click may still come
        best = max(candidates, key=version)
        current = views.get(impression["impression_id"])
        if current is None or version(best) > version(current):
            views[impression["impression_id"]] = best
    return views


def _view(impression: dict, click: dict | None) -> dict:
    return view({"impression_id": impression["impression_id"], "ad_id": impression["ad_id"],
                 "placement": impression["placement"], "impression_time": impression["event_time"],
                 "click_id": None if click is None else click["click_id"],
                 "click_time": None if click is None else click["event_time"]})


def late(records: list) -> list[Arrival]:
    """The events Spark's join drops: behind the watermark when they arrived."""
    return [a for a in arrivals(records)[0] if a.late]


def final_watermark_ms(records: list) -> int | None:
    """The watermark after which the job has decided every impression of `records` it can."""
    final = arrivals(records)[1]
    return None if final is None else final // 1000


def notes(records: list) -> list[str]:
    """How the output records were made: clicked impressions, and those emitted unclicked."""
    views = actual(records)
    clicked = sum(v["click_id"] is not None for v in views.values())
    return [f"{clicked} impressions with their click, {len(views) - clicked} emitted unclicked "
            f"(once the watermark passed them by {ATTRIBUTION.total_seconds():.0f} s)"] if views else []
