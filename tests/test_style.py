"""Code style is part of the build: ruff's lint rules and formatter (settings in pyproject.toml)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from conftest import ROOT

RUFF = str(Path(sys.executable).with_name("ruff"))


def test_ruff_lint_and_format_are_clean():
    lint = subprocess.run([RUFF, "check", "--output-format", "concise", "."], cwd=ROOT, capture_output=True, text=True, check=False)
    assert lint.returncode == 0, lint.stdout
    formatting = subprocess.run([RUFF, "format", "--check", "."], cwd=ROOT, capture_output=True, text=True, check=False)
    assert formatting.returncode == 0, formatting.stdout
