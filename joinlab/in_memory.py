"""Each pattern's stages chained and keyed as its query chains them, through pyspark's in-memory
TwsTester: no Spark session, no broker. The unit tests and the interview grader drive a
solution module's processors through these, one micro-batch at a time.

A pipeline takes input records (read back from topics, or made to be sent) as the rows its first
stage gets (`rows`), runs micro-batches of them (`batch`, `run`), and reads its output rows as a
consumer of the output topic would (`views`: the last view per key, in the shape of the job's
`actual`). Event-time pipelines model Spark's watermark: a batch's watermark is the newest event
time of the batches before it minus the delay, and after the input Spark runs one batch without
data to fire what the final watermark has made due.
"""
from __future__ import annotations

import json
from collections import namedtuple
from datetime import datetime
from types import ModuleType
from typing import Callable

from pyspark.sql import Row
from pyspark.sql.streaming.tws_tester import TwsTester

from joinlab import solutions
from joinlab.events import micros, moment, valid_events

NEVER_LATE = 2 ** 62  # a first stage's input has no watermark column, so Spark filters nothing there
Found = namedtuple("Found", "session error attempts")  # a lookup's result, as joinlab.lookup gives it


def _keys(rows: list[Row], key: Callable) -> list:
    return list(dict.fromkeys(key(r) for r in rows))


def _feed(tester: TwsTester, rows: list[Row], key: Callable) -> list[Row]:
    """One handleInputRows call per grouping key, in the order the keys first came."""
    out = []
    for k in _keys(rows, key):
        out += tester.test(k, [r for r in rows if key(r) == k])
    return out


def _out_ms(row) -> int:
    return int(row.out_time.timestamp() * 1000)


def last_by_version(views: list[dict], key: str, version: Callable[[dict], tuple]) -> dict:
    """key -> the view a consumer keeps: the highest version, the first one among equals (as the
    jobs' `actual` reads the output topic)."""
    kept: dict = {}
    for view in views:
        current = kept.get(view[key])
        if current is None or version(view) > version(current):
            kept[view[key]] = view
    return kept


class _EventTime:
    """The watermark of a chain of event-time stages, micro-batch by micro-batch."""

    def __init__(self, delay_ms: int):
        self.delay_ms, self.watermark, self.newest_ms = delay_ms, 0, None

    def next(self, watermark: int | None) -> int:
        """This batch's watermark: as given, else newest event time of earlier batches - delay."""
        if watermark is None and self.newest_ms is not None:
            watermark = max(self.watermark, self.newest_ms - self.delay_ms)
        return self.watermark if watermark is None else watermark

    def done(self, watermark: int, rows: list[Row]) -> None:
        self.watermark = watermark
        if rows:
            newest = max(r.t_us for r in rows) // 1000
            self.newest_ms = newest if self.newest_ms is None else max(self.newest_ms, newest)


# --- Tweet views ------------------------------------------------------------------------------------

class TweetViews:
    """Both sides grouped by author, as jobs.tweet_views.join_views groups them."""

    def __init__(self, solution: ModuleType | None = None):
        import jobs.tweet_views as job
        self.job = job
        self.views_processor = TwsTester(solutions.of(job.SOLUTION, job.PROCESSORS, solution).TweetViewsProcessor())

    def rows(self, records) -> list[Row]:
        job = self.job
        out = []
        for schema, e in valid_events(records, [job.USERS, job.TWEETS]):
            is_user = schema is job.USERS
            out.append(Row(**dict(zip(job.SIDE_COLUMNS, (
                "user" if is_user else "tweet", e["user_id"], e["version"], moment(micros(e["event_time"])),
                None if is_user else e["tweet_id"], None if is_user else e["text"],
                e["name"] if is_user else None, e["handle"] if is_user else None)))))
        return out

    def batch(self, rows: list[Row]) -> list[Row]:
        return _feed(self.views_processor, rows, lambda r: r.user_id)

    def run(self, batches: list[list[Row]]) -> list[Row]:
        return [out for rows in batches for out in self.batch(rows)]

    def views(self, out: list[Row]) -> dict:
        return last_by_version([r.asDict() for r in out], "tweet_id", self.job.version)


# --- Car pollution ----------------------------------------------------------------------------------

class CarPollution:
    """Stage 1 per (entity, id), then stage 2 per zone, as jobs.car_pollution.join_cars_to_zones."""

    def __init__(self, solution: ModuleType | None = None):
        import jobs.car_pollution as job
        stages = solutions.of(job.SOLUTION, job.PROCESSORS, solution)
        self.job = job
        self.moves, self.zones = TwsTester(stages.CarMovesProcessor()), TwsTester(stages.ZoneCarsProcessor())

    def rows(self, records) -> list[Row]:
        job = self.job
        out = []
        for schema, e in valid_events(records, [job.ARRIVALS, job.READINGS]):
            at = moment(micros(e["event_time"]))
            if schema is job.ARRIVALS:
                out.append(arrival_row(e["car_id"], e["to_zone_id"], e["seq"], e["fuel_level"], at, e["plate"]))
            else:
                out.append(reading_row(e["zone_id"], e["seq"], e["pollution_level"], at))
        return out

    def batch(self, rows: list[Row]) -> list[Row]:
        ops = _feed(self.moves, rows, lambda r: (r.entity, r.entity_id))
        return _feed(self.zones, ops, lambda r: r.zone_id)

    def run(self, batches: list[list[Row]]) -> list[Row]:
        return [out for rows in batches for out in self.batch(rows)]

    def views(self, out: list[Row]) -> dict:
        job = self.job
        return last_by_version([job.view(
            r.op, r.car_id, r.car_seq, r.plate, r.zone_id, r.fuel_level, r.car_time,
            None if r.reading_seq is None else {"seq": r.reading_seq, "pollution_level": r.pollution_level,
                                                "event_time": r.reading_time}) for r in out],
            "car_id", job.version)


def arrival_row(car: int, zone: int, seq: int, fuel: float, at: datetime, plate: str | None = None) -> Row:
    """A car's arrival as stage 1 gets it (keyed by ("car", car_id))."""
    return Row(entity="car", entity_id=car, car_id=car, plate=plate or f"P-{car}", to_zone_id=zone,
               fuel_level=fuel, zone_id=None, pollution_level=None, seq=seq, event_time=at)


def reading_row(zone: int, seq: int, level: float, at: datetime) -> Row:
    """A zone's reading as stage 1 gets it (keyed by ("zone", zone_id))."""
    return Row(entity="zone", entity_id=zone, car_id=None, plate=None, to_zone_id=None, fuel_level=None,
               zone_id=zone, pollution_level=level, seq=seq, event_time=at)


# --- Lottery ----------------------------------------------------------------------------------------

class Lottery:
    """The three stages, chained and keyed as in jobs.lottery.decide. Stage 1's watermark is the
    batch's; stages 2 and 3 take their input first and then fire their timers (Spark handles a
    batch's input before its timers)."""

    def __init__(self, solution: ModuleType | None = None, seed: int | None = None, delay_ms: int | None = None):
        import jobs.lottery as job
        from jobs.lottery_rules import settings
        from jobs.lottery_stages import Draw
        stages = solutions.of(job.SOLUTION, job.PROCESSORS, solution)
        config = settings() if seed is None or delay_ms is None else None
        self.job, self.seed = job, config.seed if seed is None else seed
        self.gate = TwsTester(stages.LotteryGate(), timeMode="EventTime", eventTimeExtractor=lambda r: NEVER_LATE)
        self.coupons = TwsTester(stages.Coupons(), timeMode="EventTime", eventTimeExtractor=_out_ms)
        self.draw = TwsTester(Draw(self.seed), timeMode="EventTime", eventTimeExtractor=_out_ms)
        self.clock = _EventTime(config.watermark_delay_ms if delay_ms is None else delay_ms)

    def rows(self, records) -> list[Row]:
        from jobs.lottery_rules import CLICKED
        job = self.job
        out = []
        for schema, e in valid_events(records, [job.LOTTERY_EVENTS, job.USER_EVENTS]):
            by_lottery = schema is job.LOTTERY_EVENTS or e["type"] == CLICKED
            out.append(lottery_event_row(e["event_id"], e["type"], micros(e["event_time"]), e.get("lottery_id"),
                                         e.get("user_id"), e.get("amount"), by_lottery))
        return out

    @staticmethod
    def _advance(tester, watermark) -> list[Row]:
        return tester.setWatermark(watermark) if watermark > tester._currentWatermarkMs else []

    def batch(self, rows: list[Row], watermark: int | None = None) -> list[Row]:
        """One micro-batch; its watermark is the newest event time of earlier batches - delay."""
        watermark = self.clock.next(watermark)
        key = lambda r: (r.entity, r.entity_id)  # noqa: E731
        out1 = self._advance(self.gate, watermark) + _feed(self.gate, rows, key)
        out2 = _feed(self.coupons, out1, key) + self._advance(self.coupons, watermark)
        out3 = _feed(self.draw, out2, key) + self._advance(self.draw, watermark)
        self.clock.done(watermark, rows)
        return out3

    def run(self, batches: list[list[Row]]) -> list[Row]:
        """Every batch, then the no-data batch Spark runs when the watermark has moved."""
        out = [row for rows in batches for row in self.batch(rows)]
        return out + self.batch([])

    def views(self, out: list[Row]) -> dict:
        """The job's outcome rows as the output topics' views, by the same keys as jobs.lottery.actual."""
        from jobs.lottery_rules import WINDOW_US
        from jobs.lottery_stages import WINNER
        views: dict = {}
        for r in out:
            if r.kind == WINNER:
                start = moment(r.window_start_us)
                key, view = self.job.winner_key(r.lottery_id, start), {
                    "lottery_id": r.lottery_id, "window_start": start,
                    "window_end": moment(r.window_start_us + WINDOW_US), "winner_user_id": r.winner_user_id,
                    "winning_event_id": r.winning_event_id, "entrants": r.entrants, "seed": r.seed}
            else:
                key, view = f"rejection {r.event_id}", {
                    "event_id": r.event_id, "type": r.type, "event_time": moment(r.t_us), "lottery_id": r.lottery_id,
                    "user_id": r.user_id, "amount": r.amount, "rule": r.rule, "message": r.message}
            views[key] = view if views.get(key, view) == view else {"conflicting": [views[key], view]}
        return views


def lottery_event_row(event_id: str, kind: str, t_us: int, lottery_id=None, user_id=None, amount=None,
                      by_lottery: bool | None = None) -> Row:
    """A valid event as stage 1 gets it: starts and clicks keyed by lottery, purchases by user."""
    from jobs.lottery_rules import BOUGHT
    from jobs.lottery_stages import LOTTERY, USER
    by_lottery = kind != BOUGHT if by_lottery is None else by_lottery
    return Row(entity=LOTTERY if by_lottery else USER, entity_id=lottery_id if by_lottery else user_id,
               event_id=event_id, type=kind, t_us=t_us, lottery_id=lottery_id, user_id=user_id, amount=amount)


# --- Money enrichment -------------------------------------------------------------------------------

class MoneyEnrichment:
    """Stage 1 -> stage 2 -> lookup step, keyed and chained as in jobs.money_enrichment.enrich. The
    lookup service knows `sessions` (session_id -> SessionStarted event as on the topic); by
    default, as the real service reading the sessions topic, every session of the batches so far."""

    def __init__(self, solution: ModuleType | None = None, config=None, sessions: dict | None = None,
                 users: list[Row] = ()):
        import jobs.money_enrichment as job
        from jobs.money_enrichment_rules import settings
        from jobs.money_enrichment_stages import UserEnrich
        stages = solutions.of(job.SOLUTION, job.PROCESSORS, solution)
        self.job, self.config = job, config or settings()
        self.sessions, self.reads_topic = sessions if sessions is not None else {}, sessions is None
        self.join = TwsTester(stages.SessionJoin(self.config), timeMode="EventTime",
                              eventTimeExtractor=lambda r: NEVER_LATE)
        initial = [((u.entity, u.entity_key), u) for u in users] or None
        self.enrich = TwsTester(UserEnrich(self.config), initialStateRow=initial, timeMode="EventTime",
                                eventTimeExtractor=_out_ms)
        self.clock, self.lookups = _EventTime(self.config.watermark_delay_ms), []

    def rows(self, records) -> list[Row]:
        """Valid events as stage 1's rows."""
        from jobs.money_enrichment_stages import EVENT_COLUMNS, SESSION, SESSION_START, TX, USER, USER_UPDATE
        job, out = self.job, []
        kinds = {job.TRANSACTIONS_TOPIC: TX, job.SESSIONS_TOPIC: SESSION_START, job.USERS_TOPIC: USER_UPDATE}
        for record in records:
            for schema, e in valid_events([record], job.SCHEMAS):
                kind = kinds[schema.topic]
                fields = dict.fromkeys(EVENT_COLUMNS)
                fields.update({name: e.get(name) for name in EVENT_COLUMNS if name in e}, kind=kind,
                              t_us=micros(e["event_time"]), src_partition=getattr(record, "partition", None),
                              src_offset=getattr(record, "offset", None))
                fields.update(entity=USER, entity_key=str(e["user_id"])) if kind == USER_UPDATE else fields.update(
                    entity=SESSION, entity_key=e["session_id"])
                out.append(Row(**fields))
        return out

    @staticmethod
    def _step(tester, rows, watermark) -> list[Row]:
        """Spark's order within a batch: the batch's watermark, its input, then expired timers."""
        if watermark > tester._currentWatermarkMs:
            tester._currentWatermarkMs = watermark
            tester.handle.setWatermark(watermark)
        return _feed(tester, rows, lambda r: (r.entity, r.entity_key)) + tester._handleExpiredTimers()

    def _lookup(self, ids):
        self.lookups += ids
        known = self.sessions
        return {i: Found(known.get(i), None if i in known else "session not found (HTTP 404)", 1) for i in ids}

    def _read_sessions(self, rows: list[Row]) -> None:
        """What the lookup service has read off the sessions topic by this batch (first one wins)."""
        from jobs.money_enrichment_stages import SESSION_START
        for r in rows:
            if r.kind == SESSION_START:
                self.sessions.setdefault(r.session_id, {"session_id": r.session_id, "user_id": r.user_id,
                                                        "country": r.country, "device": r.device,
                                                        "event_time": moment(r.t_us).isoformat()})

    def batch(self, rows: list[Row], watermark: int | None = None) -> list[dict]:
        """One micro-batch: FLOW rows (as dicts) of kind "enriched" or "dead", after the lookup step."""
        from jobs.money_enrichment_lookup import enrich_rows
        if self.reads_topic:
            self._read_sessions(rows)
        watermark = self.clock.next(watermark)
        joined = self._step(self.join, rows, watermark)
        enriched = self._step(self.enrich, joined, watermark)
        self.clock.done(watermark, rows)
        return enrich_rows([r.asDict() for r in enriched], self._lookup)

    def run(self, batches: list[list[Row]]) -> list[dict]:
        """Every batch, then the no-data batch Spark runs when the watermark has moved."""
        out = [row for rows in batches for row in self.batch(rows)]
        return out + self.batch([])

    def dead_letters(self, out: list[dict]) -> dict:
        """tx_id (or session_id) -> the reason of its last dead letter."""
        from jobs.money_enrichment_stages import DEAD
        return {r["entity_key"]: r["reason"] for r in out if r["kind"] == DEAD}

    def views(self, out: list[dict]) -> dict:
        """tx_id -> its last enriched record as jobs.money_enrichment.actual reads it."""
        from jobs.money_enrichment_stages import ENRICHED
        views = {}
        for r in out:
            if r["kind"] == ENRICHED:
                body = {name: r[name] for name in ("tx_id", "user_id", "session_id", "amount", "currency", "type",
                                                   "session_country", "session_device", "user_name", "user_country",
                                                   "user_segment", "user_version", "first_of_type")}
                body.update(event_time=moment(r["t_us"]).isoformat(),
                            session_started_at=moment(r["session_start_us"]).isoformat()
                            if r["session_start_us"] is not None else None, enriched_by=None)
                views[r["tx_id"]] = self.job.parse_output(json.dumps(body).encode())
                views[r["tx_id"]].pop("enriched_by")
        return views


PIPELINES = {"tweet-views": TweetViews, "car-pollution": CarPollution, "lottery": Lottery,
             "money-enrichment": MoneyEnrichment}
