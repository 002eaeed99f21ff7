"""The interview notebooks' helpers: processors (or functions) written in a cell as a solution
module, the scenarios as a table, and the live output against the reference as a picture."""
from __future__ import annotations

import types

import pandas as pd

from joinlab import patterns
from joinlab.kit import solutions
from joinlab.interview import exercise
from joinlab.interview import scenarios as fast


def solution_of(**classes) -> types.ModuleType:
    """Classes or functions defined in the notebook (e.g. TweetViewsProcessor=TweetViewsProcessor) as a
    solution module; Spark pickles them by value, as it does anything of the notebook's own."""
    module = types.ModuleType("notebook_solution")
    module.__dict__.update(classes)
    return module


def run_scenarios(pattern: str, solution: types.ModuleType | None) -> pd.DataFrame:
    """Every visible scenario through `solution`'s processors (None: the lab's own answer), as sent and
    in the grader's variants; prints each failure in words."""
    job = patterns.job(pattern)
    module = solutions.of(job.SOLUTION, job.PROCESSORS, solution)
    table = []
    for scenario in fast.load_dir(exercise(pattern).scenarios()):
        result = fast.graded(pattern, module, scenario)
        table.append({"scenario": result["name"], "ok": result["ok"], **result["variants"]})
        if not result["ok"]:
            print("\n".join(result["details"]), end="\n\n")
    passed = sum(row["ok"] for row in table)
    print(f"{passed} of {len(table)} scenarios passed" + ("" if passed < len(table) else ": on to the live stage"))
    return pd.DataFrame(table)


def wait_decided(lab, timeout_s: float = 600) -> None:
    """Until the job has read every input record and, for an event-time pattern, run a micro-batch
    with the watermark they imply (newest event time - delay, as the reference computes it): only
    then has it decided all that the reference expects."""
    lab.wait_caught_up(timeout_s)
    final = patterns.reference(lab.pattern).final_watermark_ms(lab.records(lab.job.INPUT_TOPICS))
    if final is None:
        return

    def watermark_ms() -> int:
        mark = ((lab.query.lastProgress or {}).get("eventTime") or {}).get("watermark")
        return int(pd.Timestamp(mark).timestamp() * 1000) if mark else -1
    lab.wait_until(lambda: lab.caught_up() and watermark_ms() >= final, timeout_s,
                   "a micro-batch at the final watermark")


def plot_against_reference(report) -> None:
    """The live output's keys against the reference's, by verdict (a joinlab.verify Report)."""
    import matplotlib.pyplot as plt
    right = report.expected - len(report.missing) - len(report.stale) - len(report.mismatched)
    verdicts = {"right": right, "missing": len(report.missing), "stale": len(report.stale),
                "different": len(report.mismatched), "extra": len(report.extra)}
    fig, ax = plt.subplots(figsize=(8, 3))
    bars = ax.barh(list(verdicts), list(verdicts.values()),
                   color=["tab:green", "tab:red", "tab:orange", "tab:purple", "tab:gray"])
    ax.bar_label(bars)
    ax.invert_yaxis()
    ax.set(xlabel="keys", title=f"your output against the reference: {report.expected} keys expected")
    fig.tight_layout()
