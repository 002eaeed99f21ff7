"""What an interviewer reads after a session (`joinlab interview check ... --report FILE.md`): each
scenario per variant with its cause, the live stage, the minutes a candidate took (a workspace's
LOG holds the pack's time, and every check of a file in it appends its own time and result), and
the guide's questions that fit what failed."""
from __future__ import annotations

import json
import re
from datetime import datetime, timezone
from pathlib import Path

from joinlab.interview import ROOT, exercise
from joinlab.interview import scenarios as fast

LOG = "interview-log.json"


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def record(solution: Path, report: dict) -> dict | None:
    """Append this check to the workspace's LOG, if the solution is in a workspace; the log."""
    path = solution.parent / LOG
    if not path.is_file():
        return None
    log = json.loads(path.read_text())
    log["checks"].append({"at": now(), "ok": report["ok"], "live": report["live"] and report["live"]["ok"],
                          "held_back": any(s["hidden"] for s in report["fast"]["scenarios"])})
    path.write_text(json.dumps(log, indent=1) + "\n")
    return log


def minutes(log: dict | None) -> list[str]:
    """From the pack to the candidate's first check and first full pass (held-back runs are the interviewer's)."""
    if log is None:
        return ["Not a packed workspace: no times."]
    packed = datetime.fromisoformat(log["packed"])
    own = [c for c in log["checks"] if not c["held_back"]]
    after = lambda c: f"{(datetime.fromisoformat(c['at']) - packed).total_seconds() / 60:.0f} min"  # noqa: E731
    full = next((c for c in own if c["ok"] and c["live"]), None)
    return [f"Packed at {log['packed']}; {len(own)} checks by the candidate.",
            f"First check: {after(own[0]) if own else 'none'} after the pack.",
            "First full pass (every scenario and the live stage): "
            + (f"{after(full)} after the pack." if full else "none.")]


def questions(pattern: str, failed: list[dict]) -> list[str]:
    """The guide's items (bullets, table rows) that name a failed scenario or a failed variant; with
    nothing failed, the exercise's follow-ups."""
    guide = ROOT / "docs" / "interviewing.md"
    if not guide.is_file():
        return ["(The guide, docs/interviewing.md, is not here: grade in the lab for its questions.)"]
    text = guide.read_text()
    if not failed:
        section = re.search(rf"\n## Exercise \d+: {pattern.replace('-', ' ')}\n(.*?)(?=\n## |\Z)", text, re.S)
        text = section.group(1).split("**Follow-ups, and what to listen for:**")[-1].split("**Held back:**")[0]
    items = [" ".join(i.split()) for i in re.split(r"\n(?=\s*- |\| )|\n\n", text)]
    marks = {f"`{s['name']}`" for s in failed} | {f"**{v}**" for s in failed if s["variants"][fast.AS_SENT]
                                                 for v, ok in s["variants"].items() if not ok}
    chosen = [i for i in items if i.startswith(("- ", "| ")) and (not failed or any(m in i for m in marks))]
    return [i if i.startswith("- ") else "- (" + ") ".join(c.strip() for c in i.strip("| ").split("|", 1))
            for i in chosen]


def live_lines(report: dict) -> list[str]:
    """The live stage for a person: not run and why, the job's error, or the verdict and the stories."""
    live, scenarios = report["live"], report["fast"]["scenarios"]
    if live is None:
        return ["Live stage: not run" + (" (every scenario must pass first; --live runs it anyway)"
                                         if report["fast"]["failed"] else "")]
    if live["error"]:
        return ([f"Live stage: the job failed with your {exercise(report['pattern']).what}:"]
                + ["  " + x for x in live["error"].splitlines()])
    out = [f"Live stage: the real job on {live['events']} seeded events (disorder, duplicates, malformed records), "
           f"stopped after {live['batches_before_restart']} micro-batches and restarted from its checkpoint at batch "
           f"{live['restarted_at_batch']}, {live['seconds']:.0f} s:"]
    out += ["  " + x if x else "" for x in live["report"] + live["stories"]]
    restarted = [s["name"] for s in scenarios if not s["variants"][fast.RESTART]]
    if restarted and not live["ok"]:
        out += ["", f"  The fast stage's restart failed too ({', '.join(restarted)}): it "
                    f"{fast.VARIANTS[fast.RESTART][0]}, which loses keys and leaves them stale here."]
    return out


def markdown(report: dict) -> str:
    ex = exercise(report["pattern"])
    variants = [fast.AS_SENT, *fast.VARIANTS]
    out = [f"# Interview report: {ex.pattern} (level {ex.level})", "",
           f"Solution `{report['solution']}`, graded {now()}: **{'PASS' if report['ok'] else 'FAIL'}**"
           f" in {report['seconds']:.0f} s.", ""]
    if report.get("error"):
        return "\n".join(out + [f"Cannot grade: {report['error']}", ""])
    scenarios = report["fast"]["scenarios"]
    out += ["## Scenarios (fast stage)", "", "| scenario | " + " | ".join(variants) + " | cause |",
            "|---|" + "---|" * (len(variants) + 1)]
    out += [f"| {s['name']}{' (held back)' if s['hidden'] else ''} | "
            + " | ".join("ok" if s["variants"][v] else "**FAIL**" for v in variants)
            + f" | {(s['cause'] or '').replace('|', '/')} |" for s in scenarios]
    out += ["", "## Live stage", "", "```", *live_lines(report), "```", "", "## Time", "", *minutes(report["log"]),
            "", "## Questions from the guide", ""]
    out += questions(ex.pattern, [s for s in scenarios if not s["ok"]]) or ["- (none)"]
    return "\n".join(out) + "\n"
