"""Where things live. (Policies, budgets and the TOML file grow here.)"""

from __future__ import annotations

import os
from pathlib import Path


def data_dir() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(base) / "session-recall"


def default_db() -> Path:
    """`RECALL_DB`, else recall.db under the user's XDG data directory."""
    env = os.environ.get("RECALL_DB")
    return Path(env).expanduser() if env else data_dir() / "recall.db"
