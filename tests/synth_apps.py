"""Several of the suite's ``python app.py`` syntheses in one process, one after the other, run by
tests/conftest.py in the background: ``synth_apps.py JOBS_JSON``, each job
``{"outdir", "context", "validation", "acknowledgments"}``.

Apart, each synthesis paid the jsii runtime's start, aws-cdk-lib's load and the project's imports
again: the three apps took 15.7 s of CPU as three processes and 9.2 s in one (docs/performance.md). Each job is still
``app.main`` with its own ``--outdir`` and ``-c`` arguments, into an App of its own.

For each job this leaves what the shell around a lone synthesis leaves (tests/conftest.py
``_RUN_AND_MARK``): ``<outdir>.pid`` (the process group, for the hang check), ``<outdir>.stderr``
and, once it is done, ``<outdir>.rc``. ``validation`` false builds the App with aws-cdk-lib's
built-in CloudFormation validation off, as ``CDK_VALIDATION=false`` does for a whole process
(aws-cdk-lib 2.275 core/lib/app.d.ts, ``builtinCloudFormationValidation``); policy-validation
plugins, cdk-nag among them, still run.

``acknowledgments`` false switches every project cdk-nag acknowledgment off (``switch_off``), for
the rest of the process, so such a job comes last: its synth is expected to fail validation (exit
1), its templates are still written, and its validation report lists every finding the
acknowledgments would have silenced. Except stacks/sweep_control.py's: its role exists only in a
staged sweep's synthesis, so no acknowledged synthesis holds it for tests/test_lint.py to compare
with; it stays on, and tests/test_sweep_control_stack.py checks that it names exactly the wildcard
of that role's policy.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import sys
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import app as entry  # noqa: E402
import stacks.cost_guard  # noqa: E402
import stacks.nag  # noqa: E402
import stacks.results  # noqa: E402
import stacks.storage  # noqa: E402


def _no_acknowledgment(*args: object, **kwargs: object) -> None:
    return None


def switch_off() -> None:
    """Every project acknowledgment off, for the rest of this process."""
    for module in (stacks.nag, stacks.storage, stacks.results, stacks.cost_guard):
        module.acknowledge = _no_acknowledgment


def _mark(outdir: Path, suffix: str, text: str) -> None:
    """Written whole or not at all: a reader polls for the file."""
    partial = outdir.with_name(f"{outdir.name}.{suffix}.tmp")
    partial.write_text(text)
    partial.replace(outdir.with_name(f"{outdir.name}.{suffix}"))


def run(job: dict) -> int:
    from aws_cdk import App

    outdir = Path(job["outdir"])
    if not job["acknowledgments"]:
        switch_off()
    entry.App = App if job["validation"] else functools.partial(App, builtin_cloud_formation_validation=False)
    argv = ["--outdir", str(outdir), *(arg for key, value in job["context"].items() for arg in ("-c", f"{key}={value}"))]
    # jsii relays its Node.js process's console through sys.stderr (jsii/_kernel/providers/process.py,
    # stderr_sink), so swapping sys.stderr catches both; a line Node.js prints at the very end of one
    # job may land in the next one's file (the jobs' checks read the lines app.main prints).
    with open(outdir.with_name(f"{outdir.name}.stderr"), "w") as err, contextlib.redirect_stderr(err):
        try:
            return entry.main(argv)
        except SystemExit as done:  # argparse's error: exit 2, as the lone synthesis would
            return done.code if isinstance(done.code, int) else 1
        except Exception:  # noqa: BLE001 - the job fails with its traceback in its stderr; the next still runs
            traceback.print_exc()
            return 99


def main(jobs: list[dict]) -> int:
    for job in jobs:
        _mark(Path(job["outdir"]), "pid", f"{os.getpgrp()}\n")
    for job in jobs:
        _mark(Path(job["outdir"]), "rc", f"{run(job)}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(json.loads(sys.argv[1])))
