"""The Kafka image's health check: healthy when the broker at HOST:PORT answers a Metadata request
that lists at least one broker and, where CLUSTER_ID is set (the image's environment, or
--cluster-id), names that cluster. Only the standard library: the image has Python, not a Kafka client.

    python3 /etc/kafka/docker/healthcheck.py kafka:19092      # exit 0 healthy, 1 not (and why)
"""
from __future__ import annotations

import argparse
import os
import socket
import struct
import sys

METADATA, VERSION = 3, 4  # Metadata v4: the oldest version Kafka 4.x still answers (KIP-896)


def _string(data: bytes, at: int) -> tuple[str | None, int]:
    (length,) = struct.unpack_from(">h", data, at)
    at += 2
    if length < 0:
        return None, at
    return data[at:at + length].decode(), at + length


def metadata(address: str, timeout_s: float) -> tuple[list[tuple[int, str, int]], str | None]:
    """(brokers as (node id, host, port), cluster id) from a Metadata v4 request for no topics."""
    host, _, port = address.rpartition(":")
    client = b"joinlab-healthcheck"
    request = struct.pack(">hhih", METADATA, VERSION, 1, len(client)) + client + struct.pack(">ib", 0, 0)
    with socket.create_connection((host, int(port)), timeout=timeout_s) as sock:
        sock.sendall(struct.pack(">i", len(request)) + request)
        (size,) = struct.unpack(">i", _read(sock, 4))
        data = _read(sock, size)
    correlation, _throttle, count = struct.unpack_from(">iii", data, 0)
    if correlation != 1:
        raise ValueError(f"answer to another request (correlation id {correlation})")
    at, brokers = 12, []
    for _ in range(count):
        (node,) = struct.unpack_from(">i", data, at)
        name, at = _string(data, at + 4)
        (broker_port,) = struct.unpack_from(">i", data, at)
        _rack, at = _string(data, at + 4)
        brokers.append((node, name, broker_port))
    cluster_id, _ = _string(data, at)
    return brokers, cluster_id


def _read(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError("the connection closed mid-answer")
        data += chunk
    return data


def problem(address: str, cluster_id: str | None, timeout_s: float = 5.0) -> str | None:
    """None when healthy, else what is wrong."""
    try:
        brokers, answered = metadata(address, timeout_s)
    except (OSError, ValueError, struct.error) as exc:
        return f"no Kafka answer from {address}: {exc}"
    if not brokers:
        return f"{address} answered, but lists no broker yet"
    if cluster_id and answered != cluster_id:
        return f"{address} belongs to cluster {answered}, not {cluster_id}"
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("address", nargs="?", default="localhost:9092", help="HOST:PORT (default localhost:9092)")
    parser.add_argument("--cluster-id", default=os.environ.get("CLUSTER_ID") or None,
                        help="the cluster id it must report (default: $CLUSTER_ID, if set)")
    parser.add_argument("--timeout", type=float, default=5.0, help="seconds (default 5)")
    args = parser.parse_args(argv)
    found = problem(args.address, args.cluster_id, args.timeout)
    if found:
        print(f"unhealthy: {found}", file=sys.stderr)
        return 1
    print(f"healthy: {args.address}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
