"""`joinlab interview ...`: check (grade), pack (a candidate workspace), scenarios (refresh)."""
from __future__ import annotations

from pathlib import Path

from joinlab.interview import EXERCISES, exercise


def add_parser(sub) -> None:
    i = sub.add_parser("interview", help="interview mode: grade a solution, pack a candidate workspace")
    actions = i.add_subparsers(dest="action", required=True)
    check = actions.add_parser("check", help="grade a solution: scenarios in memory, then the real job")
    check.add_argument("pattern", choices=EXERCISES)
    check.add_argument("--solution", metavar="FILE", type=Path,
                       help="the candidate's file (default: workspace/PATTERN/MODULE.py of `make interview`, "
                            "else the stub exercises/MODULE.py)")
    check.add_argument("--hidden", metavar="DIR", type=Path,
                       help="also run the held-back scenarios in DIR (interviewer)")
    check.add_argument("--scenarios", metavar="DIR", type=Path,
                       help="the visible scenarios (default: exercises/scenarios/...)")
    check.add_argument("--expectation", metavar="FILE", type=Path,
                       help="the live stage's events and expected output (a packed workspace has one; default: the "
                            "reference)")
    stage = check.add_mutually_exclusive_group()
    stage.add_argument("--fast", action="store_true",
                       help="scenarios only: no Kafka, and no Spark unless the pattern is Spark's own join")
    stage.add_argument("--live", action="store_true", help="run the live stage even if a scenario failed")
    check.add_argument("--seed", type=int, default=7, help="the live stage's events (default 7)")
    check.add_argument("--json", action="store_true", help="the report as JSON (for the interviewer)")
    check.add_argument("--report", metavar="FILE", type=Path,
                       help="also write the interviewer's report (Markdown) to FILE")
    pack = actions.add_parser("pack", help="write a candidate workspace with no solution in it")
    pack.add_argument("pattern", choices=EXERCISES)
    pack.add_argument("--out", metavar="DIR", type=Path, help="the workspace folder (default: workspace/PATTERN)")
    pack.add_argument("--archive", action="store_true", help="also write DIR.tar.gz")
    scen = actions.add_parser("scenarios", help="list a pattern's scenarios, or --refresh their expectations")
    scen.add_argument("pattern", choices=EXERCISES)
    scen.add_argument("--refresh", action="store_true", help="rewrite each expectation from the batch reference")
    i.set_defaults(func=run)


def run(args) -> int:
    # Each action imports its own module when it runs: `check` brings Spark, `pack` and the rest do not.
    if args.action == "check":
        from joinlab.interview.grade import main
        return main(args)
    if args.action == "pack":
        from joinlab.interview.pack import main
        return main(args)
    from joinlab.interview import scenarios as fast
    if args.refresh:
        changed = fast.refresh(args.pattern)
        print("\n".join(changed) if changed else "every expectation already equals the reference's")
        return 0
    ex = exercise(args.pattern)
    for scenario in fast.load_dir(ex.scenarios()) + fast.load_dir(ex.hidden(), hidden=True):
        print(f"{scenario.name}{' (held back)' if scenario.hidden else ''}: {scenario.says}")
    return 0

