"""Start this pod's vLLM server in a sweep pod (charts/sweep.py), in either pod layout.

An Indexed Job has one pod template for every index, so the server's command, arguments and
environment of each unit (built at synth by the same charts.vllm code as the services) come from
units.json, picked by the index Kubernetes gives the pod (JOB_COMPLETION_INDEX). Python 3 of the
serving image, standard library only (that image has none of the benchmark's requirements): the pod
runs it from the checked code asset (charts/code.py ``RUN_MODULE``), never from a ConfigMap.

- ``sidecar`` layout (no ``--signal-dir``): the server is a native sidecar; this script execs vLLM
  and the kubelet stops it once the client has exited.
- ``server-container`` layout (``--signal-dir DIR``, a shared emptyDir): the server is a regular
  container, so nothing stops it when the client is done. This script runs vLLM as its child and
  supervises it: when the client writes ``DIR/done`` it stops vLLM (SIGTERM, SIGKILL after the grace
  period) and exits 0, so the pod ends Succeeded if the client did; when vLLM exits on its own first,
  it writes ``DIR/server-exited`` (the client stops measuring) and exits non-zero, so the pod ends
  Failed. SIGTERM and SIGINT (the pod being stopped) are passed on to vLLM.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

DONE = "done"  # written by the client (specbench/sweep/point_runner.py) when it has finished
SERVER_EXITED = "server-exited"  # written here when vLLM exits before the client is done


def unit_command(units: list[dict], index: int) -> tuple[list[str], dict[str, str]]:
    """argv and environment additions of unit ``index``."""
    unit = units[index]
    return [*unit["command"], *unit["args"]], dict(unit["env"])


def supervise(command: list[str], env: dict[str, str], signal_dir: Path, poll: float = 1.0, grace: float = 30.0) -> int:
    """Run the server until the client's ``done`` file appears (exit 0) or the server exits (its code, 1 for 0)."""
    child = subprocess.Popen(command, env={**os.environ, **env})

    def forward(signum, _frame):
        if child.poll() is None:
            child.send_signal(signum)

    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, forward)
    while True:
        code = child.poll()
        if code is not None:
            if (signal_dir / DONE).exists():
                return 0  # the client finished as the server went: nothing was cut short
            (signal_dir / SERVER_EXITED).write_text(f"{code}\n")
            print(f"sweep server: vLLM exited with code {code} before the client was done", file=sys.stderr, flush=True)
            return code if code > 0 else 1
        if (signal_dir / DONE).exists():
            print(f"sweep server: the client is done ({(signal_dir / DONE).read_text().strip()}); stopping vLLM", flush=True)
            child.terminate()
            try:
                child.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
            return 0
        time.sleep(poll)


def unit_index(environ) -> int:  # type: ignore[no-untyped-def]
    """The unit this pod runs: its completion index, or with SWEEP_STAGE_UNITS (a staged sweep's
    stage: comma-separated catalogue indexes) the catalogue index at that position."""
    index = int(environ["JOB_COMPLETION_INDEX"])
    stage = environ.get("SWEEP_STAGE_UNITS", "")
    return int(stage.split(",")[index]) if stage else index


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description="start this sweep pod's vLLM server")
    parser.add_argument("units", nargs="?", default="/opt/sweep/units.json")
    parser.add_argument("--signal-dir", type=Path, help="server-container layout: the emptyDir shared with the client")
    parser.add_argument("--grace", type=float, default=30.0, help="seconds vLLM gets to stop before SIGKILL")
    parser.add_argument("--poll", type=float, default=1.0, help="seconds between looks at the server and the signal file")
    args = parser.parse_args(argv)
    with open(args.units, encoding="utf-8") as handle:
        units = json.load(handle)
    index = unit_index(os.environ)
    command, env = unit_command(units, index)
    print(f"sweep unit {index}: {units[index]['variant']['name']}: {' '.join(command)}", flush=True)
    if args.signal_dir is not None:
        return supervise(command, env, args.signal_dir, args.poll, args.grace)
    os.environ.update(env)
    os.execvp(command[0], command)
    return 1  # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
