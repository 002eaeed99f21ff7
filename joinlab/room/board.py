"""The instructor's view of the room: who is in it, and each participant's running queries with
their input rate, batch duration and state rows, in one table that refreshes itself.

How the numbers get there: Spark Connect keeps a session's queries to that session, so no client
sees another's. Every query a participant starts through the lab (`joinlab run`, a notebook, the
grader: joinlab.runner.start) reports its last progress every REPORT_S to one topic, PROGRESS_TOPIC,
from the participant's own process (joinlab.runner.report_progress). The board (a JupyterHub service
the hub starts, at /services/room-board/, for the instructor only) reads the newest report per
query and asks the hub who is in the room. A query whose reports stopped (its client is gone: its
session ends on the server within a minute) is left out after STALE_S.
"""
from __future__ import annotations

import html
import json
import os
import time

from joinlab.runner import PROGRESS_TOPIC, REPORT_S

STALE_S = 3 * REPORT_S
SERVICE = "room-board"


def summary(progress: dict) -> dict:
    """What the board shows of one StreamingQueryProgress (as joinlab.runner.as_dict gives it)."""
    return {"batch": progress.get("batchId"), "input_per_s": round(progress.get("inputRowsPerSecond") or 0.0, 1),
            "processed_per_s": round(progress.get("processedRowsPerSecond") or 0.0, 1),
            "batch_ms": progress.get("durationMs", {}).get("triggerExecution"),
            "rows_in_batch": progress.get("numInputRows"),
            "state_rows": sum(op.get("numRowsTotal", 0) for op in progress.get("stateOperators", []))}


def latest(bootstrap: str, window_s: float = 120.0) -> dict[str, dict]:
    """participant/query -> its newest report of the last `window_s` seconds."""
    from kafka import TopicPartition

    from joinlab.topics import plain_consumer
    consumer = plain_consumer(bootstrap)
    try:
        parts = [TopicPartition(PROGRESS_TOPIC, p) for p in consumer.partitions_for_topic(PROGRESS_TOPIC) or []]
        if not parts:
            return {}
        since = int((time.time() - window_s) * 1000)
        starts = consumer.offsets_for_times({tp: since for tp in parts})
        ends = consumer.end_offsets(parts)
        consumer.assign(parts)
        for tp in parts:
            consumer.seek(tp, starts[tp].offset if starts.get(tp) else ends[tp])
        newest: dict[str, dict] = {}
        while any(consumer.position(tp) < ends[tp] for tp in parts):
            for records in consumer.poll(timeout_ms=1000).values():
                for record in records:
                    body = json.loads(record.value)
                    newest[record.key.decode()] = {**{k: v for k, v in body.items() if k != "progress"},
                                                   **summary(body["progress"])}
        return newest
    finally:
        consumer.close()


def room_rows(users: list[dict], reports: dict[str, dict], now_ms: int) -> list[dict]:
    """One row per participant and running query (a participant without one: one row with none),
    participants by name, the instructor too."""
    rows = []
    for user in sorted(users, key=lambda u: u["name"]):
        server = (user.get("servers") or {}).get("", {})
        who = {"participant": user["name"], "server": "running" if server.get("ready") else "stopped",
               "last_activity": user.get("last_activity") or ""}
        mine = [r for key, r in sorted(reports.items()) if key.startswith(user["name"] + "/")
                and now_ms - r["sent_ms"] <= STALE_S * 1000]
        rows.extend([{**who, **r} for r in mine] or [who])
    return rows


COLUMNS = [("participant", "participant"), ("server", "server"), ("query", "query"), ("pattern", "pattern"),
           ("input_per_s", "input rows/s"), ("processed_per_s", "processed rows/s"), ("batch_ms", "batch (ms)"),
           ("rows_in_batch", "rows in last batch"), ("state_rows", "state rows"), ("batch", "batch id")]


def page(rows: list[dict]) -> str:
    head = "".join(f"<th>{html.escape(title)}</th>" for _, title in COLUMNS)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(row.get(key, '')))}</td>" for key, _ in COLUMNS) + "</tr>"
                   for row in rows)
    return (f"<!doctype html><html><head><meta charset='utf-8'><meta http-equiv='refresh' content='{REPORT_S:.0f}'>"
            "<title>The room</title><style>body{font-family:sans-serif}td,th{padding:2px 10px;text-align:left}"
            "tr:nth-child(even){background:#f2f2f2}</style></head><body>"
            f"<h1>The room</h1><p>{len({r['participant'] for r in rows})} people, "
            f"{sum(1 for r in rows if r.get('query'))} running queries; refreshed every {REPORT_S:.0f} s "
            "(<a href='api/room'>as JSON</a>; stop a participant's server on the hub's <a href='/hub/admin'>admin "
            "page</a>)</p>"
            f"<table><tr>{head}</tr>{body}</table></body></html>")


def main() -> None:
    """The board as a JupyterHub service (the hub starts it with its URL, prefix and API token in
    the environment); the instructor only."""
    from jupyterhub.services.auth import HubOAuthCallbackHandler, HubOAuthenticated
    from jupyterhub.utils import url_path_join
    from tornado import httpclient, ioloop, web

    prefix = os.environ["JUPYTERHUB_SERVICE_PREFIX"]
    bootstrap = os.environ["KAFKA_BOOTSTRAP_SERVERS"]

    async def users() -> list[dict]:
        answer = await httpclient.AsyncHTTPClient().fetch(
            url_path_join(os.environ["JUPYTERHUB_API_URL"], "users"),
            headers={"Authorization": f"token {os.environ['JUPYTERHUB_API_TOKEN']}"})
        return json.loads(answer.body)

    class Board(HubOAuthenticated, web.RequestHandler):
        async def rows(self) -> list[dict]:
            user = self.current_user
            if not user:
                raise web.HTTPError(403)
            if not user.get("admin"):
                raise web.HTTPError(403, "the room's board is the instructor's")
            reports = await ioloop.IOLoop.current().run_in_executor(None, latest, bootstrap)
            return room_rows(await users(), reports, int(time.time() * 1000))

        @web.authenticated
        async def get(self, what: str = "") -> None:
            rows = await self.rows()
            if what == "api/room":
                self.set_header("Content-Type", "application/json")
                self.finish(json.dumps(rows))
            else:
                self.finish(page(rows))

    app = web.Application([
        (prefix + r"(api/room)?", Board),
        (url_path_join(prefix, "oauth_callback"), HubOAuthCallbackHandler),
    ], cookie_secret=os.urandom(32))
    url = os.environ["JUPYTERHUB_SERVICE_URL"]
    host, port = url.split("//", 1)[1].rstrip("/").rsplit(":", 1)
    app.listen(int(port), address=host)
    ioloop.IOLoop.current().start()


if __name__ == "__main__":
    main()
