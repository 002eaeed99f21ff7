"""The right answer for tweet views, in plain Python from the input topics: the latest version of
each tweet joined to the latest version of its author that came within the retention of the
tweet. A tweet whose author never arrived has no view. Ties between equal versions are
duplicates, so the first one read is kept.

The retention (jobs.tweet_views.retention, 30 days by default): an author keeps a tweet while it is
within the retention of the newest event seen for the author, so a profile update later than the
tweet plus the retention no longer reaches it. The reference takes that as "the user versions
whose event time is at most the tweet's plus the retention"; the two differ only for an update
within a batch's disorder of that edge, which no generated input has (`make soak` spaces its
slices so that none lands there)."""
from __future__ import annotations

from bisect import bisect_right

from joinlab.events import latest_events, parse_time, valid_events
from joinlab.topics import Record
from jobs.tweet_views import TWEETS, USERS, actual, retention, version, view  # noqa: F401 (the output contract)


def latest(records: list[Record]) -> tuple[dict[int, dict], dict[int, dict]]:
    """(users by id, tweets by id), each at its highest version; invalid records are skipped."""
    tables = latest_events(records, [(USERS, "user_id"), (TWEETS, "tweet_id")], "version")
    return tables[USERS.topic], tables[TWEETS.topic]


def expected(records: list[Record]) -> dict[int, dict]:
    _, tweets = latest(records)
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


def _by_user(records: list[Record]) -> dict[int, list]:
    by: dict[int, list] = {}
    for _, user in valid_events(records, [USERS]):
        by.setdefault(user["user_id"], []).append((parse_time(user["event_time"]), user))
    return by
