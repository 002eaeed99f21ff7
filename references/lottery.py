"""The right answer for the lottery, in plain Python from the input topics: one pass over the
events in event-time order, every rule at once (no stages, no keys), then the windows.

Two things depend on time as the job sees it, and the reference models both:
- the final watermark, max(event time) - delay: events after it are not decided yet, and a
  window is drawn only once the watermark reaches its end;
- lateness: an event is late when, on arrival, the watermark already passed it. The job knows the
  watermark per micro-batch, the reference per record (records sent strictly earlier, by Kafka
  timestamp, or by list position for generated records). Where no record is late per record,
  none is late per micro-batch either, and the two agree exactly; the tests keep disorder within
  the watermark delay, and send a late click only after the job has moved past it.

Outputs are sets: a winner per (lottery, window), a rejection per event id. The sink is
at-least-once, so an output may appear twice, identically; two different records for one key
are a mismatch.
"""
from __future__ import annotations

from joinlab.kit.events import micros, moment, produced_at, validate
from jobs.lottery.job import LOTTERY_EVENTS, USER_EVENTS
from jobs.lottery.consumer import actual, parse_output, version, winner_key  # noqa: F401 (output contract)
from jobs.lottery.rules import (ALREADY_STARTED, BOUGHT, INACTIVE, LATE, NO_COUPON, NON_POSITIVE, STARTED, WINDOW_US,
                                Settings, draw, message, order_key, settings, window_start)

SCHEMAS = {LOTTERY_EVENTS.topic: LOTTERY_EVENTS, USER_EVENTS.topic: USER_EVENTS}


def arrivals(records: list) -> list[tuple[int, dict]]:
    """(arrival, valid event) in arrival order; arrival is the Kafka timestamp when the record has
    one (records read back from topics), else its position (records from a generator)."""
    found = []
    for index, record in enumerate(records):
        schema = SCHEMAS.get(record.topic)
        event = validate(schema, record.value, produced_at(record))[0] if schema else None
        if event is not None:
            event = dict(event, t_us=micros(event["event_time"]), lottery_id=event.get("lottery_id"),
                         user_id=event.get("user_id"), amount=event.get("amount"))
            found.append((getattr(record, "timestamp_ms", index), event))
    found.sort(key=lambda pair: pair[0])  # stable: a topic's order is kept within one timestamp
    return found


def rejection(event: dict, rule: str) -> dict:
    return {"event_id": event["event_id"], "type": event["type"], "event_time": moment(event["t_us"]),
            "lottery_id": event["lottery_id"], "user_id": event["user_id"], "amount": event["amount"],
            "rule": rule, "message": message(rule, event["type"], event["lottery_id"], event["user_id"])}


def winner(lottery_id: int, start: int, entrants: list, seed: int) -> dict:
    _, event_id, user_id = draw(seed, lottery_id, start, entrants)
    return {"lottery_id": lottery_id, "window_start": moment(start), "window_end": moment(start + WINDOW_US),
            "winner_user_id": user_id, "winning_event_id": event_id, "entrants": len(entrants), "seed": seed}


def outcomes(records: list, config: Settings | None = None) -> tuple[dict, dict, int | None]:
    """(winners by (lottery, window start), rejections by event id, final watermark in ms)."""
    config = config or settings()
    seen: set[str] = set()
    rejections: dict[str, dict] = {}
    on_time: list[dict] = []
    newest_ms, group, group_max = None, None, None
    for arrival, event in arrivals(records):
        if arrival != group:  # records of one timestamp arrive together: none is before another
            if group_max is not None:
                newest_ms = group_max if newest_ms is None else max(newest_ms, group_max)
            group = arrival
        t_ms = event["t_us"] // 1000
        group_max = t_ms if group_max is None else max(group_max, t_ms)
        if event["event_id"] in seen:
            continue
        seen.add(event["event_id"])
        if newest_ms is not None and event["t_us"] <= (newest_ms - config.watermark_delay_ms) * 1000:
            rejections[event["event_id"]] = rejection(event, LATE)
        else:
            on_time.append(event)
    if group_max is None:
        return {}, {}, None
    newest_ms = group_max if newest_ms is None else max(newest_ms, group_max)
    watermark_us = (newest_ms - config.watermark_delay_ms) * 1000

    started: set[int] = set()
    coupons: dict[int, int] = {}
    windows: dict[tuple[int, int], list] = {}
    for event in sorted((e for e in on_time if e["t_us"] <= watermark_us),
                        key=lambda e: order_key(e["t_us"], e["type"], e["event_id"])):
        lottery, user = event["lottery_id"], event["user_id"]
        if event["type"] == STARTED:
            if lottery in started:
                rejections[event["event_id"]] = rejection(event, ALREADY_STARTED)
            started.add(lottery)
        elif event["type"] == BOUGHT:
            if event["amount"] <= 0:
                rejections[event["event_id"]] = rejection(event, NON_POSITIVE)
            else:
                coupons[user] = coupons.get(user, 0) + event["amount"]
        elif lottery not in started:
            rejections[event["event_id"]] = rejection(event, INACTIVE)
        elif coupons.get(user, 0) == 0:
            rejections[event["event_id"]] = rejection(event, NO_COUPON)
        else:
            coupons[user] -= 1
            entrant = (event["t_us"], event["event_id"], user)
            windows.setdefault((lottery, window_start(event["t_us"])), []).append(entrant)
    winners = {key: winner(key[0], key[1], entrants, config.seed) for key, entrants in windows.items()
               if key[1] + WINDOW_US <= watermark_us}
    return winners, rejections, watermark_us // 1000


def expected(records: list) -> dict[str, dict]:
    winners, rejections, _ = outcomes(records)
    out = {winner_key(lottery, moment(start)): view for (lottery, start), view in winners.items()}
    out.update({f"rejection {event_id}": view for event_id, view in rejections.items()})
    return out


def final_watermark_ms(records: list) -> int | None:
    """The watermark after which the job has decided every outcome of `records`."""
    return outcomes(records)[2]


def notes(records: list) -> list[str]:
    return []
