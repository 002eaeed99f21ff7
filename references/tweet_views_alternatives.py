"""Why tweet views keeps state of its own: Spark's built-in stream-stream join, run for real on the
same events as the job, scored against the batch reference, with the cause of every mismatch.

- The built-in join is written as the Structured Streaming guide teaches it: tweets INNER JOIN
  users on the author, a watermark on each side, and an event-time range in the condition
  (`user_time BETWEEN tweet_time - RANGE AND tweet_time + RANGE`). Without the range Spark keeps
  both sides for ever; with it, a row stays in state only while the other side's watermark can
  still bring it a match. The default ranges: the spec's retention R both ways (a profile update
  reaches the tweets written up to R before it, and a tweet looks as far back for its author), so
  the join keeps about what the job keeps (every tweet and profile version of the last R); and a
  day, a join whose state is sized as the guide's examples size theirs. Inner, not left outer: the
  spec forbids a view with an empty author, which a left outer join emits for every tweet it
  cannot match, once the watermark passes it.
- Both the join and the job run on the same micro-batches through joinlab.microbatch (a file
  source read one list of records per micro-batch, the memory sink): Spark itself, not a model.
  Their records are read as a consumer reads the topic (jobs.tweet_views.consumer.actual: per tweet, the
  view with the highest (tweet_version, user_version)), and scored against references.tweet_views.
- Every mismatched tweet is then explained from the events alone: the reference's pair (the
  tweet's latest version, the author version it must carry) is outside the range, before or after
  the tweet, or one of its two rows arrived behind the watermark and Spark dropped it before the
  join. The same two rules predict the join's whole output (`predicted`); the tests hold that
  prediction against Spark's, so a cause given here is the one Spark acted on.

The records are a backfill: the generator's events over DAYS of event time, cut by count, as a job
reads topics it starts behind. Each record is stamped as produced when the newest event time read
so far (a producer keeping up with its events), so the lab's guard against events from the future
(LAB_MAX_EVENT_SKEW) never applies, whatever today's date.
"""
from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from datetime import timedelta

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from joinlab import microbatch
from joinlab.config import duration_ms
from joinlab.kit.events import micros, moment, parse_events, valid_events
from references import join_watermarks
from joinlab.kit.in_memory import last_by_version
from jobs.tweet_views import job
from jobs.tweet_views.job import DEAD_LETTERS_TOPIC, TWEETS, TWEETS_TOPIC, USERS, USERS_TOPIC, VIEWS_TOPIC
from references.tweet_views import actual, expected, retention, version, view

DEFAULT_RANGES = ("30 days", "1 day")
DEFAULT_COUNT, DEFAULT_BATCH = 6000, 200


@dataclass(frozen=True)
class Stamped:
    """A generated record with the Kafka timestamp it would have been produced at."""
    topic: str
    key: bytes
    value: bytes
    kind: str
    timestamp_ms: int


def stamped(records) -> list[Stamped]:
    """Each record stamped with the newest event time read up to it (itself included): never before
    its own event, so never "from the future"; a record without one takes the stamp before it."""
    clock, out = 0, []
    for record in records:
        for _, event in valid_events([record], [USERS, TWEETS]):
            clock = max(clock, micros(event["event_time"]) // 1000)
        out.append(Stamped(record.topic, record.key, record.value, record.kind, clock))
    return out


def stamped_batches(batches: list[list]) -> list[list]:
    """Hand-made micro-batches stamped as `stamped` does, with one clock across them."""
    flat = iter(stamped([record for batch in batches for record in batch]))
    return [[next(flat) for _ in batch] for batch in batches]


def cut(records: list, size: int) -> list[list]:
    """Micro-batches of `size` records in arrival order, as a backfill reads them."""
    return [records[i:i + size] for i in range(0, len(records), size)]


_SPARK_UNITS = {"ms": "millisecond", "millisecond": "millisecond", "s": "second", "sec": "second",
                "second": "second", "min": "minute", "minute": "minute", "h": "hour", "hour": "hour",
                "d": "day", "day": "day"}


def interval(text: str, name: str) -> str:
    """A duration in the lab's syntax (joinlab.config.duration_ms: '30 days', '1h') as Spark spells
    an interval ('30 days', '1 hour'); a ValueError naming `name` says what to give instead."""
    duration_ms(text, name)  # the lab's check and its message
    number, unit = re.fullmatch(r"\s*(\d+)\s*([a-z]+)\s*", text.lower()).groups()
    unit = _SPARK_UNITS.get(unit) or _SPARK_UNITS[unit.removesuffix("s")]
    return f"{int(number)} {unit}{'' if int(number) == 1 else 's'}"


@dataclass(frozen=True)
class Join:
    """Spark's stream-stream join as a Spark user writes it first: `range` both ways around the
    tweet's time, both watermarks `watermark` behind their side's newest event time."""
    range: str = DEFAULT_RANGES[0]
    watermark: str = "1 hour"

    def __post_init__(self):  # Spark's spelling of both, or a ValueError naming the flag
        object.__setattr__(self, "range", interval(self.range, "--range"))
        object.__setattr__(self, "watermark", interval(self.watermark, "--watermark"))

    @property
    def range_us(self) -> int:
        return duration_ms(self.range) * 1000

    @property
    def watermark_ms(self) -> int:
        return duration_ms(self.watermark)

    @property
    def condition(self) -> str:
        return (f"author_id = user_id AND user_time >= tweet_time - INTERVAL {self.range} "
                f"AND user_time <= tweet_time + INTERVAL {self.range}")

    @property
    def label(self) -> str:
        return f"Spark's join, range ±{self.range}"

    def build(self, raw: DataFrame) -> DataFrame:
        """Raw Kafka rows in, the view records out, in the job's record shape (job.output_records)."""
        events = parse_events(raw, [USERS, TWEETS], DEAD_LETTERS_TOPIC, job="tweet-views-builtin").events
        tweets = (events.where(F.col("topic") == TWEETS_TOPIC)
                  .select("tweet_id", F.col("user_id").alias("author_id"), F.col("version").alias("tweet_version"),
                          "text", F.col("event_time").alias("tweet_time"))
                  .withWatermark("tweet_time", self.watermark))
        users = (events.where(F.col("topic") == USERS_TOPIC)
                 .select("user_id", F.col("version").alias("user_version"), "name", "handle",
                         F.col("event_time").alias("user_time"))
                 .withWatermark("user_time", self.watermark))
        return job.output_records(tweets.join(users, F.expr(self.condition), "inner"))


# --- What Spark's join does, from the events: the causes -----------------------------------------

@dataclass
class Arrival:
    """One valid event as the join meets it: its side, the micro-batch that brought it, its event
    time and the watermark that micro-batch ran with (us; None while it is 0)."""
    topic: str
    event: dict
    batch: int
    t_us: int
    watermark_us: int | None

    @property
    def late(self) -> bool:
        """At or behind the watermark: Spark's join drops the row before it joins anything."""
        return self.watermark_us is not None and self.t_us <= self.watermark_us

    @property
    def key(self) -> tuple[str, int, int]:
        """(topic, the entity's id, its version): which row of which side this is."""
        return self.topic, self.event["tweet_id" if self.topic == TWEETS_TOPIC else "user_id"], self.event["version"]


def arrivals(batches: list[list], watermark_ms: int) -> list[Arrival]:
    """Every valid event with the watermark its micro-batch ran with (references.join_watermarks:
    Spark's, so that nothing is late before both sides have events)."""
    found, _ = join_watermarks(batches, [USERS, TWEETS], watermark_ms)
    return [Arrival(schema.topic, event, number, t_us, mark) for number, schema, event, t_us, mark in found]


def predicted(batches: list[list], spec: Join) -> dict[int, dict]:
    """The join's last view per tweet by the two rules alone: every on-time tweet row meets every
    on-time row of its author within the range (neither was dropped before the join, and each is
    kept in state while the other can still come), and the consumer keeps the highest versions."""
    on_time = {a.key: a for a in arrivals(batches, spec.watermark_ms) if not a.late}  # duplicates: one row
    users: dict[int, list[Arrival]] = {}
    for a in on_time.values():
        if a.topic == USERS_TOPIC:
            users.setdefault(a.event["user_id"], []).append(a)
    views = [view(t.event, u.event) for t in on_time.values() if t.topic == TWEETS_TOPIC
             for u in users.get(t.event["user_id"], []) if abs(u.t_us - t.t_us) <= spec.range_us]
    return last_by_version(views, "tweet_id", version)


# The kinds of mismatch, each with its reason: what Spark did to the reference's pair of rows.
REASONS = {
    "profile before the range": "the profile the tweet must carry was written more than {range} before it: "
                                "outside the join's range, which bounds how long Spark keeps a profile (until "
                                "the watermark passes its time + {range}), so no later tweet can meet it",
    "update after the range": "the profile update the tweet must carry came more than {range} after it (within "
                              "the retention, {retention}): outside the join's range, which bounds how long "
                              "Spark keeps the tweet (until the watermark passes its time + {range}), so the "
                              "update never reaches it",
    "tweet behind the watermark": "the tweet's latest version arrived at or behind the watermark (the older of "
                                  "the two sides' newest event times - {watermark}, as of the micro-batch "
                                  "before): Spark drops such a row before the join",
    "profile behind the watermark": "the profile the tweet must carry arrived at or behind the watermark: "
                                    "Spark drops such a row before the join, so no tweet ever meets it",
    "unexplained": "none of the above: the rules that predict Spark's join disagree with Spark here",
}


@dataclass
class Mismatch:
    tweet_id: int
    state: str   # "missing" (no view) or "stale" (a view other than the reference's)
    kind: str    # a key of REASONS
    detail: str  # the events that show it, for this tweet


def _day(t_us: int) -> str:
    return moment(t_us).strftime("%Y-%m-%d %H:%M")


def explain(batches: list[list], spec: Join, got: dict[int, dict], want: dict[int, dict]) -> list[Mismatch]:
    """Why each tweet whose last view is not the reference's differs, from the events: the
    reference's pair (the tweet's latest version, the author version it must carry) is out of the
    range, or one of its rows arrived late. Either is enough, and one of them is needed: had the
    pair met, the consumer would keep it, since no pair of this tweet within the range (at most the
    retention) ranks higher."""
    rows: dict[tuple, list[Arrival]] = {}
    for a in arrivals(batches, spec.watermark_ms):
        rows.setdefault(a.key, []).append(a)
    out = []
    for tid in sorted(set(want) | set(got)):
        w, g = want.get(tid), got.get(tid)
        if w == g:
            continue
        state = "missing" if g is None else "stale"
        if w is None:  # a view the reference has none for: only a range wider than the retention
            out.append(Mismatch(tid, state, "unexplained", "a view where the reference has none"))
            continue
        tweet_rows = rows[TWEETS_TOPIC, tid, w["tweet_version"]]
        user_rows = rows[USERS_TOPIC, w["user_id"], w["user_version"]]
        t_us, s_us = micros(w["tweet_time"]), micros(w["user_time"])
        pair = (f"tweet v{w['tweet_version']} at {_day(t_us)}, "
                f"author {w['user_id']} v{w['user_version']} at {_day(s_us)}")
        if s_us < t_us - spec.range_us:
            kind, detail = "profile before the range", f"{pair}: {(t_us - s_us) / 86_400e6:.1f} days before"
        elif s_us > t_us + spec.range_us:
            kind, detail = "update after the range", f"{pair}: {(s_us - t_us) / 86_400e6:.1f} days after"
        elif all(a.late for a in tweet_rows):
            kind, detail = "tweet behind the watermark", _late(tweet_rows[0], "the tweet")
        elif all(a.late for a in user_rows):
            kind, detail = "profile behind the watermark", _late(user_rows[0], "the profile")
        else:
            kind, detail = "unexplained", pair
        out.append(Mismatch(tid, state, kind, detail))
    return out


def _late(a: Arrival, what: str) -> str:
    return (f"{what} at {_day(a.t_us)} arrived in micro-batch {a.batch}, whose watermark was "
            f"{_day(a.watermark_us)} ({(a.watermark_us - a.t_us) / 3_600e6:.1f} hours past it)")


# --- Running both on Spark, and the table ---------------------------------------------------------

@dataclass
class Result:
    approach: str
    views: dict                        # tweet -> the view a consumer ends with
    outputs: int                       # view records emitted
    seconds: float                     # the run, on Spark
    mismatches: list = field(default_factory=list)
    spec: Join | None = None           # the built-in join's settings; None for the job
    agreed: tuple = (0, 0)             # (tweets whose last view `predicted` gets right, tweets)

    def count(self, state: str) -> int:
        return sum(m.state == state for m in self.mismatches)


def _run(spark: SparkSession, build, batches: list[list]) -> tuple[dict, int, float]:
    start = time.monotonic()
    out = microbatch.run(spark, build, batches)
    return actual(out), sum(r.topic == VIEWS_TOPIC for r in out), time.monotonic() - start


def _reference(batches: list[list], want: dict | None) -> dict:
    return expected([r for batch in batches for r in batch]) if want is None else want


def run_join(spark: SparkSession, batches: list[list], spec: Join, want: dict | None = None) -> Result:
    """Spark's join on `batches`, scored against the reference (`want`, else computed from them)."""
    want = _reference(batches, want)
    views, outputs, seconds = _run(spark, spec.build, batches)
    guess = predicted(batches, spec)
    tweets = set(guess) | set(views) | set(want)
    agreed = sum(guess.get(t) == views.get(t) for t in tweets), len(tweets)
    return Result(spec.label, views, outputs, seconds, explain(batches, spec, views, want), spec, agreed)


def run_job(spark: SparkSession, batches: list[list], want: dict | None = None) -> Result:
    """The tweet-views job itself (its `build`, with the lab's processor) on `batches`, scored alike."""
    want = _reference(batches, want)
    views, outputs, seconds = _run(spark, job.build, batches)
    wrong = [Mismatch(t, "missing" if t not in views else "stale", "unexplained", "the job differs")
             for t in sorted(set(want) | set(views)) if want.get(t) != views.get(t)]
    return Result("tweet-views job (transformWithState)", views, outputs, seconds, wrong)


def format_table(results: list[Result], tweets: int) -> str:
    lines = [f"{'approach':<38} {'right':>6} {'missing':>8} {'stale':>6} {'outputs':>8} {'seconds':>8}"]
    for r in results:
        right = tweets - r.count("missing") - r.count("stale")
        lines.append(f"{r.approach:<38} {right:>6} {r.count('missing'):>8} {r.count('stale'):>6} "
                     f"{r.outputs:>8} {r.seconds:>8.0f}")
    return "\n".join(lines)


def format_causes(result: Result) -> str:
    """The join's mismatches by kind, most first: how many tweets (missing / stale), the reason, and
    the first tweet of the kind with the events that show it."""
    kinds: dict[str, list[Mismatch]] = {}
    for m in result.mismatches:
        kinds.setdefault(m.kind, []).append(m)
    spec = result.spec
    lines = [f"{result.approach}: {len(result.mismatches)} mismatches"]
    for kind in sorted(kinds, key=lambda k: -len(kinds[k])):
        found = kinds[kind]
        missing = sum(m.state == "missing" for m in found)
        reason = REASONS[kind].format(range=spec.range, watermark=spec.watermark, retention=_days(retention()))
        lines += [f"  {kind}: {len(found)} tweet{'' if len(found) == 1 else 's'} ({missing} missing, "
                  f"{len(found) - missing} stale)",
                  f"    why: {reason}",
                  f"    e.g. tweet {found[0].tweet_id}: {found[0].detail}"]
    return "\n".join(lines)


def _days(span: timedelta) -> str:
    days = span / timedelta(days=1)
    return f"{days:g} day{'' if days == 1 else 's'}"


def main(argv: list[str] | None = None) -> int:
    """`joinlab compare tweet-views`: Spark's own stream-stream join and the tweet-views job on one
    seeded backfill, on this machine's Spark, against the reference; then why the join's views differ."""
    import argparse

    from generators.tweet_views import generate
    from joinlab.generate import Disorder
    parser = argparse.ArgumentParser(prog="joinlab compare tweet-views", description=(
        "Run Spark's built-in stream-stream join (tweets INNER JOIN users on the author, a watermark on each "
        "side, an event-time range) and the tweet-views job on the same micro-batches of generated events, "
        "score both against the batch reference, and give the cause of each of the join's mismatches."))
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--count", type=int, default=DEFAULT_COUNT, help=f"events (default {DEFAULT_COUNT})")
    parser.add_argument("--days", type=float, default=90, help="days of event time the events span (default 90)")
    parser.add_argument("--delayed", type=float, default=0.1, help="fraction of events delayed (default 0.1)")
    parser.add_argument("--max-delay", default="12 hours", metavar="DURATION",
                        help="how late (event time) a delayed event may arrive (default '12 hours')")
    parser.add_argument("--tweets-first", action="store_true", help="every tweet arrives before every user")
    parser.add_argument("--batch-size", type=int, default=DEFAULT_BATCH,
                        help=f"records per micro-batch (default {DEFAULT_BATCH})")
    parser.add_argument("--range", action="append", metavar="DURATION",
                        help="the join's event-time range, both ways around the tweet, e.g. '1 day'; once per "
                             f"row (default: {' and '.join(repr(r) for r in DEFAULT_RANGES)}); at most the retention")
    parser.add_argument("--watermark", default="1 hour", metavar="DURATION",
                        help="each side's watermark delay (default '1 hour')")
    parser.add_argument("--no-job", action="store_true", help="leave out the tweet-views job's own run")
    args = parser.parse_args(argv)
    try:
        joins = [Join(r, args.watermark) for r in args.range or DEFAULT_RANGES]
        max_delay = interval(args.max_delay, "--max-delay")
    except ValueError as exc:
        parser.error(str(exc))
    if args.count < 10 or args.days <= 0 or args.batch_size < 1 or not 0 <= args.delayed <= 1:
        parser.error("need --count >= 10, --days > 0, --batch-size >= 1 and 0 <= --delayed <= 1")
    keep = retention()
    if any(j.range_us > keep // timedelta(microseconds=1) for j in joins):
        parser.error(f"a --range longer than the retention ({_days(keep)}, LAB_TWEET_VIEWS_RETENTION) joins "
                     "profiles the spec says a tweet must not get")

    from pyspark.sql import SparkSession

    from joinlab.spark import session, stop
    disorder = Disorder(delayed=args.delayed, max_delay_s=duration_ms(max_delay) / 1000 if args.delayed else 0.0)
    records = stamped(generate(args.seed, args.count, disorder=disorder, tweets_first=args.tweets_first,
                               rate=args.count / (args.days * 86400)))
    batches = cut(records, args.batch_size)
    want = expected(records)
    print(f"{args.count} events (seed {args.seed}) over {args.days:g} days of event time, {args.delayed:.0%} delayed "
          f"up to {max_delay}{', every tweet first' if args.tweets_first else ''}, read as a backfill: "
          f"{len(batches)} micro-batches of {args.batch_size} records (about "
          f"{args.days * 24 * args.batch_size / len(records):.0f} hours of event time each).")
    print(f"The reference: {len(want)} views, each tweet's latest version with its author's latest profile "
          f"up to {_days(keep)} (the retention) after it.")
    print(f"Spark's join: tweets INNER JOIN users ON author_id = user_id AND user_time BETWEEN tweet_time - RANGE "
          f"AND tweet_time + RANGE, each side's watermark {joins[0].watermark} behind its newest event; RANGE "
          f"{' or '.join(j.range for j in joins)}.\n")
    spark = SparkSession.getActiveSession()
    own = spark is None
    spark = spark or session("tweet-views-compare")
    try:
        results = [] if args.no_job else [run_job(spark, batches, want)]
        results += [run_join(spark, batches, j, want) for j in joins]
    finally:
        if own:
            stop(spark)
    print(format_table(results, len(want)))
    for r in results:
        if r.spec is None:  # the job: the reference is what it converges to, so any mismatch is a bug
            print(f"\nThe job on the same micro-batches: {len(r.mismatches)} mismatches"
                  + (" (a bug: `joinlab verify tweet-views` on a live run says which)" if r.mismatches else ""))
    print("\nWhy the join's views differ, found per tweet from the events:")
    for r in results:
        if r.spec is None:
            continue
        print(format_causes(r))
        print("  the same rules predict Spark's last view of {} of {} tweets".format(*r.agreed))
    return 0
