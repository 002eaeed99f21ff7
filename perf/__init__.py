"""Studies behind the lab's settings, apart from the lab: how to run each is in perf/README.md."""
