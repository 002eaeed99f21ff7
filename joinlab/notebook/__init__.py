"""Helpers for the live notebooks in notebooks/: one `Lab` per pattern keeps the cells short.

    lab = Lab("tweet-views")            # connects to the broker (starts the background one if none)
    lab.create_topics()
    feed = lab.start_generator(count=3000, rate=100)   # a background thread, bounded
    query = lab.start_job()             # or attaches to the one already running in this kernel
    lab.peek("tweet-views", 5)          # the latest records of a topic, as a pandas DataFrame
    lab.wait_until(lambda: ..., 120, "what we wait for")
    lab.state("user")                   # the job's state, through Spark's state data source
    lab.verify()                        # the output topic against the batch reference
    lab.stop()

Nothing here knows a pattern: it asks joinlab.patterns. Sizes come from the environment (`setting`).
"""
from joinlab.notebook.env import default_lab_home, setting

default_lab_home()  # before anything reads LAB_HOME

from joinlab.notebook.feed import Feed  # noqa: E402
from joinlab.notebook.lab import DEFAULT_DISORDER, Lab  # noqa: E402
from joinlab.notebook.peek import frame, rows  # noqa: E402
from joinlab.notebook.progress import plot_progress, plot_timeline  # noqa: E402

__all__ = ["DEFAULT_DISORDER", "Feed", "Lab", "frame", "plot_progress", "plot_timeline", "rows", "setting"]
