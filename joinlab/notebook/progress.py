"""What the job has done, as tables: records per topic over time, and one row per micro-batch
(the numbers of `joinlab run`'s status line: joinlab.status says where each comes from and why);
and the two plots of them every pattern notebook shows."""
from __future__ import annotations

import time
from typing import Any, Callable

import pandas as pd

from joinlab.status import Watcher, as_dict


def batches(job, recent: list) -> pd.DataFrame:
    """`Lab.progress` and `Lab.watch`: one row per micro-batch that ran, with the numbers of `joinlab
    run`'s status line (joinlab.status), the records it read in all, and its state's memory."""
    memory = {p["batchId"]: sum(op["memoryUsedBytes"] for op in p.get("stateOperators") or []) / 1024
              for p in map(as_dict, recent) if "batchId" in p}
    rows = []
    for status in Watcher(job).new(recent):
        row = {"batch": status.batch, **{f"in {t}": n for t, n in status.records_in.items()},
               "records in": sum(status.records_in.values()), **{f"out {t}": n for t, n in status.records_out.items()},
               "dead letters": status.dead_letters, "seconds": round(status.duration_s, 2)}
        if status.watermark is not None:
            row["watermark"] = status.watermark.replace("T", " ").rstrip("Z")
        if status.state_rows:
            row.update({"state rows": sum(status.state_rows), "state memory KiB": memory[status.batch]})
        rows.append(row)
    return pd.DataFrame(rows).set_index("batch") if rows else pd.DataFrame()


def timeline(records: pd.DataFrame, topics: list[str], freq: str = "1s",
             since: pd.Timestamp | None = None) -> pd.DataFrame:
    """`Lab.timeline` of `records`, a `frame`."""
    df = records if since is None or records.empty else records[records["time"] >= since - pd.Timedelta(freq)]
    if df.empty:
        return pd.DataFrame(columns=topics)
    counts = pd.crosstab(df["time"].dt.floor(freq), df["topic"]).asfreq(freq, fill_value=0).cumsum()
    counts = counts[[t for t in topics if t in counts.columns]]
    counts.index = pd.Index((counts.index - counts.index[0]).total_seconds(), name="seconds")
    return counts


def wait_until(condition: Callable[[], Any], timeout_s: float, what: str, interval_s: float = 0.25,
               check: Callable[[], None] | None = None) -> Any:
    """Poll `condition` until it returns something truthy (returned); TimeoutError after `timeout_s`.
    `check` runs on every poll and may raise to give up early (e.g. the query failed)."""
    deadline = time.monotonic() + timeout_s
    while True:
        if check:
            check()
        if value := condition():
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout_s:.0f}s waiting for {what}")
        time.sleep(interval_s)


def plot_timeline(timeline: pd.DataFrame, title: str = "records per topic over time") -> None:
    """Cumulative records per topic against wall time."""
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(9, 3.5))
    for topic in timeline.columns:
        ax.plot(timeline.index, timeline[topic], label=topic, drawstyle="steps-post")
    ax.set(xlabel="seconds since the first record", ylabel="records (cumulative)", title=title)
    ax.legend(loc="best")
    fig.tight_layout()


def plot_progress(progress: pd.DataFrame) -> None:
    """Per micro-batch: records in vs out per output topic; state rows and memory."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator
    if progress.empty:
        print("no micro-batch with input yet")
        return
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 3.5))
    outs = [c for c in progress.columns if c.startswith("out ")]
    progress[["records in", *outs]].plot.bar(ax=left, width=0.8)
    left.set(xlabel="micro-batch", ylabel="records", title="records in vs out, per micro-batch")
    if "state rows" in progress:
        progress["state rows"].plot(ax=right, marker="o", label="state rows")
        right.set(xlabel="micro-batch", ylabel="rows", title="state size")
        right.xaxis.set_major_locator(MaxNLocator(integer=True))
        memory = right.twinx()
        progress["state memory KiB"].plot(ax=memory, marker="x", color="tab:red", label="memory KiB")
        memory.set_ylabel("memory KiB")
        right.legend(loc="upper left")
        memory.legend(loc="lower right")
    fig.tight_layout()
