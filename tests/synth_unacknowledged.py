"""``app.py`` with every project cdk-nag acknowledgment switched off, run by the tests in a
background process; takes app.py's arguments (``--outdir DIR -c KEY=VALUE ...``).

Synth is expected to fail validation (app.py exits 1); the templates are still written, and the
validation report lists every finding the acknowledgments would have silenced.

Except stacks/sweep_control.py's: its role exists only in a staged sweep's synthesis, so no
acknowledged synthesis holds it for tests/test_lint.py to compare with; it stays on here, and
tests/test_sweep_control_stack.py checks that it names exactly the wildcard of that role's policy."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import app as entry  # noqa: E402
import stacks.cost_guard  # noqa: E402
import stacks.nag  # noqa: E402
import stacks.results  # noqa: E402
import stacks.storage  # noqa: E402


def _no_acknowledgment(*args: object, **kwargs: object) -> None:
    return None


if __name__ == "__main__":
    stacks.nag.acknowledge = _no_acknowledgment
    stacks.storage.acknowledge = _no_acknowledgment
    stacks.results.acknowledge = _no_acknowledgment
    stacks.cost_guard.acknowledge = _no_acknowledgment
    sys.exit(entry.main(sys.argv[1:]))
