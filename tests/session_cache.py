"""A module-scoped fixture's value computed once per test session, not once per pytest-xdist worker.

Under ``make test`` (pytest-xdist, ``--dist loadgroup``) every test without an xdist_group is a work
unit of its own, so a module's tests run on every worker and each worker sets up the module's
fixtures again (a group would keep them on one worker, and the whole module in one unit). For a fixture that is deterministic, expensive and only read,
the first worker pickles its value (and leaves the files it wrote) in the root the workers share,
the session's temporary root one level above each worker's; the other worker waits on a lock, with
no CPU spent, and unpickles it. Without xdist the value is simply computed.
"""

from __future__ import annotations

import fcntl
import os
import pickle
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest

T = TypeVar("T")


def once_per_session(factory: pytest.TempPathFactory, name: str, compute: Callable[[Path], T]) -> T:
    """``compute(folder)`` once per session: ``folder`` is a new directory for the files the value
    names (every worker reads them where they are); ``name`` is unique among the session's callers."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return compute(factory.mktemp(name))
    root = factory.getbasetemp().parent / "session-cache"
    root.mkdir(exist_ok=True)
    path, folder = root / f"{name}.pickle", root / name
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if path.exists():
            return pickle.loads(path.read_bytes())
        shutil.rmtree(folder, ignore_errors=True)  # left by a worker that died computing it
        folder.mkdir()
        value = compute(folder)
        partial = path.with_suffix(".partial")
        partial.write_bytes(pickle.dumps(value))
        partial.replace(path)  # whole or absent
        return value
