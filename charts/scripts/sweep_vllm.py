"""Start this pod's vLLM server: the sweep Job's native sidecar (charts/sweep.py).

An Indexed Job has one pod template for every index, so the server's command, arguments and
environment of each unit (built at synth by the same charts.vllm code as the services) come from
units.json, picked by the index Kubernetes gives the pod (JOB_COMPLETION_INDEX). Python 3 of the
serving image, standard library only.
"""

from __future__ import annotations

import json
import os
import sys


def unit_command(units: list[dict], index: int) -> tuple[list[str], dict[str, str]]:
    """argv and environment additions of unit ``index``."""
    unit = units[index]
    return [*unit["command"], *unit["args"]], dict(unit["env"])


def unit_index(environ) -> int:  # type: ignore[no-untyped-def]
    """The unit this pod runs: its completion index, or with SWEEP_STAGE_UNITS (a staged sweep's
    stage: comma-separated catalogue indexes) the catalogue index at that position."""
    index = int(environ["JOB_COMPLETION_INDEX"])
    stage = environ.get("SWEEP_STAGE_UNITS", "")
    return int(stage.split(",")[index]) if stage else index


def main(argv: list[str]) -> int:
    units_file = argv[0] if argv else "/opt/sweep/units.json"
    with open(units_file, encoding="utf-8") as handle:
        units = json.load(handle)
    index = unit_index(os.environ)
    command, env = unit_command(units, index)
    print(f"sweep unit {index}: {units[index]['variant']['name']}: {' '.join(command)}", flush=True)
    os.environ.update(env)
    os.execvp(command[0], command)
    return 1  # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
