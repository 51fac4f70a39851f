"""Measure every point of this pod's sweep unit, then exit so its Neuron devices free.

The measuring client of a sweep pod (charts/sweep.py). The vLLM server beside it (a native sidecar)
has passed its startup probe before this starts. Each point (one load level) is a normal
``specbench run`` against localhost, stored under ``<results>/sweeps/<sweep id>/<point id>/`` with
its ``sweep`` metadata; a failed point is counted and the next one still runs, so nothing already
measured is lost. The sweep id is the Job's name (Kubernetes labels each pod with it), so every
run of the sweep template writes its own folder. Standard library only.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

UNITS = "/opt/sweep/units.json"
BUNDLE = "/opt/specbench/specbench.pyz"


def point_command(python: str, bundle: str, point: dict, sweep_id: str, results: str) -> list[str]:
    meta = {key: point[key] for key in ("point_id", "wave", "variant", "load")}
    return [
        python,
        bundle,
        "run",
        *point["args"],
        "--results",
        f"{results.rstrip('/')}/sweeps/{sweep_id}/",
        "--run-id",
        point["point_id"],
        "--sweep-id",
        sweep_id,
        "--sweep-point",
        json.dumps(meta, sort_keys=True),
    ]


def run_unit(unit: dict, sweep_id: str, results: str, run=subprocess.run, python: str = sys.executable, bundle: str = BUNDLE) -> int:
    """Every point in turn; the exit code is 1 if any failed (the Job shows the index failed)."""
    failed = []
    for point in unit["points"]:
        print(f"sweep {sweep_id}: point {point['point_id']} (wave {point['wave']})", flush=True)
        code = run(point_command(python, bundle, point, sweep_id, results)).returncode
        if code:
            failed.append(f"{point['point_id']} (exit {code})")
    done = len(unit["points"]) - len(failed)
    print(f"sweep {sweep_id}: {done} of {len(unit['points'])} points measured" + (f"; failed: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


def main() -> int:
    with open(os.environ.get("SWEEP_UNITS", UNITS), encoding="utf-8") as handle:
        units = json.load(handle)
    index = int(os.environ["JOB_COMPLETION_INDEX"])
    stage = os.environ.get("SWEEP_STAGE_UNITS", "")  # a staged sweep's stage: completion index -> catalogue index
    unit = units[int(stage.split(",")[index]) if stage else index]
    return run_unit(unit, os.environ["SWEEP_ID"], os.environ["SWEEP_RESULTS"], bundle=os.environ.get("SWEEP_BUNDLE", BUNDLE))


if __name__ == "__main__":
    sys.exit(main())
