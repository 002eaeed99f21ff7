"""The workshop, rehearsed: docs/workshop.md's sections in order, on a native stack, with the page's
own commands (its generators at its rate, `joinlab run PATTERN --reset`, `joinlab topics ...`,
`joinlab state ...`), and what the page shows people will see, taken from that run.

Each output the page shows sits in a fenced block right after an `<!-- output: NAME -->` comment.
`Walk` runs the sections and keeps each block's text as the run printed it (paths, ports and the
token put as the page writes them). tests/test_lab_stack.py walks the page on its stack and checks
that every block has the shape of the run's (numbers, times, texts and dead-letter reasons aside:
the same lines, words, columns and JSON fields); this module, run as a program, walks it on a
stack of its own and writes the run's outputs into the page:

    .venv/bin/python -m tests.workshop            # rewrites docs/workshop.md's output blocks
    .venv/bin/python -m tests.workshop --check    # only says which blocks differ in shape
"""
from __future__ import annotations

import argparse
import json
import re
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

from joinlab.stack import settings
from perf import memory

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "workshop.md"
# `<!-- output: NAME -->` and the fenced block right after it, both indented alike (in a list item).
BLOCK = re.compile(r"^( *)<!-- output: ([\w-]+) -->\n\1```\n(.*?)^\1```\n", re.S | re.M)


# --- The page's output blocks --------------------------------------------------------------------

def blocks(text: str) -> dict[str, str]:
    """NAME -> the text of the fenced block after its `<!-- output: NAME -->` marker."""
    found = {}
    for match in BLOCK.finditer(text):
        indent, name, body = match.groups()
        assert name not in found, f"two output blocks named {name}"
        found[name] = "".join(line.removeprefix(indent) for line in body.splitlines(keepends=True))
    return found


def rewrite(text: str, outputs: dict[str, str]) -> str:
    """The page with each named block's text replaced by `outputs[NAME]` (the others kept)."""
    def block(match: re.Match) -> str:
        indent, name, body = match.groups()
        if name not in outputs:
            return match.group()
        lines = "".join(f"{indent}{line}\n" for line in outputs[name].rstrip().splitlines())
        return f"{indent}<!-- output: {name} -->\n{indent}```\n{lines}{indent}```\n"
    return BLOCK.sub(block, text)


SHAPES = [
    (re.compile(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d(?::\d\d(?:\.\d+)?)?Z?"), "TIME"),  # event times, watermarks
    (re.compile(r"watermark (?:TIME|-)"), "watermark W"),                           # none yet: -
    (re.compile(r"DEAD LETTER  .*?  \(from \S+ partition"), "DEAD LETTER REASON (from TOPIC partition"),
    (re.compile(r"rejected value: .*"), "rejected value: VALUE"),
    (re.compile(r'(:\s*)"(?:[^"\\]|\\.)*"'), r'\1"TEXT"'),                           # JSON string values
    (re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?"), "N"),
    (re.compile(r"[ \t]+"), " "),
]


def shape(text: str) -> list[str]:
    """What a block says, without what changes from run to run: one entry per line."""
    lines = []
    for line in text.strip().splitlines():
        for pattern, replacement in SHAPES:
            line = pattern.sub(replacement, line)
        lines.append(line.strip())
    return lines


def differences(page: dict[str, str], run: dict[str, str]) -> list[str]:
    """Why the page's blocks are not what the run printed, one entry per block (none: they agree)."""
    found = []
    for name in sorted(set(page) | set(run)):
        if name not in run:
            found.append(f"{name}: on the page, not printed by the run")
        elif name not in page:
            found.append(f"{name}: printed by the run, not on the page")
        elif shape(page[name]) != shape(run[name]):
            wanted, got = shape(page[name]), shape(run[name])
            first = next((i for i, (a, b) in enumerate(zip(wanted, got)) if a != b), min(len(wanted), len(got)))
            found.append(f"{name}: line {first + 1} differs\n  page: {wanted[first:first + 1]}\n  run:  {got[first:first + 1]}"
                         f"\n(page {len(wanted)} lines, run {len(got)})\n--- the run printed:\n{run[name]}")
    return found


# --- Walking the page ----------------------------------------------------------------------------

def wait_for(condition, timeout_s: float, what: str, interval_s: float = 0.5):
    """perf.memory's wait, looking twice a second."""
    return memory.wait_for(condition, timeout_s, what, interval_s)


def status_lines(text: str, pattern: str) -> list[str]:
    return re.findall(rf"^{re.escape(pattern)} batch \d+ \|.*$", text, re.M)


def read_in(line: str) -> int:
    """The records a status line says its batch read."""
    part = line.split(" | ")[1].removeprefix("in ")
    return sum(int(n) for n in re.findall(r" (\d+)(?:,|$)", part))


class Job:
    """`joinlab run PATTERN --reset` as a participant starts it in a terminal (Ctrl-C stops it)."""

    def __init__(self, walk: "Walk", pattern: str):
        self.pattern, self.log = pattern, walk.folder / f"{pattern}.log"
        with open(self.log, "wb") as out:
            self.process = subprocess.Popen([sys.executable, "-m", "joinlab", "run", pattern, "--reset"],
                                            env=walk.env, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
                                            start_new_session=True)

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def lines(self) -> list[str]:
        """Its status lines so far; AssertionError with its log if it has ended."""
        assert self.process.poll() is None, f"joinlab run {self.pattern} ended:\n{self.text()[-3000:]}"
        return status_lines(self.text(), self.pattern)

    def wait(self, condition, what: str, timeout_s: float = 600) -> list[str]:
        return wait_for(lambda: condition(self.lines()) and self.lines(), timeout_s, f"{what} ({self.pattern})")

    def header(self) -> list[str]:
        return [line for line in self.text().splitlines()
                if line.startswith((f"{self.pattern}: running", f"{self.pattern}: Spark UI"))]

    def stop(self) -> None:
        """Ctrl-C, as the page says; the job stops after its running batch."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=120)
            except subprocess.TimeoutExpired:
                self.process.kill()
                raise AssertionError(f"joinlab run {self.pattern} did not stop on Ctrl-C:\n{self.text()[-3000:]}")
        assert f"{self.pattern}: stopping after the running batch (Ctrl-C)" in self.text(), self.text()[-3000:]


class Walk:
    """The page's sections in order on `stack` (tests/test_lab_stack.py's namespace: env, home, out,
    bootstrap, token); `outputs` collects each output block's text."""

    def __init__(self, stack, folder: Path):
        self.stack, self.folder = stack, folder
        # The stack's environment (tests/test_lab_stack.lab_env: the server's web UI on, as a participant has it).
        self.env = dict(stack.env)
        self.outputs: dict[str, str] = {}
        self.jobs: list[Job] = []

    # the commands, as on the page
    def joinlab(self, *args: str, timeout: float = 300, ok: bool = True) -> str:
        done = subprocess.run([sys.executable, "-m", "joinlab", *args], env=self.env, cwd=ROOT, capture_output=True,
                              text=True, timeout=timeout)
        assert done.returncode == 0 or not ok, f"joinlab {' '.join(args)}:\n{done.stdout}\n{done.stderr[-3000:]}"
        return done.stdout

    def generate(self, pattern: str, *args: str) -> None:
        """`joinlab lab generate PATTERN ARGS`: a generator in the background, as the page starts it."""
        self.joinlab("lab", "generate", pattern, *args)

    def stop_generator(self, pattern: str) -> None:
        self.joinlab("lab", "down", f"gen-{pattern}")

    def run(self, pattern: str) -> Job:
        self.jobs.append(Job(self, pattern))
        return self.jobs[-1]

    def as_on_the_page(self, text: str) -> str:
        """The run's paths, ports and token as the page writes them (`make up` in the project folder
        on the default ports)."""
        text = text.replace(str(self.stack.home), ".../.lab").replace(self.stack.token, "...")
        for key, spec in settings.PORTS.items():
            text = re.sub(rf"(?:(?<=127\.0\.0\.1:)|(?<=localhost:)){self.env[spec.env]}\b", str(spec.default), text)
        return text

    def show(self, name: str, text: str) -> None:
        self.outputs[name] = self.as_on_the_page(text).rstrip() + "\n"

    def close(self) -> None:
        for job in self.jobs:
            if job.process.poll() is None:
                job.process.kill()
                job.process.wait(timeout=60)

    # --- 0:00 Start the lab
    def start_the_lab(self) -> None:
        out = self.stack.out
        self.show("lab-up", out[out.index("Stream Join Lab is up"):])
        ps = self.joinlab("lab", "ps")
        for service in ("broker", "spark-master", "spark-worker", "spark-connect", "jupyter", "lookup"):
            assert re.search(rf"^{service}\s+healthy\s+\d+\s+[\d.]+ [MG]iB", ps, re.M), ps

    # --- 0:10 Tweet views
    def tweet_views(self) -> Job:
        """The generator, then the job; its first status lines; the topics; a dead letter. The job
        keeps running (the next part of the page runs beside it)."""
        self.generate("tweet-views", "--rate", "50", "--duration", "600")
        job = self.run("tweet-views")
        lines = job.wait(lambda lines: len(lines) >= 4, "four status lines")
        self.show("tweet-views-run", "\n".join(job.header() + lines[:4]))
        # state rows: one per author, never one per tweet (each tweet names its author's user_id)
        rows = int(re.search(r"state rows (\d+)$", lines[3]).group(1))
        assert 0 < rows <= len(self.user_ids()) < sum(map(read_in, lines[:4])), lines[:4]
        listed = self.joinlab("topics", "list")
        assert re.search(r"^tweet-views\b", listed, re.M) and re.search(r"^tweets\b", listed, re.M), listed
        self.show("tweet-views-tail", self.joinlab("topics", "tail", "tweet-views", "-n", "1"))
        self.stop_generator("tweet-views")
        # the generator that sends malformed records, until the job has dead-lettered one
        self.generate("tweet-views", "--rate", "50", "--malformed", "0.01")
        wait_for(lambda: self.records("tweet-views-dlq"), 300, "a dead letter on tweet-views-dlq")
        self.stop_generator("tweet-views")
        self.show("tweet-views-dead-letter", self.joinlab("topics", "tail", "tweet-views-dlq", "-n", "1"))
        return job

    def records(self, topic: str) -> list:
        from joinlab.topics import read_topics
        return read_topics(self.stack.bootstrap, [topic])

    def user_ids(self) -> set[int]:
        """Every user id the input topics name (as a user or as a tweet's author)."""
        ids = set()
        for record in self.records("users") + self.records("tweets"):
            try:
                ids.add(json.loads(record.value)["user_id"])
            except (ValueError, TypeError, KeyError):  # a malformed record
                continue
        return ids

    def tweet_ids(self, topic: str = "tweets") -> set[int]:
        ids = set()
        for record in self.records(topic):
            try:
                ids.add(json.loads(record.value)["tweet_id"])
            except (ValueError, TypeError, KeyError):  # a malformed record
                continue
        return ids

    def caught_up(self, job: Job) -> bool:
        from joinlab.topics import records_on
        return sum(read_in(line) for line in job.lines()) == records_on(self.stack.bootstrap, ["users", "tweets"])

    def sent(self, *args: str) -> None:
        """`joinlab lab generate tweet-views ARGS`, until it has sent everything."""
        self.generate("tweet-views", *args)
        wait_for(lambda: re.search(r"^gen-tweet-views\s+exited", self.joinlab("lab", "ps"), re.M), 120,
                 "the generator to finish")

    def generator_again(self, job: Job) -> None:
        """A generator started again continues after what the topics hold; `--seed N` sent twice is
        said as old versions ignored."""
        sent = []
        for _ in range(2):  # the same command twice, as a participant would
            before = self.tweet_ids()
            self.sent("--rate", "400", "--count", "200")
            sent.append(self.tweet_ids() - before)
            assert sent[-1], "the generator sent no new tweet"
            wait_for(lambda: sent[-1] <= self.tweet_ids("tweet-views"), 600,
                     "the run's tweets as views out of the running job")
        assert not sent[0] & sent[1]
        logs = self.joinlab("lab", "logs", "--no-follow", "--service", "gen-tweet-views")
        said = [line.split(": ", 1)[1] for line in logs.splitlines() if "continues after them" in line]
        assert said, logs
        self.show("generator-again", "tweet-views: " + said[-1])
        wait_for(lambda: self.caught_up(job), 600, "the job to read both runs")
        from joinlab.verify import verify
        assert verify("tweet-views", self.stack.bootstrap).ok

        # the same events again only when asked: the job says it had them, not a bare `out 0`
        self.sent("--rate", "400", "--count", "100", "--seed", "5")
        wait_for(lambda: self.caught_up(job), 600, "the job to read the seeded run")
        seen = len(job.lines())
        self.sent("--rate", "400", "--count", "100", "--seed", "5")
        wait_for(lambda: self.caught_up(job), 600, "the job to read the seeded run again")
        again = job.lines()[seen:]
        old = [re.search(r"\| out tweet-views (\d+) \|.*\| (\d+) old versions? ignored", line) for line in again]
        assert again and all(m and m.group(1) == "0" and int(m.group(2)) == read_in(line)
                             for m, line in zip(old, again)), again
        self.show("seed-again", again[-1])
        job.stop()

    # --- 0:30 Car pollution
    def car_pollution(self) -> None:
        self.generate("car-pollution", "--rate", "50", "--duration", "600")
        job = self.run("car-pollution")
        lines = job.wait(lambda lines: len(lines) >= 2, "two status lines")
        assert all(re.search(r"\| state rows \d+ / \d+$", line) for line in lines[:2]), lines
        self.show("car-pollution-run", "\n".join(lines[:2]))
        self.joinlab("topics", "tail", "car-pollution-dlq")
        compared = self.joinlab("compare", "car-pollution")
        for design in ("naive", "wide", "tall"):
            assert design in compared, compared
        job.stop()
        self.stop_generator("car-pollution")

    # --- 0:50 Lottery
    def lottery(self) -> None:
        """Three status lines, the last a batch that read nothing, run because the watermark moved:
        the generator is stopped after two batches that read events."""
        self.generate("lottery", "--rate", "50", "--duration", "600")
        job = self.run("lottery")
        job.wait(lambda lines: len([line for line in lines if read_in(line)]) >= 2, "two batches that read events")
        self.stop_generator("lottery")
        # the first no-data batch once the generator is stopped (a warm server's batches are quick enough to find
        # no new events now and then while it sends, too)
        stopped = len(job.lines())
        lines = job.wait(lambda lines: any(read_in(line) == 0 for line in lines[stopped:]), "a no-data batch")
        last = next(i for i, line in enumerate(lines) if i >= stopped and read_in(line) == 0)
        shown = [line for line in lines[:last] if read_in(line)][-2:] + [lines[last]]
        for line in shown:
            assert re.search(r"\| watermark (?:-|[\d-]+ [\d:.]+) \| state rows \d+ / \d+ / \d+$", line), line
        marks = [re.search(r"\| watermark ([\d-]+ [\d:.]+) \|", line).group(1) for line in shown[-2:]]
        assert marks[0] < marks[1], f"the no-data batch ran without moving the watermark: {shown}"
        self.show("lottery-run", "\n".join(shown))
        self.joinlab("topics", "tail", "lottery-winners", "-n", "3")
        self.joinlab("topics", "tail", "lottery-rejections", "-n", "5")
        job.stop()

    # --- 1:10 Money enrichment
    def money_enrichment(self) -> None:
        self.generate("money-enrichment", "--rate", "50", "--duration", "600")
        job = self.run("money-enrichment")
        lines = job.wait(lambda lines: len([line for line in lines if read_in(line)]) >= 2, "two batches")
        self.show("money-enrichment-run", "\n".join([line for line in lines if read_in(line)][:2]))
        state = self.joinlab("state", "money-enrichment", "--var", "joining", "--limit", "5").splitlines()
        assert re.fullmatch(r"operator 1 \(transformWithStateInPySparkExec\), joining \(ValueState\): \d+ rows "
                            r"as of batch \d+", state[0]), state
        columns = state[1].split()
        for column in ("timer", "session", "waiting", "seen"):  # what the page says each row holds
            assert any(column in name for name in columns), state[:2]
        self.show("money-enrichment-state", state[0])  # its rows are as wide as their lists of transactions
        job.stop()
        self.stop_generator("money-enrichment")


# --- The program: a stack of its own, the page rewritten ------------------------------------------

def walk_on_a_stack_of_its_own(folder: Path) -> dict[str, str]:
    from tests import test_lab_stack as stack_tests
    env = stack_tests.lab_env(folder)
    env.setdefault("LAB_JARS", str(ROOT / ".lab" / "jars"))
    (folder / "notebooks").mkdir()
    up = stack_tests.joinlab(env, "lab", "up", timeout=420)
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        token = re.search(r"^JUPYTER_TOKEN=(\w+)$", (folder / ".env").read_text(), re.M).group(1)
        stack = SimpleNamespace(env=env, home=folder / "lab", out=up.stdout, token=token,
                                bootstrap=f"127.0.0.1:{env['LAB_BROKER_PORT']}")
        walk = Walk(stack, folder)
        try:
            for step in (walk.start_the_lab, walk.tweet_views):
                print(f"workshop: {step.__name__}", flush=True)
                job = step()
            print("workshop: generator_again", flush=True)
            walk.generator_again(job)
            for step in (walk.car_pollution, walk.lottery, walk.money_enrichment):
                print(f"workshop: {step.__name__}", flush=True)
                step()
        finally:
            walk.close()
        return walk.outputs
    finally:
        stack_tests.joinlab(env, "lab", "down", timeout=120)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="say which blocks differ in shape; write nothing")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="joinlab-workshop-") as tmp:
        outputs = walk_on_a_stack_of_its_own(Path(tmp))
    text = PAGE.read_text()
    problems = differences(blocks(text), outputs)
    print("\n".join(problems) or "every output block has the shape of the run's")
    if not args.check:
        PAGE.write_text(rewrite(text, outputs))
        print(f"wrote {len(outputs)} output blocks into {PAGE.relative_to(ROOT)}")
    return 1 if args.check and problems else 0


if __name__ == "__main__":
    sys.exit(main())
