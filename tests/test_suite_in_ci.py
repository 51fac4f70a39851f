"""What the suite does differently in CI: `.ci/run` runs `make test` with CI=true, and Hypothesis
(6.168.5, hypothesis/_settings.py: ``is_in_ci()``, then ``settings.load_profile("ci")``) then loads
its built-in "ci" profile, derandomized and with no example database. So a CI run draws the same
examples every time and cannot fail on one no earlier run met; a developer's `make test` draws new
ones, which is how the damaged-record carriage return was found (tests/damage.py). Pinned here:
an upgrade that dropped the profile would make CI fail at random on new findings."""

from __future__ import annotations

import os
import subprocess
import sys


def test_with_ci_set_hypothesis_draws_the_same_examples_every_run():
    code = "from hypothesis import settings; d = settings.default; print(d.derandomize, d.database, d.deadline)"
    done = subprocess.run([sys.executable, "-c", code], env={**os.environ, "CI": "true"}, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "None", "None"]
