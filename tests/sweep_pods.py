"""A sweep Job's pods run on this machine, as the cluster would run them, with an emulator for vLLM.

What a test needs of the cluster behind a Jobs API stand-in (tests/jobs_standin.py): the Job
controller and the kubelet. For an Indexed Job it runs every completion index, at most
``parallelism`` at once, lowest first (kubernetes/kubernetes pkg/controller/job/
indexed_job_utils.go, ``firstPendingIndexes``), each index a pod whose regular containers run
together with the pod's environment (``JOB_COMPLETION_INDEX`` set, the downward API's
``metadata.labels[...]`` resolved from the pod's labels, which carry ``batch.kubernetes.io/job-name``:
kubernetes.io/docs/reference/labels-annotations-taints/#batchkubernetesiojob-name) and its volumes
(a ConfigMap's files, a fresh folder per emptyDir). Then the Job is Complete, or Failed when an
index failed (``backoffLimitPerIndex: 0``: no retry).

What is moved for this machine: each mount path to a folder of its own (in every argument, variable
and ConfigMap file: units.json names /opt/sweep and /opt/specbench), the pod's localhost server port
to a free one, ``python``/``python3`` to this interpreter, and every unit's vLLM command in units.json
to ``emulator(variant, port)`` (the pod's launcher, specbench/sweep/vllm_supervisor.py, starts and
stops it as it does vLLM). Init containers run only through ``init`` (what stands in for one by
name, such as the code fetch's outcome); the others (the model-cache wait, the hardware-facts gate)
need a node and are not run. The client's ``pip install`` line is dropped (the requirements are
this environment's).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from specbench.emulator.process import free_ports
from tests.jobs_standin import COMPLETE, FAILED

ROOT = Path(__file__).resolve().parents[1]
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
POD_TIMEOUT_S = 300.0
FIELD_LABEL = re.compile(r"metadata\.labels\['([^']+)'\]")


class Node:
    """Runs Jobs' pods. ``config_maps``: name -> data, as the cluster holds them; ``server``: the
    pod's localhost URL of its server (charts/sweep.py SWEEP_SERVER_URL); ``env``: what the node gives
    every container besides the pod's own (credentials, the S3 endpoint); ``emulator``: argv of the
    server that stands in for the unit's vLLM; ``args``: arguments appended to a container's;
    ``init``: what stands in for an init container (the others are not run)."""

    def __init__(
        self,
        root: Path,
        config_maps: Mapping[str, Mapping[str, str]],
        server: str,
        emulator: Callable[[Mapping[str, Any], int], list[str]],
        env: Mapping[str, str],
        args: Mapping[str, list[str]] | None = None,
        init: Mapping[str, Callable[[Mapping[str, Any], Callable[[str], Path]], None]] | None = None,
    ) -> None:
        self.root, self.config_maps, self.server, self.emulator, self.env = root, config_maps, server, emulator, dict(env)
        self.args = dict(args or {})  # container name -> arguments appended (the launcher's --poll, for a fast test)
        self.init = dict(init or {})  # init container name -> what stands in for it (container, pod path -> host path)
        self.pods: list[str] = []  # "<job>-<index>" of every pod run, in start order
        self.lock = threading.Lock()
        self._running: list[subprocess.Popen] = []
        self._stopped = False

    def run_job(self, job: Mapping[str, Any]) -> dict[str, Any]:
        """Every index of the Job; the status the Job controller would give it."""
        spec = job["spec"]
        completions = int(spec.get("completions") or 1)
        with ThreadPoolExecutor(max_workers=max(1, min(int(spec.get("parallelism") or 1), completions))) as pool:
            codes = list(pool.map(lambda index: self.run_pod(job, index), range(completions)))
        return COMPLETE if not any(codes) else FAILED

    def run_pod(self, job: Mapping[str, Any], index: int) -> int:
        name = f"{job['metadata']['name']}-{index}"
        with self.lock:
            self.pods.append(name)
        folder = self.root / "pods" / name
        template = job["spec"]["template"]
        pod = template["spec"]
        labels = {**(template.get("metadata") or {}).get("labels", {}), JOB_NAME_LABEL: job["metadata"]["name"]}
        volumes = {v["name"]: self._volume(v, folder / "volumes" / v["name"]) for v in pod.get("volumes", [])}
        (port,) = free_ports(1)
        every = [*pod.get("initContainers", []), *pod["containers"]]
        mounted = {m["mountPath"]: volumes[m["name"]] for c in every for m in c.get("volumeMounts", [])}
        for where in {volumes[v["name"]] for v in pod.get("volumes", []) if "configMap" in v}:
            if (where / "units.json").exists():
                self._emulated_units(where / "units.json", mounted, port)
        for container in pod.get("initContainers", []):
            if container["name"] in self.init:
                mounts = {m["mountPath"]: volumes[m["name"]] for m in container.get("volumeMounts", [])}
                self.init[container["name"]](container, lambda path, mounts=mounts: Path(self._moved(path, mounts, port)))
        processes = []
        for container in pod["containers"]:
            mounts = {m["mountPath"]: volumes[m["name"]] for m in container.get("volumeMounts", [])}
            env = {**self._env(container, labels, mounts, port), "JOB_COMPLETION_INDEX": str(index)}
            with self.lock:
                if self._stopped:
                    break
                log = (folder / f"{container['name']}.log").open("w")
                process = self._start(container, mounts, port, env, folder, log)
                self._running.append(process)
            processes.append((container["name"], log, process))
        codes = []
        for container, log, process in processes:
            try:
                codes.append(process.wait(timeout=POD_TIMEOUT_S))
            except subprocess.TimeoutExpired:
                self._kill(process)
                codes.append(process.wait())
            log.close()
            if codes[-1]:
                print(f"pod {name}: container {container} exited {codes[-1]} (log {folder / container}.log)", file=sys.stderr)
        return max(codes, key=abs) if codes else 1

    def stop(self) -> None:
        """Kill every container still running and start no more: each container's process group (its
        own session, started here: the launcher's server and the runner's points with it)."""
        with self.lock:
            self._stopped = True
            running = [p for p in self._running if p.poll() is None]
        for process in running:
            self._kill(process)

    @staticmethod
    def _kill(process: subprocess.Popen) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)

    def _volume(self, volume: Mapping[str, Any], folder: Path) -> Path:
        """A ConfigMap's files (units.json with the unit's vLLM swapped for the emulator later), else an empty folder."""
        folder.mkdir(parents=True)
        if "configMap" in volume:
            for file, text in self.config_maps[volume["configMap"]["name"]].items():
                (folder / file).write_text(text)
        return folder

    def _moved(self, text: str, mounts: Mapping[str, Path], port: int) -> str:
        """Mount paths to their folders (one pass: a folder's own path is not moved again), the server's port."""
        if mounts:
            pattern = "|".join(re.escape(m) for m in sorted(mounts, key=len, reverse=True))
            text = re.sub(rf"(?<![\w/])({pattern})(?=/|$|[\s\"'])", lambda m: str(mounts[m.group(1)]), text)
        host, _, _ = self.server.rpartition(":")
        return text.replace(self.server, f"{host}:{port}")

    def _env(self, container: Mapping[str, Any], labels: Mapping[str, str], mounts: Mapping[str, Path], port: int) -> dict[str, str]:
        env = {
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}/usr/bin{os.pathsep}/bin",
            "HOME": str(self.root),
            **self.env,
        }
        for item in container.get("env", []):
            if "value" in item:
                env[item["name"]] = self._moved(str(item["value"]), mounts, port)
                continue
            path = ((item.get("valueFrom") or {}).get("fieldRef") or {}).get("fieldPath", "")
            label = FIELD_LABEL.fullmatch(path)
            assert label, f"container {container['name']}: env {item['name']}: only metadata.labels[...] is resolved here, got {item}"
            env[item["name"]] = labels[label.group(1)]
        env.pop("PYTHONPATH", None)  # the pod's /deps: here the requirements are this environment's
        return env

    def _start(
        self, container: Mapping[str, Any], mounts: Mapping[str, Path], port: int, env: dict[str, str], folder: Path, log: Any
    ) -> subprocess.Popen:
        argv = [*container["command"], *container.get("args", []), *self.args.get(container["name"], [])]
        argv = [self._moved(part, mounts, port) for part in argv]
        if argv[:2] == ["sh", "-c"]:  # the client's script without its pip line
            argv[2] = "\n".join(line for line in argv[2].splitlines() if "pip install" not in line)
        if argv[0] in ("python", "python3"):
            argv[0] = sys.executable
        return subprocess.Popen(argv, env=env, cwd=folder, stdout=log, stderr=subprocess.STDOUT, text=True, start_new_session=True)

    def _emulated_units(self, units: Path, mounts: Mapping[str, Path], port: int) -> None:
        """units.json as this pod reads it: paths and port moved, each unit's vLLM the emulator."""
        data = json.loads(self._moved(units.read_text(), mounts, port))
        for unit in data:
            argv = self.emulator(unit["variant"], port)
            unit.update(command=argv[:1], args=argv[1:], env={"PYTHONPATH": str(ROOT)})
        units.write_text(json.dumps(data))
