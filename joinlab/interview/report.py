"""What an interviewer reads after a session (`joinlab interview check ... --report FILE.md`): each
scenario per variant with its cause, the live stage, the minutes a candidate took, and the guide's
questions that fit what failed.

A packed workspace holds LOG: the pack's time, to which every check of a file in it appends its
own time and result, so the minutes from the pack to the first check and to the first full pass
(every scenario and the live stage) can be read off later, wherever the file is graded.
"""
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
    path = Path(solution).parent / LOG
    if not path.is_file():
        return None
    log = json.loads(path.read_text())
    live = report["live"]
    log["checks"].append({"at": now(), "ok": report["ok"], "live": None if live is None else live["ok"],
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


def questions(pattern: str, failed: list[dict], guide: Path = ROOT / "docs" / "interviewing.md") -> list[str]:
    """The guide's items (bullets, table rows) that name a failed scenario or a failed variant; with
    nothing failed, the exercise's follow-ups."""
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


def markdown(report: dict, live_lines: list[str], log: dict | None) -> str:
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
    out += ["", "## Live stage", "", "```", *live_lines, "```", "", "## Time", "", *minutes(log), "",
            "## Questions from the guide", ""]
    failed = [s for s in scenarios if not s["ok"]]
    out += questions(ex.pattern, failed) or ["- (none)"]
    return "\n".join(out) + "\n"
