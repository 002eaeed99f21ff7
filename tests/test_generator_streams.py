"""The generators stream: the CLI's records are made while they are sent, the same records in the same
order as before they streamed, and a generator's memory does not grow with its run (no broker)."""
from __future__ import annotations

import hashlib
import random
import subprocess
import sys
from datetime import datetime, timedelta, timezone

import pytest

from joinlab import patterns
from joinlab.generate import (FOLLOW_UP_S, MALFORMED_KINDS, Continuation, Disorder, Event, Record, Records, arrange,
                              arranged, arrive_first, iso, sample_indices, summary)

PATTERNS = ["ad-clicks", "tweet-views", "car-pollution", "lottery", "money-enrichment"]
DISORDERS = {"none": Disorder(), "messy": Disorder(delayed=0.3, max_delay_s=5.0, duplicates=0.05, malformed=0.02),
             "heavy": Disorder(delayed=0.9, max_delay_s=30.0, duplicates=0.5, malformed=0.3),
             "tiny-delay": Disorder(delayed=0.5, max_delay_s=0.01, duplicates=0.2, malformed=0.1)}

# (pattern, seed, disorder, count, options): (records, the first 16 hex digits of `digest`), computed from the
# generators before they streamed (on 670a99d): a seed keeps its records, byte for byte and in order.
BEFORE = {
    ("ad-clicks", 1, "heavy", 2000, ()): (3557, "aa21bb91ba92b073"),
    ("ad-clicks", 1, "messy", 2000, ()): (2115, "8d2d446eb9ba50ab"),
    ("ad-clicks", 1, "none", 2000, ()): (1976, "95f5565997da162c"),
    ("ad-clicks", 42, "heavy", 2000, ()): (3604, "dab6e395e9ef58d3"),
    ("ad-clicks", 42, "messy", 2000, ()): (2142, "72d357534402440e"),
    ("ad-clicks", 42, "none", 2000, ()): (2002, "1765be4cbd1dbda2"),
    ("ad-clicks", 7, "tiny-delay", 300, (("rate", 50.0),)): (384, "470bbf045b74bfce"),
    ("car-pollution", 1, "heavy", 2000, ()): (3600, "572245639ac3ab51"),
    ("car-pollution", 1, "messy", 2000, ()): (2140, "fed48fbcf2947ffe"),
    ("car-pollution", 1, "none", 2000, ()): (2000, "d34a168ed99ab326"),
    ("car-pollution", 42, "heavy", 2000, ()): (3600, "9e22b99c704caf95"),
    ("car-pollution", 42, "messy", 2000, ()): (2140, "bb92a113c978af51"),
    ("car-pollution", 42, "none", 2000, ()): (2000, "345f9c1ef6bb4055"),
    ("car-pollution", 7, "tiny-delay", 300, (("rate", 50.0),)): (390, "3d7f210cd2f0171d"),
    ("lottery", 1, "heavy", 2000, ()): (3600, "e86b389922435189"),
    ("lottery", 1, "messy", 2000, ()): (2140, "e0a288f0bcb0e53b"),
    ("lottery", 1, "none", 2000, ()): (2000, "4547c1dab3c78041"),
    ("lottery", 42, "heavy", 2000, ()): (3600, "c6e0168beeb44922"),
    ("lottery", 42, "messy", 2000, ()): (2140, "381e928cc1d412d5"),
    ("lottery", 42, "none", 2000, ()): (2000, "86c2e120df5638c4"),
    ("lottery", 7, "tiny-delay", 300, (("rate", 50.0),)): (390, "bd0444cf836fc3e3"),
    ("money-enrichment", 1, "heavy", 2000, ()): (3600, "16aa8d01a5cf574b"),
    ("money-enrichment", 1, "messy", 2000, ()): (2140, "d51f7e156ca49eb9"),
    ("money-enrichment", 1, "none", 2000, ()): (2000, "276522b0a2154547"),
    ("money-enrichment", 42, "heavy", 2000, ()): (3600, "db3a6354ffbb249d"),
    ("money-enrichment", 42, "messy", 2000, ()): (2140, "636d3d4863ee1623"),
    ("money-enrichment", 42, "none", 2000, ()): (2000, "510abd7ec1512288"),
    ("money-enrichment", 7, "tiny-delay", 300, (("rate", 50.0),)): (390, "db7cfd880b95cd47"),
    ("tweet-views", 1, "heavy", 2000, ()): (3600, "5742f33753c0ae18"),
    ("tweet-views", 1, "messy", 2000, ()): (2140, "4d38d7963ab11976"),
    ("tweet-views", 1, "none", 2000, ()): (2000, "422f8c971280af96"),
    ("tweet-views", 42, "heavy", 2000, ()): (3600, "f29cd6f8823737d3"),
    ("tweet-views", 42, "messy", 2000, ()): (2140, "118a84216a9d398a"),
    ("tweet-views", 42, "none", 2000, ()): (2000, "dfc7b36c262129a7"),
    ("tweet-views", 7, "messy", 2000, (("tweets_first", True),)): (2140, "ab1e5c9cfdc9f57c"),
    ("tweet-views", 7, "tiny-delay", 300, (("rate", 50.0),)): (390, "5018c00fd7e62924"),
}


def digest(records) -> str:
    h = hashlib.sha256()
    for r in records:
        for part in (r.topic.encode(), r.key, r.value, r.kind.encode()):
            h.update(len(part).to_bytes(4, "big"))
            h.update(part)
    return h.hexdigest()


@pytest.mark.parametrize("case", sorted(BEFORE), ids=lambda c: "-".join(str(p) for p in c[:4]) + "".join(
    f"-{k}" for k, _ in c[4]))
def test_a_seed_keeps_its_records_listed_and_streamed(case):
    pattern, seed, disorder, count, options = case
    generator = patterns.generator(pattern)
    listed = generator.generate(seed, count, disorder=DISORDERS[disorder], **dict(options))
    streamed = generator.stream(seed, count, disorder=DISORDERS[disorder], **dict(options))
    assert isinstance(streamed, Records) and len(streamed) == len(listed)
    assert (len(listed), digest(listed)[:16]) == BEFORE[case]
    assert list(streamed) == listed
    assert list(streamed) == listed  # made again, alike


# --- arrange: the merge against the stable sort it replaced --------------------------------------

def eager_arrange(events, disorder, rng, schemas):
    """joinlab.generate.arrange as it was before it streamed (670a99d): every record, then one stable sort."""
    from joinlab.generate import _encode

    def malformed(kind, event, schema):
        required = [n for n in schema.fields if n not in schema.optional]
        if kind == "empty":
            return b""
        if kind == "not-json":
            return b"\xff\xfegarbage"
        if kind == "truncated":
            whole = _encode(event.body)
            return whole[: len(whole) // 2]
        if kind == "not-object":
            return _encode([event.body])
        body = dict(event.body)
        if kind == "missing-field":
            del body[rng.choice(required)]
        else:
            name = rng.choice([n for n in required if schema.fields[n] in ("bigint", "string")])
            body[name] = "seven" if schema.fields[name] == "bigint" else 7
        return _encode(body)

    n = len(events)
    delays = [0.0] * n
    for i in rng.sample(range(n), round(disorder.delayed * n)):
        delays[i] = disorder.max_delay_s * (1.0 - rng.random())
    arrivals = [e.event_time.timestamp() + e.arrival_delay_s + d for e, d in zip(events, delays)]
    values = [_encode(e.body) for e in events]
    keys = [str(e.key).encode("utf-8") for e in events]
    timed = [(arrivals[i], Record(e.topic, keys[i], values[i], "event")) for i, e in enumerate(events)]
    for i in sorted(rng.sample(range(n), round(disorder.duplicates * n))):
        timed.append((arrivals[i] + FOLLOW_UP_S * (1.0 - rng.random()),
                      Record(events[i].topic, keys[i], values[i], "duplicate")))
    for j in range(round(disorder.malformed * n)):
        kind, i = MALFORMED_KINDS[j % len(MALFORMED_KINDS)], rng.randrange(n)
        value = malformed(kind, events[i], schemas[events[i].topic])
        timed.append((arrivals[i] + FOLLOW_UP_S * (1.0 - rng.random()), Record(events[i].topic, keys[i], value, kind)))
    timed.sort(key=lambda pair: pair[0])
    return [record for _, record in timed]


def random_events(rng: random.Random, schemas, n: int, ordered: bool) -> list[Event]:
    """n events on the schemas' topics (which draw malformed fields differently), with many ties in
    event time, some arriving late of their own (arrival_delay_s); in event-time order if `ordered`."""
    start, ms, events = datetime(2026, 1, 1, tzinfo=timezone.utc), 0, []
    samples = {"bigint": 7, "string": "s", "double": 1.5, "timestamp": "2026-01-01T00:00:00.000Z"}
    for i in range(n):
        ms += rng.choice([0, 0, 1, 3, 250, 1000])
        at = start + timedelta(milliseconds=ms if ordered else rng.randrange(5000))
        topic = rng.choice(sorted(schemas))
        body = {name: samples.get(kind, "x") for name, kind in schemas[topic].fields.items()}
        events.append(Event(topic, i, {**body, "event_time": iso(at)}, at,
                            rng.choice([0.0, 0.0, 0.0, 0.5, 3.0])))
    return events


def test_arrange_orders_as_the_stable_sort_it_replaced():
    from generators.money_enrichment import SCHEMAS
    rng = random.Random(0)
    for case in range(300):
        n, ordered = rng.choice([0, 1, 2, 7, 40, 300]), case % 5 != 0
        events = random_events(rng, SCHEMAS, n, ordered)
        disorder = Disorder(delayed=rng.choice([0.0, 0.3, 1.0]), max_delay_s=rng.choice([0.001, 0.5, 4.0]),
                            duplicates=rng.choice([0.0, 0.5, 1.0]), malformed=rng.choice([0.0, 0.3, 1.0]))
        expected = eager_arrange(events, disorder, random.Random(case), SCHEMAS)
        assert arrange(events, disorder, random.Random(case), SCHEMAS) == expected, (case, n, disorder)
        if ordered:
            for count in (n, None):  # told how many, or counted by a first pass
                records = arranged(lambda: iter(events), disorder, random.Random(case), SCHEMAS, count=count)
                assert len(records) == len(expected) and list(records) == expected, (case, n, disorder)


def test_a_stream_out_of_event_time_order_or_of_another_count_is_refused():
    from generators.money_enrichment import SCHEMAS
    events = random_events(random.Random(1), SCHEMAS, 50, ordered=True)
    with pytest.raises(ValueError, match="event-time order"):
        list(arranged(lambda: iter(events[::-1]), Disorder(), random.Random(0), SCHEMAS, count=50))
    with pytest.raises(ValueError, match="not the 51"):
        list(arranged(lambda: iter(events), Disorder(), random.Random(0), SCHEMAS, count=51))


@pytest.mark.parametrize("n, k", [(0, 0), (1, 1), (5, 5), (10, 3), (30, 6), (100, 100), (1000, 300), (1000, 10),
                                  (5000, 1700), (100_000, 30_000), (100_000, 5_000), (262_144, 87_381)])
def test_sample_indices_draws_what_random_sample_draws(n, k):
    ours, theirs = random.Random(f"{n}/{k}"), random.Random(f"{n}/{k}")
    assert list(sample_indices(ours, n, k)) == theirs.sample(range(n), k)
    assert ours.random() == theirs.random()  # and leaves the generator where random.sample leaves it


# --- what the CLI does with a stream ----------------------------------------------------------

@pytest.mark.parametrize("pattern", PATTERNS)
def test_a_continued_stream_is_the_continued_list(pattern):
    generator = patterns.generator(pattern)
    listed = generator.generate(42, 300, disorder=DISORDERS["messy"])
    after = Continuation(len(listed), datetime(2026, 3, 1, 12, 30, tzinfo=timezone.utc))
    streamed = after.apply(generator.stream(42, 300, disorder=DISORDERS["messy"]))
    assert isinstance(streamed, Records) and list(streamed) == after.apply(listed)
    assert streamed.earliest() == datetime(2026, 3, 1, 13, 30, tzinfo=timezone.utc)  # CONTINUE_GAP after


def test_tweets_first_streams_each_side_in_order():
    from generators import tweet_views
    streamed = arrive_first(tweet_views.stream(3, 500, disorder=DISORDERS["messy"]), [tweet_views.TWEETS_TOPIC])
    assert list(streamed) == arrive_first(tweet_views.generate(3, 500, disorder=DISORDERS["messy"]),
                                          [tweet_views.TWEETS_TOPIC])


# A generator's CLI (its `main`: flags, stream, `produce`, `send` paced by --rate) with a Kafka producer that
# drops what it is given and a clock that never waits; prints what it said it sent, and how much the run added
# to the process's peak RSS (VmHWM), in KiB.
RUN = """
import sys
import time
from joinlab import broker, topics  # what `produce` imports, before the baseline

time.sleep = lambda seconds: None  # --rate 50 without the wait: the same records, sent as fast as they are made

class Dropped:
    def send(self, topic, key=None, value=None):
        return self
    def add_errback(self, errback):
        return self
    def flush(self):
        pass
    def close(self):
        pass

topics.producer = lambda bootstrap, **overrides: Dropped()
topics.create_topics = lambda bootstrap, names, partitions=None: None
from joinlab import patterns
generator = patterns.generator(sys.argv[1])
hwm = lambda: int(next(line.split()[1] for line in open("/proc/self/status") if line.startswith("VmHWM")))
before = hwm()
generator.main(sys.argv[2:])
print("grew", hwm() - before, flush=True)
"""
MESSY_FLAGS = ["--delayed", "0.3", "--max-delay", "5", "--duplicates", "0.05", "--malformed", "0.02"]


def run_generator(pattern: str, duration: int) -> tuple[float, str]:
    """(MiB the run added to its process's peak RSS, the line it printed about what it sent)."""
    run = subprocess.run([sys.executable, "-c", RUN, pattern, "--seed", "5", "--duration", str(duration),
                          "--rate", "50", *MESSY_FLAGS, "--bootstrap", "127.0.0.1:1", "--no-progress"],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    out = run.stdout.splitlines()
    return int(out[-1].split()[1]) / 1024, out[-2]


@pytest.mark.parametrize("pattern", PATTERNS)
def test_a_generator_s_memory_does_not_grow_with_its_run(pattern):
    """A run ten times longer adds (almost) nothing to the peak: the records are made as they are sent
    and held only within the disorder's window. Before they streamed, every record of the run was made
    first, about 1 KiB an event (a one-hour tweet-views run at 50 events/s: 230 MiB)."""
    short, said = run_generator(pattern, 100)  # 5,000 events at 50 a second
    long, _ = run_generator(pattern, 1_000)
    assert long < 1.3 * short + 20, f"{pattern}: {short:.1f} MiB more at the peak for 100 s, {long:.1f} for 1,000 s"
    records = patterns.generator(pattern).generate(5, 5_000, disorder=Disorder(
        delayed=0.3, max_delay_s=5.0, duplicates=0.05, malformed=0.02), rate=50.0)
    assert said.startswith(f"{pattern}: sent {len(records)} records to ")
    assert said.endswith(f": {summary(records)}")
