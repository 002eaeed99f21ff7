"""`joinlab lab up|down|ps|logs|generate`: start, inspect and stop the native stack as one thing.

Why a marker file ($LAB_HOME/stack): `make up` may have started the Docker Compose stack instead
(when Docker runs), and `make down`, `make ps` and `make logs` must act on whichever one it was.
`up` is idempotent (it reports what already runs), checks every port before starting anything,
and stops what it started if a service does not become healthy.
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

from joinlab import broker, patterns
from joinlab.config import lab_home
from joinlab.room import hub as room_hub
from joinlab.stack import procs, services, settings
from joinlab.stack.procs import Service, StackError
from joinlab.stack.services import CONNECT, JUPYTER, LOOKUP, MASTER, WORKER
from joinlab.topics import create_topics

CORE = [MASTER, WORKER, CONNECT, JUPYTER, LOOKUP]
HUB = room_hub.HUB  # the room's JupyterHub, with `up --room`
# Each service's ports (keys of settings.PORTS), checked to be free before it starts.
LISTENS_ON = {MASTER: ["master", "master-ui"], WORKER: ["worker-ui"], CONNECT: ["connect", "connect-ui"],
              JUPYTER: ["jupyter"], LOOKUP: ["lookup"], HUB: ["room", "room-hub", "room-api", "room-board"]}


def marker() -> str:
    path = lab_home() / "stack"
    return path.read_text().strip() if path.exists() else ""


def _report(name: str, pid: int, was_running: bool) -> None:
    print(f"  {name:<19}{'already running' if was_running else 'started'} (pid {pid})")


def up(generators: bool = False, room: bool = False) -> int:
    """Start the native lab (what already runs is reported, not started again); `room`: and the
    room's JupyterHub in front of it (joinlab.room)."""
    timeout_s = float(settings.setting("LAB_UP_TIMEOUT", "180"))
    current = {name: procs.load(name) for name in CORE}
    running = {name for name, service in current.items() if procs.is_running(service)}
    # In a room, Spark runs as a user of its own, on the participants' Python (joinlab.room.hub).
    spark_user, python = room_hub.prepare([current[WORKER], current[CONNECT]]) if room else (None, sys.executable)
    if MASTER not in running:  # registered with a master that is gone
        procs.stop([current[name] for name in (WORKER, CONNECT) if name in running])
        running -= {WORKER, CONNECT}
    existing_broker = broker.running_broker()
    hub = procs.load(HUB) if room else None
    hub_running = procs.is_running(hub)
    settings.check_free(([] if existing_broker else ["broker"])
                        + [key for name in CORE if name not in running for key in LISTENS_ON[name]]
                        + (LISTENS_ON[HUB] if room and not hub_running else []))
    token = current[JUPYTER].extra["token"] if JUPYTER in running else settings.token("JUPYTER_TOKEN")
    connect_token = (current[CONNECT].extra["token"] if CONNECT in running
                     else settings.token("SPARK_CONNECT_AUTHENTICATE_TOKEN"))  # joinlab.spark.TOKEN_VARIABLE
    (lab_home() / "stack").write_text("native\n")
    started: list[Service] = []
    began = time.monotonic()
    print(f"Starting the native lab stack (state and logs in {lab_home()}):")
    info = existing_broker or broker.start_background(settings.port("broker"))
    _report("broker", info.pid, bool(existing_broker))

    def ensure(name: str, start) -> Service:
        """The running service `name`, else the one `start()` starts."""
        if name in running:
            return current[name]
        started.append(start())
        return started[-1]

    def wait_healthy(service: Service) -> None:
        services.wait_healthy(service, timeout_s)
        _report(service.name, service.pid, service.name in running)

    try:
        for pattern in patterns.PATTERNS:
            create_topics(info.bootstrap_servers, patterns.all_topics(pattern))
        print(f"  {'topics':<19}ready for {', '.join(patterns.PATTERNS)}")
        lookup = ensure(LOOKUP, lambda: services.start_lookup(info.bootstrap_servers))
        master = ensure(MASTER, services.start_master)
        jupyter = ensure(JUPYTER, lambda: services.start_jupyter(token, settings.notebook_dir()))
        wait_healthy(master)
        worker = ensure(WORKER, lambda: services.start_worker(master, spark_user, python))
        for service in (worker, jupyter, lookup):
            wait_healthy(service)
        connect = ensure(CONNECT, lambda: services.start_connect(master, connect_token, spark_user, python))
        wait_healthy(connect)
        if connect.name not in running:
            warm(connect, info.bootstrap_servers)
        if room:
            if hub_running:
                _report(HUB, hub.pid, True)
            else:
                from joinlab.runner import PROGRESS_TOPIC
                create_topics(info.bootstrap_servers, [PROGRESS_TOPIC])
                started.append(room_hub.start(services.base_env(), Path(python).parents[1]))
                hub = started[-1]
                services.wait_healthy(hub, timeout_s)
                _report(HUB, hub.pid, False)
        if generators:
            for pattern in patterns.PATTERNS:
                existing = procs.load(services.gen_name(pattern))
                if procs.is_running(existing):
                    _report(existing.name, existing.pid, True)
                else:
                    started.append(generate(pattern))
    except BaseException:
        procs.stop(started)
        if not existing_broker:  # the broker this call started
            broker.stop_background()
        raise
    print(f"Healthy after {time.monotonic() - began:.1f} s.\n")
    summary(info.bootstrap_servers, master, worker, connect, jupyter, lookup)
    if room:
        room_summary(hub)
    return 0


WARM_UP = "warm-up."  # the prefix of the topics `warm` writes and reads, deleted after it
WARM_UP_RECORDS = 600  # per pattern: six micro-batches of a hundred


def warm(connect: Service, bootstrap: str) -> None:
    """Run each pattern's job once on the new server, as a participant starts it: from Kafka to
    Kafka, through topics of its own (WARM_UP), on a few hundred records, a hundred a trigger. The
    server's executor compiles its code for a tiny batch after some dozens of them, so the room's
    first jobs do not pay for it (docs/benchmarks.md)."""
    import tempfile

    from joinlab import runner
    from joinlab.generate import send
    from joinlab.microbatch import on_records_alone
    from joinlab.spark import connect as client
    from joinlab.topics import delete_topics
    began = time.monotonic()
    spark = client(connect.url, connect.extra["token"])
    topics = [WARM_UP + topic for name in on_records_alone() for topic in patterns.all_topics(name)]
    made: list[str] = []  # deleted after: only what it created
    try:
        made = create_topics(bootstrap, topics)
        with tempfile.TemporaryDirectory(prefix="warm-up-", dir=lab_home()) as checkpoints:
            runner.checkpoint_dir(checkpoints)  # in a room, Spark's user writes them
            for name in on_records_alone():
                records = patterns.generator(name).generate(1, WARM_UP_RECORDS)
                send(bootstrap, [replace(r, topic=WARM_UP + r.topic) for r in records], progress=False)
                runner.start(spark, patterns.job(name), bootstrap, str(Path(checkpoints, name)), available_now=True,
                             max_offsets_per_trigger=100, input_prefix=WARM_UP, output_prefix=WARM_UP,
                             counted=True).awaitTermination()
    finally:
        spark.stop()
        delete_topics(bootstrap, made)
    print(f"  {'':<19}warmed up: every pattern's job once, in {time.monotonic() - began:.0f} s")


def summary(bootstrap: str, master: Service, worker: Service, connect: Service, jupyter: Service,
            lookup: Service) -> None:
    pattern = next(iter(patterns.PATTERNS))
    exe = Path(sys.executable).parent / "joinlab"
    lab = exe.relative_to(Path.cwd()) if exe.is_relative_to(Path.cwd()) else exe
    print("Stream Join Lab is up (native processes, all on 127.0.0.1):")
    print(f"  Kafka bootstrap   {bootstrap}")
    print(f"  Spark master      {master.url}   web UI {master.extra['ui']}")
    print(f"  Spark worker UI   {worker.url}")
    print(f"  Spark Connect     {connect.url}   token in .env (SPARK_CONNECT_AUTHENTICATE_TOKEN); "
          f"web UI of every job {connect.extra['ui']}")
    print(f"  JupyterLab        {jupyter.url}/lab?token={jupyter.extra['token']}   <- open this one")
    print(f"  Session lookup    {lookup.url}   token from {lookup.extra['token_from']}")
    print(f"Run a job on the server:  {lab} run {pattern}   (jobs, notebooks and the grader are its clients while "
          "it runs)")
    print(f"Events at a rate:         {lab} lab generate {pattern} --rate 50")
    print("`make ps` lists the services, `make logs SERVICE=spark-worker` follows a log, `make down` stops all.")


def room_summary(hub: Service) -> None:
    """What the instructor writes on the board, and where the passwords are (never the passwords)."""
    env = settings.env_file()
    print(f"The room is open: participants open {hub.url}")
    print(f"  TLS certificate   SHA-256 {hub.extra['fingerprint']}"
          + ("   (self-signed: browsers ask once; compare this)" if hub.extra["self_signed"] else ""))
    print(f"  Passwords         in {env}: LAB_ROOM_PASSWORD for participants (write it on the board), "
          f"LAB_ROOM_ADMIN_PASSWORD for {hub.extra['admin']}")
    print("  A participant      picks a name, types the room password and chooses an own password at their first "
          "login; they get their own JupyterLab")
    print(f"  The instructor     logs in as {hub.extra['admin']}; the room's board (who is in, their queries) is "
          f"{hub.url}services/room-board/, the hub's admin page {hub.url}hub/admin")


def generate(pattern: str, rate: float | None = None, count: int | None = None, duration: float | None = None,
             extra_args: list[str] | None = None) -> Service:
    """One pattern's generator in the background, against the running broker."""
    name = services.gen_name(pattern)
    existing = procs.load(name)
    if procs.is_running(existing):
        raise StackError(f"{name} already runs (pid {existing.pid}); stop it with `joinlab lab down {name}`")
    rate = rate or float(settings.setting("GEN_RATE", "50"))
    if count is None:
        duration = duration or float(settings.setting("GEN_DURATION", "3600"))
    gen = services.start_generator(pattern, broker.bootstrap_servers(), rate, count, duration, extra_args or [])
    size = f"{count} events" if count else f"for {duration:.0f} s"
    print(f"  {name:<19}started (pid {gen.pid}): {rate:g} events/s {size}, log {gen.log}")
    return gen


def down(names: list[str] | None = None, volumes: bool = False) -> int:
    """Stop the named services, or everything: the Compose stack if `make up` started it, and every
    native service (generators, JupyterLab, Spark, broker)."""
    status = 0
    if not names and marker() == "compose":
        status = _compose(["down", *(["-v"] if volumes else [])])
    began = time.monotonic()
    known = procs.names()
    unknown = [n for n in names or [] if n not in known and n != "broker"]
    if unknown:
        raise StackError(f"no service {', '.join(unknown)} in {lab_home() / 'run'}; known: broker, {', '.join(known)}")
    targets = [s for s in (procs.load(n) for n in known if not names or n in names) if s]
    live = [s for s in targets if procs.is_running(s)]
    procs.stop(targets)
    for service in targets:  # a token the stack's lookup service generated lives as long as it runs
        if service.name == LOOKUP and service.extra.get("token_from", "$").startswith("/"):
            Path(service.extra["token_from"]).unlink(missing_ok=True)
    stopped = [f"{s.name} (pid {s.pid})" for s in live]
    if not names or "broker" in names:
        info = broker.stop_background()
        if info:
            stopped.append(f"broker (pid {info.pid})")
        if not names and status == 0:
            (lab_home() / "stack").unlink(missing_ok=True)
    print(f"stopped {', '.join(stopped)} in {time.monotonic() - began:.1f} s" if stopped
          else "no native lab service was running")
    return status


def rows() -> list[tuple[str, str, str, str, str]]:
    """(service, state, pid, memory, url) for the broker, Spark, JupyterLab, the lookup service and
    any generator; memory is the RSS of the service's process tree (executors under the worker,
    kernels under JupyterLab)."""
    info = broker.running_broker()
    if info:
        table = [("broker", "healthy", str(info.pid), _memory(info.pid), info.bootstrap_servers)]
    else:
        table = [("broker", "exited" if (lab_home() / "broker.json").exists() else "stopped", "-", "-", "")]
    for name in CORE + [n for n in procs.names() if n not in CORE]:
        service = procs.load(name)
        if service is None:
            table.append((name, "stopped", "-", "-", ""))
        elif not procs.is_running(service):
            table.append((name, "exited", "-", "-", service.url))
        else:
            health = services.HEALTH.get(name)
            state = "running" if health is None else ("healthy" if health[0](service) else "starting")
            url = service.url + (f"  (web UI {service.extra['ui']})" if name == MASTER else "")
            table.append((name, state, str(service.pid), _memory(service.pid), url))
    return table


def _memory(pid: int) -> str:
    size = procs.resident(procs.tree([pid]))
    return f"{size / (1 << 30):.1f} GiB" if size >= 1 << 30 else f"{size >> 20} MiB"


def ps() -> int:
    if marker() == "compose":
        print("`make up` started the Docker Compose stack:")
        _compose(["ps"])
        _compose(["stats", "--no-stream", "--format", "table {{.Name}}\t{{.MemUsage}}"])
    table = rows()
    width = max(len(r[0]) for r in table) + 2
    print(f"{'SERVICE':<{width}}{'STATE':<10}{'PID':<9}{'MEMORY':<10}URL")
    for name, state, pid, memory, url in table:
        print(f"{name:<{width}}{state:<10}{pid:<9}{memory:<10}{url}")
    if all(r[1] == "stopped" for r in table):
        print("Nothing runs; start the lab with `make up` (or `make up-native`).")
    return 0


def logs(service: str | None = None, lines: int = 50, follow: bool = True) -> int:
    if marker() == "compose":
        return _compose(["logs", "--tail", str(lines), *(["-f"] if follow else []), *([service] if service else [])])
    broker_log = lab_home() / "broker.log"  # the background broker's (joinlab.broker.start_background)
    files = {p.stem: p for p in [broker_log, *sorted(procs.logs_dir().glob("*.log"))] if p.exists()}
    if service and service not in files:
        raise StackError(f"no log for {service!r}; logs exist for: {', '.join(files) or 'nothing yet'}")
    chosen = [files[service]] if service else list(files.values())
    if not chosen:
        print(f"no logs yet in {procs.logs_dir()}; start the lab with `make up`")
        return 0
    if follow:
        sys.stdout.flush()
        os.execvp("tail", ["tail", "-n", str(lines), "-F", *map(str, chosen)])
    for path in chosen:
        print(f"==> {path} <==")
        print(services.tail(str(path), lines, indent=""))
    return 0


def _compose(args: list[str]) -> int:
    cmd = ["docker", "compose", *args]
    print(f"$ {' '.join(cmd)}")
    try:
        return subprocess.run(cmd, cwd=settings.project_dir()).returncode
    except OSError as exc:
        print(f"could not run docker compose ({exc}); is Docker still installed?")
        return 1
