"""The right answer for tweet views, in plain Python from the input topics: the latest version of
each tweet joined to the latest version of its author whose event time is at most the tweet's
plus the retention (jobs.tweet_views.job.retention, 30 days by default: a profile update reaches the
tweets written at most that long before it). A tweet with no such author version has no view.
Ties between equal versions are duplicates, so the first one read is kept. The processor applies
the same rule, so the two agree whatever order the topics are read in, while they are read less
than the retention apart (jobs/tweet_views/README.md, "State")."""
from __future__ import annotations

from bisect import bisect_right

from joinlab.kit.events import parse_time, valid_events
from references import latest_events
from joinlab.topics import Consumed
from jobs.tweet_views.given import retention
from jobs.tweet_views.job import TWEETS, USERS
from jobs.tweet_views.consumer import actual, version, view  # noqa: F401 (the output contract)


def latest(records: list[Consumed]) -> tuple[dict[int, dict], dict[int, dict]]:
    """(users by id, tweets by id), each at its highest version; invalid records are skipped."""
    tables = latest_events(records, [(USERS, "user_id"), (TWEETS, "tweet_id")], "version")
    return tables[USERS.topic], tables[TWEETS.topic]


def expected(records: list[Consumed]) -> dict[int, dict]:
    tweets = latest_events(records, [(TWEETS, "tweet_id")], "version")[TWEETS.topic]
    keep = retention()
    versions: dict[int, tuple[list, list]] = {}  # per user: event times in order, the best version up to each
    for user_id, events in _by_user(records).items():
        events.sort(key=lambda u: u[0])
        times, best = [], []
        for at, user in events:  # on equal versions the first read stays (a stable sort kept read order)
            times.append(at)
            best.append(user if not best or user["version"] > best[-1]["version"] else best[-1])
        versions[user_id] = times, best
    out = {}
    for tid, t in tweets.items():
        times, best = versions.get(t["user_id"], ([], []))
        within = bisect_right(times, parse_time(t["event_time"]) + keep)
        if within:
            out[tid] = view(t, best[within - 1])
    return out


def _by_user(records: list[Consumed]) -> dict[int, list]:
    by: dict[int, list] = {}
    for _, user in valid_events(records, [USERS]):
        by.setdefault(user["user_id"], []).append((parse_time(user["event_time"]), user))
    return by


def final_watermark_ms(records: list) -> None:
    """None: the job has no event time; it has decided all it read."""
    return None


def notes(records: list) -> list[str]:
    return []
