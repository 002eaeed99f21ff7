"""`joinlab`: the lab's command line. Each command imports what it needs when it runs: most bring
Spark in (seconds), and the commands that need none (broker, topics, lab, generate) answer at once."""
from __future__ import annotations

import argparse
import os
import sys
import tempfile

from joinlab import broker, patterns
from joinlab.broker import BrokerError
from joinlab.config import ParticipantError, checkpoint_of, on_server, query_name, topic_prefix
from joinlab.jars import JarsError
from joinlab.kit.solutions import SolutionError


def cmd_broker(args) -> int:
    if args.action == "stop":
        info = broker.stop_background()
        print(f"stopped the embedded broker (pid {info.pid})" if info else "no embedded broker was running")
        return 0
    info = broker.start_background() if args.action == "start" else broker.running_broker()
    if not info:
        print("embedded broker: not running (start it with `make broker-start`)")
        return 1
    print(f"embedded broker: Apache Kafka {info.version} running at {info.bootstrap_servers} "
          f"(pid {info.pid}, data {info.data_dir}, log {info.log_path})")
    return 0


def cmd_topics(args) -> int:
    from joinlab import topics
    bootstrap = broker.bootstrap_servers()
    if args.action == "list":  # a participant's own topics unless --all: the room's broker holds everyone's
        sizes = [s for s in topics.list_topics(bootstrap) if args.all or s.topic.startswith(topic_prefix())]
        width = max([len("TOPIC")] + [len(s.topic) for s in sizes]) + 2
        print(f"{'TOPIC':<{width}}{'PARTITIONS':>10}{'RECORDS':>10}   at {bootstrap}")
        for size in sizes:
            print(f"{size.topic:<{width}}{size.partitions:>10}{size.records:>10}")
        return 0
    if args.action == "tail":
        try:
            # a participant's `tweets` is `alice.tweets`, which they may name as well
            name = args.topic if args.topic.startswith(topic_prefix()) else topics.own(args.topic)
            for record in topics.tail(bootstrap, name, args.n, args.from_beginning, args.follow):
                print(topics.describe(record, compact=args.compact), flush=True)
        except topics.NoSuchTopic as exc:
            print(f"joinlab topics tail: {exc}", file=sys.stderr)
            return 2
        except KeyboardInterrupt:
            pass
        return 0
    for pattern in args.patterns or list(patterns.PATTERNS):
        names = topics.owned(patterns.all_topics(pattern))
        topics.create_topics(bootstrap, names)
        print(f"{pattern}: topics {', '.join(names)} ready at {bootstrap}")
    return 0


def cmd_run(args) -> int:
    from joinlab import runner
    from joinlab.spark import ServerError, executors, session, ui_url
    from joinlab.status import follow
    from joinlab.topics import create_topics, owned
    command = f"joinlab run {args.pattern}"  # job errors say `joinlab run PATTERN`: this pattern's in its place
    bootstrap = broker.bootstrap_servers()
    create_topics(bootstrap, owned(patterns.all_topics(args.pattern)))
    checkpoint = checkpoint_of(args.pattern, args.checkpoint)
    if args.reset:
        try:
            runner.fresh_checkpoint(checkpoint)
        except runner.CheckpointError as exc:
            print(f"{command}: {str(exc).replace('joinlab run PATTERN', command)}", file=sys.stderr)
            return 2
    if problem := _unwritable(checkpoint):
        print(f"{command}: the checkpoint directory {checkpoint} is not writable ({problem}). "
              "Free some space or fix its permissions, or choose another with --checkpoint DIR.", file=sys.stderr)
        return 2
    job = patterns.job(args.pattern)
    solution = _solution(job, args.solution)
    try:
        spark = session(f"job-{args.pattern}")
    except ServerError as exc:
        print(f"{command}: {exc}", file=sys.stderr)
        return 2
    with runner.services(job, bootstrap):
        try:
            query = runner.start(spark, job, bootstrap, checkpoint, counted=True, available_now=args.available_now,
                                 max_offsets_per_trigger=args.max_offsets_per_trigger,
                                 name=query_name(args.pattern.replace("-", "_")), solution=solution,
                                 fail_on_data_loss=args.fail_on_data_loss == "true",
                                 input_prefix=topic_prefix(), output_prefix=topic_prefix())
        except (runner.CheckpointError, ServerError) as exc:
            print(f"{command}: {str(exc).replace('joinlab run PATTERN', command)}", file=sys.stderr)
            return 1
        ui = ui_url(spark)  # None when the UI is off
        print(f"{args.pattern}: running, checkpoint {checkpoint}" + ("" if args.available_now else " (Ctrl-C stops)")
              + (f"\n{args.pattern}: Spark UI {ui} (Structured Streaming tab: rates, durations, state, watermark)"
                 if ui else ""), file=sys.stderr)
        try:
            follow(query, job, args.pattern, shown="quiet" if args.quiet else "json" if args.json else "line",
                   executors=lambda: executors(spark))
        except Exception as exc:  # the query failed: say why in a person's words, not a JVM stack
            text = runner.failure(exc).replace("joinlab run PATTERN", command)
            print(f"{command}: the job stopped. {text}\nCheckpoint: {checkpoint}", file=sys.stderr)
            return 1
    return 0


def _unwritable(directory: str) -> str | None:
    """Why `directory` cannot take a checkpoint (create it, write a file in it), or None. Checked
    before Spark starts, so the error is one line, and no half-written checkpoint is left."""
    from joinlab.runner import checkpoint_dir
    if on_server(directory):  # the server's side: its server says so, when the query starts
        return None
    try:
        checkpoint_dir(directory)  # in a room, one the server's user may write in
        tempfile.NamedTemporaryFile(dir=directory, prefix=".write-probe-").close()
    except OSError as exc:
        return exc.strerror or str(exc)
    return None


def _solution(job, path: str | None):
    """The module a job's processors come from: a candidate's file (--solution), else the lab's."""
    from joinlab.kit import solutions
    return solutions.of(job.SOLUTION, job.PROCESSORS, solutions.from_file(path) if path else None)


def cmd_verify(args) -> int:
    from joinlab.verify import verify
    report = verify(args.pattern, broker.bootstrap_servers())
    print("\n".join(report.lines()))
    return 0 if report.ok else 1


def cmd_state(args) -> int:
    checkpoint = checkpoint_of(args.pattern, args.checkpoint)
    if not on_server(checkpoint) and not os.path.isdir(os.path.join(checkpoint, "state")):
        print(f"joinlab state: no state in {checkpoint}; run the job first (`joinlab run {args.pattern}`), "
              "or pass --checkpoint DIR", file=sys.stderr)
        return 2
    from joinlab.runner import state_variables
    from joinlab.spark import session
    from joinlab.checkpoint_state import describe, refuse_unknown
    try:
        spark = session(f"state-{args.pattern}") if on_server(checkpoint) else None  # else: read here, before Spark starts
        if held := state_variables(checkpoint, spark):  # a --var that is not there
            refuse_unknown(args.var, held, checkpoint)
        spark = spark or session(f"state-{args.pattern}")
        print("\n".join(describe(spark, checkpoint, args.limit, args.var)))
    except ValueError as exc:
        print(f"joinlab state: {exc}", file=sys.stderr)
        return 2
    return 0


def cmd_demo(args) -> int:
    from joinlab.demo import run_demos
    chosen = list(patterns.PATTERNS) if "all" in args.patterns else args.patterns or [next(iter(patterns.PATTERNS))]
    if args.solution and len(chosen) != 1:
        print("joinlab demo: --solution goes with exactly one pattern", file=sys.stderr)
        return 2
    solution = _solution(patterns.job(chosen[0]), args.solution) if args.solution else None  # None: each job's own
    failed = run_demos(chosen, count=args.count, solution=solution)
    if len(chosen) > 1:
        print(f"\ndemo: {len(chosen) - len(failed)} of {len(chosen)} patterns verified"
              + (f"; FAILED: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


def cmd_lab(args) -> int:
    from joinlab.stack import lab
    from joinlab.stack.procs import StackError
    try:
        if args.action == "up":
            return lab.up(generators=args.generators, room=args.room)
        if args.action == "down":
            return lab.down(args.services, volumes=args.volumes)
        if args.action == "ps":
            return lab.ps()
        if args.action == "logs":
            return lab.logs(args.service, lines=args.lines, follow=not args.no_follow)
        lab.generate(args.pattern, args.rate, count=args.count, duration=args.duration, extra_args=args.rest)
        return 0
    except StackError as exc:
        print(f"joinlab lab {args.action}: {exc}", file=sys.stderr)
        return 2


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="joinlab", description="Stream Join Lab: stream-join patterns on Kafka and Spark.")
    sub = p.add_subparsers(dest="command", required=True)
    names = list(patterns.PATTERNS)

    b = sub.add_parser("broker", help="start, stop or check the embedded Apache Kafka broker")
    b.add_argument("action", choices=["start", "stop", "status"])
    b.set_defaults(func=cmd_broker)

    t = sub.add_parser("topics",
                       help="create, list or tail topics (on $KAFKA_BOOTSTRAP_SERVERS or the embedded broker)")
    t_sub = t.add_subparsers(dest="action", required=True)
    tc = t_sub.add_parser("create", help="create the topics of the given patterns (default: all)")
    tc.add_argument("patterns", nargs="*", metavar="PATTERN", help=f"one of: {', '.join(names)}")
    tl = t_sub.add_parser("list", help="every topic with its partitions and records (with $LAB_PARTICIPANT: "
                                       "the participant's own)")
    tl.add_argument("--all", action="store_true", help="every topic on the broker, other participants' too")
    tt = t_sub.add_parser("tail", help="a topic's last records: key, value, partition, offset, timestamp; "
                                       "dead letters with their reason")
    tt.add_argument("topic")
    tt.add_argument("-n", type=int, default=10, metavar="N", help="the last N records (default 10)")
    tt.add_argument("--from-beginning", action="store_true", help="every record from the start instead")
    tt.add_argument("-f", "--follow", action="store_true", help="then print new records as they arrive (Ctrl-C stops)")
    tt.add_argument("--compact", action="store_true", help="each value on one line")
    t.set_defaults(func=cmd_topics)

    # generate and compare hand every argument after PATTERN, --help too, to the pattern's own parser
    g = sub.add_parser("generate", help="produce a pattern's events (see `joinlab generate PATTERN --help`)",
                       epilog="`joinlab generate PATTERN --help` lists the generator's flags.")
    g.add_argument("pattern", choices=names)
    g.add_argument("rest", nargs=argparse.REMAINDER, help="the generator's flags")
    g.set_defaults(func=lambda args: patterns.generator(args.pattern).main(args.rest) or 0)

    r = sub.add_parser("run", help="run a pattern's job on live topics")
    r.add_argument("pattern", choices=names)
    r.add_argument("--checkpoint", help="checkpoint directory, or a URI on the Spark server's side (default: "
                   "$LAB_CHECKPOINTS/PATTERN, else $LAB_HOME/checkpoints/PATTERN)")
    r.add_argument("--reset", action="store_true", help="delete the checkpoint first (reprocess from the start)")
    r.add_argument("--available-now", action="store_true", help="stop once caught up instead of running on")
    r.add_argument("--max-offsets-per-trigger", type=int, help="cap on records per micro-batch")
    r.add_argument("--fail-on-data-loss", choices=["true", "false"], default="true",
                   help="stop when the checkpoint's offsets are gone from the broker (default true); false "
                        "carries on from the records that exist")
    r.add_argument("--solution", metavar="FILE",
                   help="run the processors of this file (e.g. your exercises/PATTERN.py) instead of the lab's own")
    shown = r.add_mutually_exclusive_group()
    shown.add_argument("--quiet", action="store_true", help="no line per micro-batch")
    shown.add_argument("--json", action="store_true", help="one JSON object per micro-batch (for scripts)")
    r.set_defaults(func=cmd_run)

    v = sub.add_parser("verify", help="compare a pattern's output topic with its batch reference")
    v.add_argument("pattern", choices=names)
    v.set_defaults(func=cmd_verify)

    s = sub.add_parser("state", help="print a job's state from its checkpoint (Spark's state data source)")
    s.add_argument("pattern", choices=names)
    s.add_argument("--checkpoint", help="checkpoint directory, or a URI on the Spark server's side (default: "
                   "$LAB_CHECKPOINTS/PATTERN, else $LAB_HOME/checkpoints/PATTERN)")
    s.add_argument("--var", action="append", help="only this state variable (repeatable), e.g. --var joining; "
                                                  "the pattern page's State section lists them")
    s.add_argument("--limit", type=int, default=10, help="rows shown per state variable (default 10)")
    s.set_defaults(func=cmd_state)

    d = sub.add_parser("demo", help="generate, run until caught up, verify - on a fresh embedded broker")
    d.add_argument("patterns", nargs="*", metavar="PATTERN", choices=names + ["all"],
                   help=f"one or more of: {', '.join(names)}, or all (default {names[0]})")
    d.add_argument("--count", type=int, default=20000, help="events to generate (default 20000)")
    d.add_argument("--solution", metavar="FILE", help="run the processors of this file instead of the lab's own")
    d.set_defaults(func=cmd_demo)

    lab = sub.add_parser("lab", help="the lab without Docker: broker, Spark master and worker, JupyterLab "
                                     "(up, down, ps, logs, generate)")
    lab_sub = lab.add_subparsers(dest="action", required=True)
    up = lab_sub.add_parser("up", help="start every service (or report that it runs) and print the URLs")
    up.add_argument("--room", action="store_true",
                    help="and JupyterHub in front of it, for a workshop's participants (as root; docs/room.md)")
    up.add_argument("--generators", action="store_true",
                    help="also start every pattern's generator ($GEN_RATE events/s for $GEN_DURATION s)")
    down = lab_sub.add_parser("down", help="stop everything (or the named services) and wait until it is gone")
    down.add_argument("services", nargs="*", metavar="SERVICE", help="only these, e.g. gen-tweet-views")
    down.add_argument("--volumes", action="store_true", help="with Docker Compose: also delete its volumes")
    lab_sub.add_parser("ps", help="a table of the services: state, pid, memory, URL")
    logs = lab_sub.add_parser("logs", help="follow the services' log files")
    logs.add_argument("--service", help="only this service's log (e.g. spark-worker)")
    logs.add_argument("-n", "--lines", type=int, default=50, help="lines of history (default 50)")
    logs.add_argument("--no-follow", action="store_true", help="print and exit")
    gen = lab_sub.add_parser("generate", help="run a pattern's generator in the background against the broker",
                             epilog="Other flags go to the generator (`joinlab generate PATTERN --help`).")
    gen.add_argument("pattern", choices=names)
    gen.add_argument("--rate", type=float, help="events per second (default $GEN_RATE or 50)")
    size = gen.add_mutually_exclusive_group()
    size.add_argument("--count", type=int, help="events to send, then exit")
    size.add_argument("--duration", type=float, help="seconds to send for (default $GEN_DURATION or 3600)")
    lab.set_defaults(func=cmd_lab)

    c = sub.add_parser("compare", help="a pattern's simpler designs against its job, on the same events "
                                       "(see `joinlab compare PATTERN --help`)",
                       epilog="`joinlab compare PATTERN --help` lists the comparison's flags.")
    c.add_argument("pattern", choices=patterns.with_alternatives())
    c.add_argument("rest", nargs=argparse.REMAINDER, help="the comparison's flags")
    c.set_defaults(func=lambda args: patterns.alternatives(args.pattern).main(args.rest))

    from joinlab.interview.cli import add_parser as add_interview
    add_interview(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    args, extra = parser().parse_known_args(argv)
    if args.command == "lab" and args.action == "generate":
        args.rest = extra  # `lab generate` hands unknown flags to the generator
    elif extra:
        parser().error(f"unrecognized arguments: {' '.join(extra)}")
    try:
        return args.func(args)
    except (BrokerError, JarsError, SolutionError, ParticipantError) as exc:
        print(f"joinlab: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # Kafka refused or could not be reached: one line that says what to check
        from joinlab.kafka_settings import explain, redact
        if (line := explain(exc)) is None:
            raise
        print(f"joinlab: {redact(line)}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
