"""`joinlab interview check`: the fast stage (scenarios), then the live stage (the real job), one
report; exit status 0 only when every scenario and the live stage pass. The live stage runs only
once every scenario passes: a candidate fixes what a scenario shows in seconds, not after a minute
of Spark (`--live` runs it anyway, `--fast` never).
"""
from __future__ import annotations

import json
import sys
import time
from dataclasses import asdict
from pathlib import Path

from joinlab import patterns
from joinlab.kit import solutions
from joinlab.interview import exercise
from joinlab.interview import report as interviewer
from joinlab.interview import scenarios as fast


def check(pattern: str, solution_file: Path, *, scenario_dir: Path | None = None, hidden_dir: Path | None = None,
          expectation: Path | None = None, live: str = "auto", seed: int = 7, count: int = 1200,
          say=lambda message: None) -> dict:
    """Grade `solution_file`; the report as a dict (what --json prints)."""
    began = time.monotonic()
    ex, job = exercise(pattern), patterns.job(pattern)
    report = {"pattern": pattern, "solution": str(solution_file), "ok": False,
              "fast": {"passed": 0, "failed": 0, "scenarios": []}, "live": None}
    try:
        module = solutions.of(job.SOLUTION, job.PROCESSORS, solutions.from_file(solution_file))
    except solutions.SolutionError as exc:
        return dict(report, error=str(exc), seconds=round(time.monotonic() - began, 1))
    # The held-back scenarios: hidden_dir/<module>/*.json, or hidden_dir/*.json itself.
    if hidden_dir and not hidden_dir.is_dir():
        raise SystemExit(f"--hidden {hidden_dir}: no such directory")
    held = hidden_dir / ex.module if hidden_dir and (hidden_dir / ex.module).is_dir() else hidden_dir
    found = fast.load_dir(scenario_dir or ex.scenarios()) + fast.load_dir(held, hidden=True)
    results = [fast.graded(pattern, module, scenario) for scenario in found]
    failed = sum(not r["ok"] for r in results)
    report["fast"] = {"passed": len(results) - failed, "failed": failed, "scenarios": results}
    fast_ok = failed == 0 and bool(found)
    if live == "always" or (live == "auto" and fast_ok):
        say(f"live stage: the real job with your {ex.what} (a minute or so)")
        from joinlab.interview import live as live_stage  # deferred: it starts Spark, the fast stage needs none
        result = live_stage.run(pattern, module, seed=seed, count=count, expectation=expectation, say=say)
        report["live"] = dict(asdict(result), ok=result.ok, seconds=round(result.seconds, 1))
    live_ok = report["live"] is not None and report["live"]["ok"]
    report["ok"] = fast_ok and (live_ok or live == "never")
    report["seconds"] = round(time.monotonic() - began, 1)
    report["log"] = interviewer.record(solution_file, report)
    return report


def lines(report: dict) -> list[str]:
    """The report for a person: a line per scenario, the failures in detail, the live stage, the verdict."""
    ex = exercise(report["pattern"])
    out = [f"joinlab interview check {report['pattern']} (exercise level {ex.level}; solution {report['solution']})"]
    if report.get("error"):
        return out + ["", f"cannot grade: {report['error']}", "", "RESULT: FAIL"]
    f = report["fast"]
    visible = [s for s in f["scenarios"] if not s["hidden"]]
    held = [s for s in f["scenarios"] if s["hidden"]]
    out += ["", f"Scenarios (fast stage, in memory): {sum(s['ok'] for s in visible)} of {len(visible)} passed"
            + (f"; held back: {sum(s['ok'] for s in held)} of {len(held)} passed" if held else "")]
    out += [f"  {'ok  ' if s['ok'] else 'FAIL'} {s['name']}" + (" (held back)" if s["hidden"] else "")
            + ("" if s["ok"] else f": {s['cause']}") for s in f["scenarios"]]
    for s in f["scenarios"]:
        if not s["ok"]:
            out += [""] + s["details"]
    if f["scenarios"] and all(not s["ok"] and s["emitted_nothing"] for s in f["scenarios"]):
        out += ["", f"Your {ex.what} emitted nothing in any scenario: start in {', '.join(ex.writes)} "
                    f"{'(handleInputRows) ' if ex.processors else ''}in {report['solution']}."]
    out += [""] + interviewer.live_lines(report)
    return out + ["", f"RESULT: {'PASS' if report['ok'] else 'FAIL'} in {report['seconds']:.0f} s"]


def main(args) -> int:
    ex = exercise(args.pattern)
    # The candidate's file of `make interview` (workspace/PATTERN/...), else the exercise's stub.
    packed = Path("workspace") / ex.pattern / f"{ex.module}.py"
    solution = args.solution or (packed if packed.is_file() else ex.stub())
    live = "never" if args.fast else "always" if args.live else "auto"
    say = (lambda message: None) if args.json else (lambda message: print(f"... {message}", file=sys.stderr,
                                                                           flush=True))
    report = check(args.pattern, solution, scenario_dir=args.scenarios, hidden_dir=args.hidden,
                   expectation=args.expectation, live=live, seed=args.seed, say=say)
    print(json.dumps(report, indent=2) if args.json else "\n".join(lines(report)))
    if args.report:
        args.report.write_text(interviewer.markdown(report))
    return 0 if report["ok"] else 1
