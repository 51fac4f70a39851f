#!/usr/bin/env python3
"""``app.py`` with the serving charts left out, for scripts/bench_synth.py: the difference to a
normal synth is the synth time the charts add. Takes app.py's arguments (``--outdir DIR ...``)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import app as entry  # noqa: E402
import stacks.platform_stack  # noqa: E402


class _NoServing:
    def __init__(self, *args: object, **kwargs: object) -> None:
        pass


if __name__ == "__main__":
    stacks.platform_stack.ServingWorkloads = _NoServing  # type: ignore[assignment,misc]
    sys.exit(entry.main(sys.argv[1:]))
