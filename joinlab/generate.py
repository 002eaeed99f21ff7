"""Shared generator machinery: event-time-ordered events -> the arrival order we produce -> Kafka.

Why it exists: a stream join is only tested by the disorder it sees. Every pattern generator
builds its events in event-time order and hands them here; `arrange` turns them into the records
that arrive (late events, duplicates, malformed records mixed in), deterministically per seed, and
`send` produces them. The malformed kinds are exactly what `joinlab.kit.events.validate` rejects.

A generator's CLI streams (`arranged` -> `Records`): its records are made while they are sent, so
its memory does not grow with --duration: the records are held only within the disorder's window,
and what stays for the whole run is some tens of bytes an event (the disorder's draws, the generator's
plan, its per-entity state), where the records were about a KiB an event.
`generate` functions return the same records as a list.
"""
from __future__ import annotations

import argparse
import functools
import heapq
import itertools
import json
import math
import random
import sys
import time
from array import array
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence, Sized
from dataclasses import dataclass, replace
from datetime import datetime, timedelta, timezone

from joinlab.kit.events import EventSchema, parse_time

MALFORMED_KINDS = ("empty", "not-json", "truncated", "not-object", "missing-field", "wrong-type")
FOLLOW_UP_S = 1.0  # a duplicate or malformed record arrives up to this much (event time) after its source
DEFAULT_COUNT = 1000  # base events a generator makes without --count or --duration
DEFAULT_SEED = 42
START = datetime(2026, 1, 1, tzinfo=timezone.utc)  # where every generator's event-time clock starts
# A run without --seed on topics that already hold records continues after them, so that a running
# job gets new keys rather than old versions it already has (and emits nothing): every id moves up
# by ID_STRIDE per record the topics hold, past every id of an earlier run, even of one still
# sending (a run has fewer keys than ID_STRIDE), and event times start CONTINUE_GAP after the newest
# among the topics' last records (past any lateness a run was sent with).
ID_STRIDE = 1_000_000
CONTINUE_GAP = timedelta(hours=1)


def iso(dt: datetime) -> str:
    """ISO-8601 UTC with milliseconds and a Z, e.g. 2026-01-01T00:00:00.123Z (naive means UTC)."""
    dt = dt.replace(tzinfo=timezone.utc) if dt.tzinfo is None else dt.astimezone(timezone.utc)
    return dt.isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass
class Event:
    """One valid event; `body` is the JSON object sent and already carries event_time (see `iso`).
    `arrival_delay_s` makes it arrive that much (event time) later, on top of any Disorder delay."""
    topic: str
    key: int | str
    body: dict
    event_time: datetime
    arrival_delay_s: float = 0.0


@dataclass(frozen=True)
class Disorder:
    """How far arrival order departs from event time. Fractions are of the base events."""
    delayed: float = 0.0      # arrive late by a random (0, max_delay_s] of event time
    max_delay_s: float = 0.0
    duplicates: float = 0.0   # sent a second time, identical key and value, a little later
    malformed: float = 0.0    # extra malformed records, in addition to the valid events

    def __post_init__(self):
        for name in ("delayed", "duplicates", "malformed"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name} must be a fraction between 0 and 1, got {getattr(self, name)}")
        if self.max_delay_s < 0:
            raise ValueError(f"max_delay_s must be >= 0, got {self.max_delay_s}")
        if self.delayed > 0 and self.max_delay_s == 0:
            raise ValueError("delayed events need a max delay > 0 (--max-delay SECONDS)")


@dataclass(frozen=True)
class Record:
    """One record to produce. kind: "event", "duplicate" or a malformed kind (MALFORMED_KINDS)."""
    topic: str
    key: bytes
    value: bytes
    kind: str


def _encode(body: dict) -> bytes:
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _candidates(kind: str, schema: EventSchema) -> list[str]:
    """The fields a malformed record of `kind` picks one of: any required one to leave out
    (missing-field), or a required bigint or string one to give the wrong type (wrong-type)."""
    required = [n for n in schema.fields if n not in schema.optional]
    return required if kind == "missing-field" else [n for n in required if schema.fields[n] in ("bigint", "string")]


def _picks_field(kind: str) -> bool:
    return kind in ("missing-field", "wrong-type")


def _malformed(kind: str, body: dict, schema: EventSchema, field: int) -> bytes:
    """A value derived from the event `body` that `validate(schema, value)` rejects, of the given kind;
    `field`: which of `_candidates(kind, schema)` it breaks (drawn before, see `_draw`)."""
    if kind == "empty":
        return b""
    if kind == "not-json":
        return b"\xff\xfegarbage"
    if kind == "truncated":
        whole = _encode(body)
        return whole[: len(whole) // 2]  # a proper prefix of an object never parses: no closing brace
    if kind == "not-object":
        return _encode([body])  # type: ignore[arg-type]
    body, name = dict(body), _candidates(kind, schema)[field]
    if kind == "missing-field":
        del body[name]
    else:  # wrong-type
        body[name] = "seven" if schema.fields[name] == "bigint" else 7
    return _encode(body)


def sample_indices(rng: random.Random, n: int, k: int) -> array:
    """`rng.sample(range(n), k)`: the same draws, the same indices in the same order, as an array, with
    no list of n ints on the way (tests/test_generator_streams.py checks it against `random.sample`)."""
    if not 0 <= k <= n:
        raise ValueError("Sample larger than population or is negative")
    randbelow, result = rng._randbelow, array("q", bytes(8 * k))
    setsize = 21  # random.sample's choice between its two ways, as it makes it
    if k > 5:
        setsize += 4 ** math.ceil(math.log(k * 3, 4))
    if n <= setsize:  # a partial shuffle of the population
        pool = array("q", range(n))
        for i in range(k):
            j = randbelow(n - i)
            result[i] = pool[j]
            pool[j] = pool[n - i - 1]
    else:  # draws until an index not drawn yet
        selected = bytearray(n)
        for i in range(k):
            j = randbelow(n)
            while selected[j]:
                j = randbelow(n)
            selected[j] = 1
            result[i] = j
    return result


@dataclass(frozen=True)
class _Draws:
    """The disorder of n events, drawn before the first record is made, compactly (arrays, no objects):
    each event's delay, the events sent twice and their follow-ups (by event index), the malformed
    records' source events, the field each breaks and their follow-ups (by malformed number j)."""
    delays: array | None  # seconds by event index; None: no delays
    duplicated: array     # event indices, ascending
    dup_follow: array     # seconds after their event, in the order of `duplicated`
    bad_source: array     # by j: the event index it is derived from
    bad_field: array      # by j: which of `_candidates` it breaks (-1: none)
    bad_follow: array     # by j: seconds after its event
    bad_order: array      # the js by source index (ties by j)


def _draw(n: int, disorder: Disorder, rng: random.Random, schema_at: Callable[[int], EventSchema]) -> _Draws:
    """The disorder's random draws, in the order `arrange` has always made them, so a seed keeps its records."""
    delays = None
    delayed = sample_indices(rng, n, round(disorder.delayed * n))
    if len(delayed):
        delays = array("d", bytes(8 * n))
        for i in delayed:
            delays[i] = disorder.max_delay_s * (1.0 - rng.random())  # in (0, max_delay_s]
    del delayed
    duplicated = array("q", sorted(sample_indices(rng, n, round(disorder.duplicates * n))))
    dup_follow = array("d", (FOLLOW_UP_S * (1.0 - rng.random()) for _ in duplicated))
    source, field, follow = array("q"), array("h"), array("d")
    for j in range(round(disorder.malformed * n)):
        kind, i = MALFORMED_KINDS[j % len(MALFORMED_KINDS)], rng.randrange(n)
        source.append(i)
        field.append(rng.choice(range(len(_candidates(kind, schema_at(i))))) if _picks_field(kind) else -1)
        follow.append(FOLLOW_UP_S * (1.0 - rng.random()))
    order = array("q", sorted(range(len(source)), key=source.__getitem__))  # stable: ties by j
    return _Draws(delays, duplicated, dup_follow, source, field, follow, order)


def _arranged(events: Iterable[Event], n: int, draws: _Draws, schemas: dict[str, EventSchema],
              ordered: bool, topics: tuple[bytes, list[str]] | None = None) -> Iterator[Record]:
    """The records of `events` in arrival order: the order of a stable sort by arrival time of the
    events, then their duplicates, then the malformed records - a merge by (arrival, that group, its
    number). With `ordered` (events come in event-time order, checked) a record goes as soon as no
    later event can arrive before it: what is held is the disorder's window (delays, follow-ups)."""
    heap: list[tuple[float, int, int, Record]] = []
    push, pop = heapq.heappush, heapq.heappop
    delays, duplicated, dup_follow = draws.delays, draws.duplicated, draws.dup_follow
    bad_source, bad_order, n_dup, n_bad = draws.bad_source, draws.bad_order, len(draws.duplicated), len(draws.bad_order)
    d = b = made = 0
    last = None
    for i, e in enumerate(events):
        if i >= n:
            raise ValueError(f"the generator made more than the {n} events it said it would")
        if topics is not None and topics[1][topics[0][i]] != e.topic:
            raise ValueError(f"event {i} is on {e.topic}, not on {topics[1][topics[0][i]]} as before: "
                             "a generator's events must be the same every time they are made")
        made = i + 1
        t = e.event_time.timestamp()
        if ordered:
            if last is not None and t < last:
                raise ValueError(f"event {i} comes before the one made before it in event time: a generator's "
                                 "events must come in event-time order")
            last = t
            while heap and (heap[0][0] < t or heap[0][0] == t and heap[0][1] == 0):  # < (t, 0, i): all still to come
                yield pop(heap)[3]
        arrival = t + e.arrival_delay_s + (delays[i] if delays is not None else 0.0)
        key, value = str(e.key).encode("utf-8"), _encode(e.body)
        push(heap, (arrival, 0, i, Record(e.topic, key, value, "event")))
        if d < n_dup and duplicated[d] == i:
            push(heap, (arrival + dup_follow[d], 1, i, Record(e.topic, key, value, "duplicate")))
            d += 1
        while b < n_bad and bad_source[j := bad_order[b]] == i:
            kind = MALFORMED_KINDS[j % len(MALFORMED_KINDS)]
            if e.topic not in schemas:
                raise ValueError(f"no schema for topic {e.topic!r}: malformed records are derived from schemas")
            bad = _malformed(kind, e.body, schemas[e.topic], draws.bad_field[j])
            push(heap, (arrival + draws.bad_follow[j], 2, j, Record(e.topic, key, bad, kind)))
            b += 1
    if made != n:
        raise ValueError(f"the generator made {made} events, not the {n} it said it would")
    while heap:
        yield pop(heap)[3]


def arrange(events: Sequence[Event], disorder: Disorder, rng: random.Random,
            schemas: dict[str, EventSchema]) -> list[Record]:
    """The arrival order: sorted (stably) by event time + delay, with duplicates and malformed mixed in;
    malformed kinds cycle in MALFORMED_KINDS order, so six or more malformed records cover them all."""
    n = len(events)
    if disorder.malformed and (missing := {e.topic for e in events} - set(schemas)):
        raise ValueError(f"no schema for topics {sorted(missing)}: malformed records are derived from schemas")
    draws = _draw(n, disorder, rng, lambda i: schemas[events[i].topic])
    times = [e.event_time.timestamp() for e in events]
    ordered = all(a <= b for a, b in itertools.pairwise(times))
    return list(_arranged(events, n, draws, schemas, ordered))


class Records:
    """A run's records made on demand: sized, and iterable again and again, each time the same records
    (made again from the seed), never all of them in memory at once. `earliest()`: the earliest event
    time among them (see `Continuation`)."""

    def __init__(self, make: Callable[[], Iterable[Record]], length: int,
                 earliest: Callable[[], datetime | None] | None = None):
        self._make, self._length, self._earliest = make, length, earliest

    def __len__(self) -> int:
        return self._length

    def __iter__(self) -> Iterator[Record]:
        return iter(self._make())

    def earliest(self) -> datetime | None:
        if self._earliest is None:
            return min(filter(None, (_event_time(r.value) for r in self)), default=None)
        return self._earliest()


def arranged(events: Callable[[], Iterable[Event]], disorder: Disorder, rng: random.Random,
             schemas: dict[str, EventSchema], count: int | None = None) -> Records:
    """`arrange`'s records, the same ones, streamed: `events()` makes the events (in event-time order,
    the same each time it is called), `count` says how many it makes. The disorder is drawn now (with
    `rng`); each iteration makes the events again and holds only the records in the disorder's window.
    Without `count`, or when malformed records need each event's topic to draw (the schemas' field
    counts differ), a first pass over the events counts them and notes their topics (a byte each)."""
    shapes = {(len(_candidates("missing-field", s)), len(_candidates("wrong-type", s))) for s in schemas.values()}
    topics = None
    if count is None or disorder.malformed and len(shapes) != 1:
        codes, names = bytearray(), {}
        for e in events():
            codes.append(names.setdefault(e.topic, len(names)))
        topics = (bytes(codes), list(names))
        del codes
        if count is not None and count != len(topics[0]):
            raise ValueError(f"the generator made {len(topics[0])} events, not the {count} it said it would")
        count = len(topics[0])
        if disorder.malformed and (missing := set(topics[1]) - set(schemas)):
            raise ValueError(f"no schema for topics {sorted(missing)}: malformed records are derived from schemas")
    if topics is not None:
        codes, names = topics
        schema_at = lambda i: schemas[names[codes[i]]]  # noqa: E731
    else:  # every schema draws alike (only the field's position is drawn): any one will do
        schema_at = lambda i, only=next(iter(schemas.values()), None): only  # noqa: E731
    draws = _draw(count, disorder, rng, schema_at)
    return Records(lambda: _arranged(events(), count, draws, schemas, True, topics),
                   count + len(draws.duplicated) + len(draws.bad_source),
                   lambda: next((_event_time(_encode(e.body)) for e in events()), None))


def arrive_first(records: Iterable[Record], topics: Iterable[str]) -> list[Record] | Records:
    """Every record of `topics` before any other (the extreme disorder), each side's order kept; of
    `Records`, `Records` (made twice: once for each side)."""
    first = set(topics)
    if isinstance(records, Records):
        return Records(lambda: itertools.chain((r for r in records if r.topic in first),
                                               (r for r in records if r.topic not in first)),
                       len(records), records.earliest)
    return sorted(records, key=lambda r: r.topic not in first)  # stable: each side keeps its order


def send(bootstrap: str, records: Iterable[Record], rate: float | None = None, progress: bool = True) -> int:
    """Produce `records` in order (paced to `rate` records/s if given), flush, return the count. Raises
    if any record was not acknowledged: a generator that silently loses records makes every check lie."""
    from joinlab.topics import producer  # kafka-python only when we actually produce

    if not isinstance(records, Sized):  # `Records` stream; anything else unsized is listed, for the progress bar
        records = list(records)
    total, errors = len(records), []
    show = progress and sys.stderr.isatty()
    step = max(1, total // 200)
    client = producer(bootstrap)
    start = time.monotonic()
    try:
        for done, record in enumerate(records, 1):
            client.send(record.topic, key=record.key, value=record.value).add_errback(errors.append)
            if rate:
                ahead = start + done / rate - time.monotonic()
                if ahead > 0.005:  # sleep in small-but-real slices, never spin
                    time.sleep(ahead)
            if show and (done % step == 0 or done == total):
                filled = 30 * done // total  # of a 30-wide progress bar
                print(f"\r  sending [{'#' * filled}{'.' * (30 - filled)}] {done}/{total}",
                      end="\n" if done == total else "", file=sys.stderr, flush=True)
        client.flush()
    finally:
        client.close()
    if errors:
        raise RuntimeError(f"{len(errors)} of {total} records were not acknowledged; first error: {errors[0]!r}") \
            from errors[0]
    return total


def body_of(value: bytes | None) -> dict:
    """A record's JSON object; {} for a value that is not one (a malformed record)."""
    try:
        body = json.loads(value)
    except (TypeError, ValueError):
        return {}
    return body if isinstance(body, dict) else {}


def _event_time(value: bytes | None) -> datetime | None:
    return parse_time(str(body_of(value).get("event_time")))


def moved(record: Record, by: timedelta, ids: int = 0, versions: int = 0, keep: frozenset = frozenset()) -> Record:
    """`record` later in event time by `by`, its versions and seqs up by `versions`, and with `ids`
    every `*_id` not in `keep` made new: a number up by `ids`, a string tagged `-ids`; the key, one
    of its ids, renamed with it. A value that is no JSON object stays: it is dead-lettered either way."""
    body, renamed = body_of(record.value), {}
    for name, value in list(body.items()):
        if name == "event_time" and parse_time(str(value)):
            body[name] = iso(parse_time(value) + by)
        elif name in ("version", "seq") and type(value) is int:
            body[name] = value + versions
        elif ids and name.endswith("_id") and name not in keep and type(value) in (str, int):
            body[name] = f"{value}-{ids}" if isinstance(value, str) else value + ids
            renamed[str(value).encode()] = str(body[name]).encode()
    return replace(record, key=renamed.get(record.key, record.key), value=_encode(body)) if body else record


@dataclass(frozen=True)
class Continuation:
    """What the input topics hold when a run starts, which the run continues after (see ID_STRIDE)."""
    held: int  # records on the input topics
    newest: datetime | None  # the newest event time among their last records

    def apply(self, records: list[Record] | Records) -> list[Record] | Records:
        if isinstance(records, Records):  # moved as they are made
            start = records.earliest()
            by = self.newest + CONTINUE_GAP - start if self.newest and start else timedelta(0)
            ids = self.held * ID_STRIDE
            return Records(lambda: (moved(r, by, ids=ids) for r in records), len(records),
                           lambda: start and start + by)
        start = min(filter(None, (_event_time(r.value) for r in records)), default=None)
        by = self.newest + CONTINUE_GAP - start if self.newest and start else timedelta(0)
        return [moved(r, by, ids=self.held * ID_STRIDE) for r in records]

    def line(self) -> str:
        return (f"the input topics hold {self.held} records already, so this run continues after them: ids up by "
                f"{self.held * ID_STRIDE}, event times from {iso((self.newest or START) + CONTINUE_GAP)} "
                "(--seed N sends a seed's events as they are, e.g. again)")


def continued(bootstrap: str, topics: Sequence[str], records: list[Record] | Records,
              say) -> list[Record] | Records:
    """`records` continued after what `topics` hold (Continuation: their end offsets, and the event
    times of their last 50 records each), which `say` hears; as they are on topics that hold nothing."""
    from joinlab.topics import records_on, tail
    if not (held := records_on(bootstrap, topics)):
        return records
    times = [_event_time(r.value) for topic in topics for r in tail(bootstrap, topic, 50)]
    after = Continuation(held, max(filter(None, times), default=None))
    say(after.line())
    return after.apply(records)


def bounded(kind=float, low=None, high=None, above=None):
    """An argparse type: a `kind` in [low, high], or > `above`, else a message that says what to give."""
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a {'whole ' if kind is int else ''}number") from None
        if low is not None and high is not None and not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{text} is not between {low} and {high}")
        if low is not None and value < low or above is not None and value <= above:
            raise argparse.ArgumentTypeError(f"{text} must be {f'>= {low}' if above is None else f'> {above}'}")
        return value
    return parse


fraction, non_negative = bounded(float, 0, 1), bounded(float, 0)
positive = functools.partial(bounded, above=0)  # positive(int): a whole number > 0


def add_generator_args(parser: argparse.ArgumentParser) -> None:
    """The flags every pattern generator shares (call `check_generator_args` after parsing)."""
    g = parser.add_argument_group("common generator options")
    g.add_argument("--seed", type=int, help=f"random seed; same seed, same records. Default: {DEFAULT_SEED}, and on "
                                              "topics that already hold records, new ids and later event times")
    g.add_argument("--count", type=positive(int), help=f"number of base events (default {DEFAULT_COUNT})")
    g.add_argument("--duration", type=positive(float), help="seconds to send for; needs --rate")
    g.add_argument("--rate", type=positive(float),
                   help="events per second: paces sending and sets the event-time clock")
    g.add_argument("--delayed", type=fraction, default=0.0, help="fraction of events that arrive late")
    g.add_argument("--max-delay", type=non_negative, default=0.0, help="largest lateness, seconds of event time")
    g.add_argument("--duplicates", type=fraction, default=0.0, help="fraction of events sent twice")
    g.add_argument("--malformed", type=fraction, default=0.0, help="extra malformed records, as a fraction")
    g.add_argument("--bootstrap", help="Kafka bootstrap servers (default: $KAFKA_BOOTSTRAP_SERVERS "
                                       "or the embedded broker from `make broker-start`)")
    g.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")


def check_generator_args(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Reject inconsistent flags with a message that says what to do; fill in args.count, args.seed
    and args.continues (no --seed: continue after what the topics hold)."""
    args.continues, args.seed = args.seed is None, DEFAULT_SEED if args.seed is None else args.seed
    if args.duration is not None:
        if args.rate is None:
            parser.error("--duration needs --rate (events/s), e.g. --duration 60 --rate 100")
        if args.count is not None:
            parser.error("give either --count or --duration with --rate, not both")
        args.count = max(1, round(args.duration * args.rate))
    elif args.count is None:
        args.count = DEFAULT_COUNT
    if args.delayed > 0 and args.max_delay == 0:
        parser.error("--delayed needs --max-delay SECONDS > 0 (how late a delayed event may be)")


def disorder_from_args(args: argparse.Namespace) -> Disorder:
    return Disorder(delayed=args.delayed, max_delay_s=args.max_delay, duplicates=args.duplicates,
                    malformed=args.malformed)


def produce(pattern: str, args: argparse.Namespace, topics: list[str], records: list[Record] | Records) -> None:
    """A generator CLI's last step: create the input topics, send (paced by --rate), say what went where.
    `Records` are made while they are sent, and counted by kind on the way (made once)."""
    # kafka-python and the broker module only when a generator actually produces
    from joinlab.broker import BrokerError, bootstrap_servers
    from joinlab.topics import addressed, create_topics, owned
    try:
        bootstrap = args.bootstrap or bootstrap_servers()
    except BrokerError as exc:
        raise SystemExit(f"error: {exc} Or pass --bootstrap host:port.") from None
    topics = owned(topics)  # this participant's; the records are addressed to them as they are sent
    create_topics(bootstrap, topics)
    if args.continues:
        records = continued(bootstrap, topics, records, lambda line: print(f"{pattern}: {line}"))
    counts: Counter = Counter()
    counted = Records(lambda: addressed(_counting(records, counts)), len(records))  # sized: streamed by `send`
    sent = send(bootstrap, counted, rate=args.rate, progress=not args.no_progress)
    print(f"{pattern}: sent {sent} records to {', '.join(topics)} at {bootstrap}: {_kinds(counts)}")


def _counting(records: Iterable[Record], counts: Counter) -> Iterator[Record]:
    for record in records:
        counts[record.kind] += 1
        yield record


def summary(records: Iterable[Record]) -> str:
    """One line: records per kind, e.g. 'event=1000 duplicate=50 empty=2 ...'."""
    return _kinds(Counter(r.kind for r in records))


def _kinds(counts: Counter) -> str:
    return " ".join(f"{kind}={counts[kind]}" for kind in ("event", "duplicate", *MALFORMED_KINDS) if counts[kind])
