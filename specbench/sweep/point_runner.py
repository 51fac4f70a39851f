"""Measure every point of this pod's sweep unit, then exit so its Neuron devices free.

The measuring client of a sweep pod (charts/sweep.py). In the ``sidecar`` layout the vLLM server
beside it has passed its startup probe before this starts. In the ``server-container`` layout both
start together (``SWEEP_SIGNAL_DIR`` set): this waits for the server's /health first (up to
``SWEEP_READY_SECONDS``), stops measuring when the server's supervisor reports it exited, and writes
``<SWEEP_SIGNAL_DIR>/done`` when it finishes, whatever the outcome, so the supervisor stops the
server and the pod ends. Each point (one load level) is a normal ``specbench run`` against
localhost, stored under ``<results>/sweeps/<sweep id>/<point id>/`` with its ``sweep`` metadata; a
failed point is counted and the next one still runs, so nothing already measured is lost. The sweep
id is the Job's name (Kubernetes labels each pod with it), so every run of the sweep template writes
its own folder. Standard library only: it starts before the pod's requirements are on the path,
from the code asset its init container fetched and checked (charts/code.py), and runs each point as
``python <that zip> run ...``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

from specbench import jsonfile

UNITS = "/opt/sweep/units.json"
# The code asset as the pod's fetch-code init container left it, checked (charts/code.py ZIP).
BUNDLE = "/code/specbench.pyz"
DONE = "done"  # specbench/sweep/vllm_supervisor.py stops the server when it appears
SERVER_EXITED = "server-exited"  # specbench/sweep/vllm_supervisor.py writes it when the server exits first


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
        jsonfile.dumps(meta, sort_keys=True),
    ]


def run_unit(
    unit: dict,
    sweep_id: str,
    results: str,
    run=subprocess.run,
    python: str = sys.executable,
    bundle: str = BUNDLE,
    server_gone: Callable[[], bool] = lambda: False,
) -> int:
    """Every point in turn; the exit code is 1 if any failed (the Job shows the index failed). Once
    the server is gone the points left are counted as failed without being run."""
    failed = []
    for point in unit["points"]:
        if server_gone():
            failed.append(f"{point['point_id']} (server exited)")
            continue
        print(f"sweep {sweep_id}: point {point['point_id']} (wave {point['wave']})", flush=True)
        code = run(point_command(python, bundle, point, sweep_id, results)).returncode
        if code:
            failed.append(f"{point['point_id']} (exit {code})")
    done = len(unit["points"]) - len(failed)
    print(f"sweep {sweep_id}: {done} of {len(unit['points'])} points measured" + (f"; failed: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


def wait_for_server(url: str, signal_dir: Path, timeout: float, poll: float = 5.0) -> str:
    """'' once GET <url>/health answers 200; else why not (the server exited, or the time ran out)."""
    deadline = time.monotonic() + timeout
    while True:
        if (signal_dir / SERVER_EXITED).exists():
            return f"the server exited before it was ready (code {(signal_dir / SERVER_EXITED).read_text().strip()})"
        try:
            with urllib.request.urlopen(f"{url.rstrip('/')}/health", timeout=10) as response:
                if response.status == 200:
                    return ""
        except (urllib.error.URLError, OSError):
            pass
        if time.monotonic() >= deadline:
            return f"the server was not ready within {timeout:g} s"
        time.sleep(poll)


def main() -> int:
    with open(os.environ.get("SWEEP_UNITS", UNITS), encoding="utf-8") as handle:
        units = json.load(handle)
    index = int(os.environ["JOB_COMPLETION_INDEX"])
    stage = os.environ.get("SWEEP_STAGE_UNITS", "")  # a staged sweep's stage: completion index -> catalogue index
    unit = units[int(stage.split(",")[index]) if stage else index]
    sweep_id, results, bundle = os.environ["SWEEP_ID"], os.environ["SWEEP_RESULTS"], os.environ.get("SWEEP_BUNDLE", BUNDLE)
    suffix = os.environ.get("SWEEP_ID_SUFFIX", "")  # a TP group's Job is <sweep id>-tp<N> (charts/sweep.py): the sweep's id without it
    if suffix and sweep_id.endswith(suffix) and len(sweep_id) > len(suffix):
        sweep_id = sweep_id[: -len(suffix)]
    if not os.environ.get("SWEEP_SIGNAL_DIR"):
        return run_unit(unit, sweep_id, results, bundle=bundle)
    signal_dir = Path(os.environ["SWEEP_SIGNAL_DIR"])
    code = 1
    try:
        poll = float(os.environ.get("SWEEP_POLL_SECONDS", "5"))
        problem = wait_for_server(os.environ["SWEEP_SERVER_URL"], signal_dir, float(os.environ["SWEEP_READY_SECONDS"]), poll)
        if problem:
            print(f"sweep {sweep_id}: 0 of {len(unit['points'])} points measured: {problem}", flush=True)
        else:
            code = run_unit(unit, sweep_id, results, bundle=bundle, server_gone=(signal_dir / SERVER_EXITED).exists)
    finally:
        (signal_dir / DONE).write_text(f"{code}\n")  # the server's supervisor stops vLLM on it
    return code


if __name__ == "__main__":
    sys.exit(main())
