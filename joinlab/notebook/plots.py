"""The two plots every pattern notebook shows: records per topic over time, and per micro-batch
records in vs out next to the state size. They take the tables of `Lab.timeline` and `Lab.progress`."""
from __future__ import annotations

import pandas as pd


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
