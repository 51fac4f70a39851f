"""Hardware facts of a Neuron node, read from inside a container that asks for devices the way the
sweep pods do, and the check that stops a sweep whose assumptions they contradict.

Standard library only: ``collect`` runs in the serving image (which ships the Neuron tools, not the
benchmark's requirements) in the hardware-facts Job; ``check`` runs in the sweep pods' gate
(charts/sweep.py) on every facts file the Job wrote to ``results/hardware-facts/<node>.json``. Both run
from the code asset their pod's init container fetched and checked (charts/code.py ``RUN_MODULE``).

What is read, and from where:
- ``neuron-ls --json-output`` (Neuron docs, tools/neuron-sys-tools/neuron-ls.rst: "--json-output, -j:
  Output in JSON format"): a JSON array with one object per device the container sees, each with
  ``neuron_device``, ``bdf``, ``connected_to`` (the device's NeuronLink peers, null on a one-device
  instance), ``nc_count``, ``memory_size`` (bytes), ``neuroncore_ids``, ``neuron_processes`` (a public
  plugin's tests keep a verbatim capture from trn1.2xlarge with tools 2.28.23.0). Neuron announced on
  2026-10-16 that 2.34 replaces it with ``--output-format json``; both are tried.
- plain ``neuron-ls``: its header lines ``instance-type:``, ``instance-id:`` and
  ``logical-neuroncore-config:`` (the same page's trn2 example).
- the node's device count: one directory per device under ``/sys/devices/virtual/neuron_device``
  (Neuron Sysfs User Guide); sysfs is the node's, not the container's.
- the driver version: ``/sys/module/neuron/version`` (the kernel module's); the runtime and tools
  versions: the image's ``aws-neuronx-runtime-lib`` and ``aws-neuronx-tools`` packages (dpkg).
- the container's own settings: ``CapEff`` and ``Seccomp`` of /proc/self/status (proc(5)): the
  premise of the visibility check (every capability dropped, seccomp filter mode 2 = RuntimeDefault).
- the devices it sees: ``/dev/neuron*``, and which of them it can open read-write.
- its locked-memory limit: ``RLIMIT_MEMLOCK`` (getrlimit(2); ``ulimit -l`` shows it in KiB), soft and
  hard, in bytes or "unlimited". Recorded, not judged: older Neuron runtimes locked memory (the Neuron
  1.x neuron-rtd container "must start with CAP_IPC_LOCK capability", Neuron docs,
  containers/docker-example/v1/inference/Dockerfile-neuron-rtd; CAP_IPC_LOCK lifts RLIMIT_MEMLOCK,
  mlock(2)), until the kernel driver removed the elevated privileges (aws-neuron/aws-neuron-sdk
  issue 179); a runtime that still needs it then shows why it failed.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import resource
import subprocess
import sys
import time
from pathlib import Path

from specbench import jsonfile

SYSFS_DEVICES = "/sys/devices/virtual/neuron_device"
DRIVER_VERSION = "/sys/module/neuron/version"
DEV = "/dev"
PROC_STATUS = "/proc/self/status"
NEURON_LS = ("/opt/aws/neuron/bin/neuron-ls", "neuron-ls")
HEADER = re.compile(r"^(instance-type|instance-id|logical-neuroncore-config):\s*(\S+)\s*$", re.MULTILINE)
MISMATCH = 4  # a fact contradicts what the project assumes: the sweep must not start
NO_FACTS = 5  # no facts file to check


def _run(argv: list[str], timeout: float = 60.0) -> tuple[int, str, str]:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as err:
        return -1, "", str(err)
    return done.returncode, done.stdout, done.stderr


def _neuron_ls(args: list[str]) -> tuple[int, str, str]:
    result = (-1, "", "neuron-ls not found")
    for exe in NEURON_LS:
        result = _run([exe, *args])
        if result[0] != -1:
            return result
    return result


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return None


def _package_version(name: str) -> str | None:
    code, out, _ = _run(["dpkg-query", "-W", "-f", "${Version}", name], timeout=20)
    return (out.strip() or None) if code == 0 else None


def _proc_status() -> dict[str, str]:
    status = _read(PROC_STATUS) or ""
    return dict(line.split(":\t", 1) for line in status.splitlines() if ":\t" in line)


def _limit(value: int) -> int | str:
    return "unlimited" if value == resource.RLIM_INFINITY else value


def _memlock() -> dict:
    """This process's RLIMIT_MEMLOCK, soft and hard (bytes, or "unlimited")."""
    soft, hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    return {"soft": _limit(soft), "hard": _limit(hard)}


def collect(node: str, layout: str, requested: int) -> dict:
    """Every fact this container can read; a fact it cannot read is None with the error beside it."""
    facts: dict = {"node": node, "layout": layout, "requested_devices": requested, "collected_at": int(time.time()), "errors": {}}
    devices = sorted(glob.glob(f"{SYSFS_DEVICES}/neuron*"))
    facts["node_devices"] = len(devices) if os.path.isdir(SYSFS_DEVICES) else None
    if facts["node_devices"] is None:
        facts["errors"]["node_devices"] = f"{SYSFS_DEVICES} is absent"
    facts["neuron_ls"] = None
    for args in (["--json-output"], ["--output-format", "json"]):
        code, out, err = _neuron_ls(args)
        if code == 0:
            try:
                facts["neuron_ls"] = json.loads(out)
                break
            except ValueError as bad:
                facts["errors"]["neuron_ls"] = f"neuron-ls {' '.join(args)}: not JSON ({bad})"
        else:
            facts["errors"]["neuron_ls"] = f"neuron-ls {' '.join(args)}: exit {code}: {err.strip()[-300:]}"
    if facts["neuron_ls"] is not None:
        facts["errors"].pop("neuron_ls", None)
    code, out, err = _neuron_ls([])
    facts["neuron_ls_header"] = dict(HEADER.findall(out)) if code == 0 else {}
    facts["driver_version"] = _read(DRIVER_VERSION)
    facts["runtime_version"] = _package_version("aws-neuronx-runtime-lib")
    facts["tools_version"] = _package_version("aws-neuronx-tools")
    status = _proc_status()
    facts["container"] = {
        "uid": os.getuid(),
        "cap_eff": status.get("CapEff", "").strip() or None,
        "seccomp": status.get("Seccomp", "").strip() or None,
        "memlock": None,
    }
    try:
        facts["container"]["memlock"] = _memlock()
    except (OSError, ValueError) as err:
        facts["errors"]["memlock"] = f"getrlimit(RLIMIT_MEMLOCK): {err}"
    visible = sorted((p for p in glob.glob(f"{DEV}/neuron*") if re.fullmatch(r"neuron\d+", os.path.basename(p))), key=_index)
    openable, refused = [], {}
    for path in visible:
        try:
            os.close(os.open(path, os.O_RDWR))
            openable.append(path)
        except OSError as err:
            refused[path] = err.strerror or str(err)
    facts["dev_neuron"] = {"visible": visible, "openable": openable, "refused": refused}
    return facts


def _index(path: str) -> int:
    return int(os.path.basename(path)[len("neuron") :])


def _device_list(neuron_ls) -> list[dict] | None:
    """The per-device objects of either JSON format (a list, or an object holding one)."""
    if isinstance(neuron_ls, list):
        return [d for d in neuron_ls if isinstance(d, dict)]
    if isinstance(neuron_ls, dict):
        for key in ("neuron_devices", "devices"):
            if isinstance(neuron_ls.get(key), list):
                return [d for d in neuron_ls[key] if isinstance(d, dict)]
    return None


def problems(facts: dict, devices_per_node: int, lnc: int, requested: int) -> list[str]:
    """One "fact: found ..., the project assumes ..." line for every fact that contradicts the
    project's assumptions. A fact that could not be read is not a contradiction (see unknowns)."""
    found = []
    node = facts.get("node_devices")
    if node is not None and node != devices_per_node:
        found.append(f"devices: the node has {node} Neuron devices, the project assumes {devices_per_node}")
    header_lnc = (facts.get("neuron_ls_header") or {}).get("logical-neuroncore-config")
    if header_lnc is not None and header_lnc != str(lnc):
        found.append(f"lnc: neuron-ls reports logical-neuroncore-config {header_lnc}, the project assumes {lnc}")
    dev = facts.get("dev_neuron") or {}
    visible, openable = len(dev.get("visible", [])), len(dev.get("openable", []))
    layout = facts.get("layout", "?")
    if visible != requested:
        found.append(
            f"visibility: a container asking for {requested} devices as the {layout} layout does sees {visible} /dev/neuron* "
            f"(every capability dropped, RuntimeDefault seccomp)"
        )
    elif openable != visible:
        refused = ", ".join(f"{p} ({e})" for p, e in sorted((dev.get("refused") or {}).items()))
        found.append(f"visibility: the container sees {visible} /dev/neuron* but cannot open {visible - openable}: {refused}")
    container = facts.get("container") or {}
    if container.get("cap_eff") not in (None, "0000000000000000"):
        found.append(f"container: the probe ran with capabilities {container['cap_eff']}, not with every capability dropped")
    if container.get("seccomp") not in (None, "2"):
        found.append(f"container: the probe ran in seccomp mode {container['seccomp']}, not the RuntimeDefault filter (2)")
    listed = _device_list(facts.get("neuron_ls"))
    if listed is not None and requested > 1:
        alone = sorted(str(d.get("neuron_device")) for d in listed if not d.get("connected_to"))
        if alone and len(listed) > 1:
            found.append(f"topology: neuron-ls shows devices {', '.join(alone)} with no NeuronLink peer")
    return found


def unknowns(facts: dict) -> list[str]:
    """Facts that could not be read (reported, not judged)."""
    missing = [f"{k}: {v}" for k, v in sorted((facts.get("errors") or {}).items())]
    if "logical-neuroncore-config" not in (facts.get("neuron_ls_header") or {}):
        missing.append("lnc: neuron-ls printed no logical-neuroncore-config line")
    for key in ("driver_version", "runtime_version", "tools_version"):
        if facts.get(key) is None:
            missing.append(f"{key}: not readable in the container")
    return missing


def summary(facts: dict, devices_per_node: int, lnc: int, requested: int) -> dict:
    """The facts with their verdict, as the Job stores them (the dashboard shows them:
    specbench/outputs/dashboard.py ``hardware_facts_markdown``)."""
    listed = _device_list(facts.get("neuron_ls")) or []
    return {
        **facts,
        "topology": {str(d.get("neuron_device")): d.get("connected_to") for d in listed},
        "expected": {"devices_per_node": devices_per_node, "lnc": lnc, "requested_devices": requested},
        "problems": problems(facts, devices_per_node, lnc, requested),
        "unknown": unknowns(facts),
    }


def check_dir(directory: Path, devices_per_node: int, lnc: int, requested: int) -> tuple[int, list[str]]:
    """The gate: (exit code, lines) over every facts file in ``directory``, judged afresh."""
    files = sorted(directory.glob("*.json"))
    if not files:
        return NO_FACTS, [f"hardware facts: none in {directory}: the hardware-facts Job has not written results/hardware-facts/"]
    lines = []
    for path in files:
        try:
            facts = json.loads(path.read_text())
        except ValueError as err:
            lines.append(f"hardware facts of {path.stem}: not JSON ({err})")
            continue
        lines += [f"hardware facts of {facts.get('node', path.stem)}: {p}" for p in problems(facts, devices_per_node, lnc, requested)]
    return (MISMATCH if lines else 0), lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Neuron node facts, and the check a sweep waits on")
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("collect", "check"):
        p = sub.add_parser(name)
        p.add_argument("--devices-per-node", type=int, required=True)
        p.add_argument("--lnc", type=int, required=True)
        p.add_argument("--requested", type=int, required=True, help="devices the sweep pod (and the probe) asks for")
    collect_p, check_p = sub.choices["collect"], sub.choices["check"]
    collect_p.add_argument("--node", required=True)
    collect_p.add_argument("--layout", required=True)
    collect_p.add_argument("--out", type=Path, required=True)
    collect_p.add_argument("--then-wait", action="store_true", help="keep running (a native sidecar must not exit)")
    check_p.add_argument("directory", type=Path)
    args = parser.parse_args(argv)
    if args.command == "check":
        code, lines = check_dir(args.directory, args.devices_per_node, args.lnc, args.requested)
        for line in lines:
            print(line, file=sys.stderr, flush=True)
        return code
    facts = summary(collect(args.node, args.layout, args.requested), args.devices_per_node, args.lnc, args.requested)
    tmp = args.out.with_suffix(".part")
    tmp.write_text(jsonfile.dumps(facts, indent=2, sort_keys=True) + "\n")
    tmp.rename(args.out)  # the uploader waits for the whole file (an emptyDir, not the bucket)
    for line in facts["problems"]:
        print(f"hardware facts of {args.node}: {line}", file=sys.stderr, flush=True)
    verdict = "contradicts the project's assumptions" if facts["problems"] else "as assumed"
    print(f"hardware facts of {args.node}: {verdict}; unknown: {'; '.join(facts['unknown']) or 'none'}", flush=True)
    while args.then_wait:
        time.sleep(3600)
    return 0


if __name__ == "__main__":
    sys.exit(main())
