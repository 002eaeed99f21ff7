"""The lab's commands run as a user runs them, watched: every process's command line while they
run (read every 0.2 s), and every line they print. For the tests that say no secret shows on a
command line or in a printed line (test_secured_kafka, test_own_spark)."""
from __future__ import annotations

import subprocess
import sys
import threading
from contextlib import contextmanager
from typing import Iterator

import psutil

from tests.conftest import ROOT


class Watched:
    def __init__(self) -> None:
        self.command_lines: set[str] = set()
        self.printed: list[str] = []

    def scan(self) -> int:
        """Read every process's command line now; returns how many processes there were."""
        seen = 0
        for process in psutil.process_iter(["cmdline"]):
            self.command_lines.add(" ".join(process.info["cmdline"] or []))
            seen += 1
        return seen

    @contextmanager
    def scanning(self) -> Iterator[None]:
        """Command lines read every 0.2 s while the block runs."""
        stop = threading.Event()

        def scan() -> None:
            while not stop.is_set():
                self.scan()
                stop.wait(0.2)
        scanner = threading.Thread(target=scan, daemon=True)
        scanner.start()
        try:
            yield
        finally:
            stop.set()
            scanner.join()

    def joinlab(self, env: dict, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
        """`joinlab ARGS` in `env`, watched while it runs."""
        with self.scanning():
            done = subprocess.run([sys.executable, "-m", "joinlab", *args], cwd=ROOT, env=env, capture_output=True,
                                  text=True, timeout=timeout)
        self.printed += done.stdout.splitlines() + done.stderr.splitlines()
        return done

    def holding(self, secret: str) -> list[str]:
        """The command lines and printed lines that show `secret`."""
        return [line[:300] for line in [*self.command_lines, *self.printed] if secret in line]
