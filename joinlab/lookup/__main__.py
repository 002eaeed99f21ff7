"""`python -m joinlab.lookup`: the session lookup service, until Ctrl-C or SIGTERM."""
from __future__ import annotations

import argparse
import signal
import sys
import threading

from joinlab.broker import BrokerError, bootstrap_servers
from joinlab.generate import bounded, fraction
from joinlab.lookup.config import DEFAULT_PORT, PORT_ENV, TOKEN_ENV
from joinlab.lookup.service import LookupService, ServiceError

whole = bounded(int, 0)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m joinlab.lookup",
                                description="Serve the sessions of a Kafka topic over HTTP for the job that declares "
                                            "it as its LOOKUP (GET /sessions/<id> with a Bearer token, GET /health).")
    p.add_argument("--bootstrap", help="Kafka bootstrap servers (default: $KAFKA_BOOTSTRAP_SERVERS or the embedded "
                                       "broker from `make broker-start`)")
    p.add_argument("--topic", help="the sessions topic (default: the one a registered job's LOOKUP names)")
    p.add_argument("--port", type=whole, help=f"port (default ${PORT_ENV} or {DEFAULT_PORT}; 0 = a free one)")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1; 0.0.0.0 only inside "
                                                       "a container, whose published port is bound to 127.0.0.1)")
    faults = p.add_argument_group("fault injection (tests and demos)")
    faults.add_argument("--latency-ms", type=whole, default=0, help="delay every response by this many ms")
    faults.add_argument("--fail-first", type=whole, default=0, metavar="N",
                        help="answer 503 to the first N requests for each session id")
    faults.add_argument("--error-rate", type=fraction, default=0.0, metavar="P",
                        help="answer 503 to this fraction of session requests, at random (see --seed)")
    faults.add_argument("--seed", type=int, default=0, help="seed of --error-rate's randomness (default 0)")
    args = p.parse_args(argv)
    try:
        bootstrap = args.bootstrap or bootstrap_servers()
    except BrokerError as exc:
        p.error(f"{exc} Or pass --bootstrap HOST:PORT.")
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    try:
        service = LookupService(bootstrap, args.topic, port=args.port, host=args.host, latency_ms=args.latency_ms,
                                fail_first=args.fail_first, error_rate=args.error_rate, seed=args.seed).start()
    except ValueError as exc:  # a bad LAB_LOOKUP_PORT
        p.error(str(exc))
    except ServiceError as exc:
        print(f"lookup: {exc}", file=sys.stderr)
        return 2
    source = service.token_source  # where a client finds the token (never the token itself)
    token = (f"token from {source}" if source.startswith("$") else
             f"token in {source} (clients read it there, or from ${TOKEN_ENV})")
    injected = (f"; injected faults: latency {args.latency_ms} ms, fail-first {args.fail_first}, "
                f"error rate {args.error_rate} (seed {args.seed})"
                if args.latency_ms or args.fail_first or args.error_rate else "")
    print(f"lookup: serving sessions of {service.store.topic} from {bootstrap} at {service.url} (bound to {args.host}); "
          f"{token}{injected}", flush=True)
    try:
        stop.wait()
    finally:
        service.stop()
    print("lookup: stopped", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
