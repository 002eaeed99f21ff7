"""Settings, all from environment variables, so the same code runs in make, CI, notebooks and Docker."""
from __future__ import annotations

import os
from pathlib import Path


def lab_home() -> Path:
    """Where the lab keeps local state (broker pid and log, checkpoints): $LAB_HOME or ./.lab."""
    path = Path(os.environ.get("LAB_HOME", ".lab")).resolve()
    path.mkdir(parents=True, exist_ok=True)
    return path


def topic_partitions() -> int:
    """Partitions for the topics the lab creates ($LAB_TOPIC_PARTITIONS, default 3)."""
    return int(os.environ.get("LAB_TOPIC_PARTITIONS", "3"))


def spark_master() -> str:
    """$SPARK_MASTER; else the native stack's standalone master while it runs (`make up-native`,
    found through its state file under lab_home()); else a local master with every core."""
    configured = os.environ.get("SPARK_MASTER")
    if configured:
        return configured
    from joinlab.stack import running_master_url
    return running_master_url() or "local[*]"


def shuffle_partitions() -> int:
    """Shuffle (and state store) partitions; small by default because the lab runs on a laptop."""
    return int(os.environ.get("LAB_SHUFFLE_PARTITIONS", "4"))
