"""The two emulated servers in a child process, for measurements that must not share the client's
interpreter (in one process the GIL's 5 ms switch interval would show up as client latency)."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

PACKAGE_ROOT = Path(__file__).resolve().parent.parent.parent


def free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/health", timeout=1) as response:  # noqa: S310 - loopback
            return response.status == 200
    except OSError:
        return False


@contextlib.contextmanager
def emulators_in_subprocess(time_scale: float = 1.0, seed: int = 0, timeout_s: float = 30.0) -> Iterator[dict[str, str]]:
    """``specbench emulate`` for each service in its own process on a free loopback port (one
    event loop per server, as each vLLM server has its own); yields {service name: base URL}."""
    baseline_port, speculative_port = free_ports(2)
    common = ["--baseline-port", str(baseline_port), "--speculative-port", str(speculative_port), "--time-scale", str(time_scale)]
    common += ["--seed", str(seed)]
    commands = {
        "qwen-vllm": ([*common, "--only", "baseline"], baseline_port),
        "qwen-sd-vllm": ([*common, "--only", "speculative"], speculative_port),
    }
    with emulate_processes(commands, timeout_s) as urls:
        yield urls


@contextlib.contextmanager
def emulate_processes(commands: dict[str, tuple[list[str], int]], timeout_s: float = 30.0) -> Iterator[dict[str, str]]:
    """One ``specbench emulate ARGS`` process per name (name -> (ARGS, its port)), each its own
    interpreter; yields {name: base URL} once every one answers /health, and stops them all after."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(PACKAGE_ROOT), os.environ.get("PYTHONPATH")]))}
    emulate = [sys.executable, "-m", "specbench", "emulate"]
    processes = [
        subprocess.Popen([*emulate, *args], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) for args, _ in commands.values()
    ]
    urls = {name: f"http://127.0.0.1:{port}" for name, (_, port) in commands.items()}
    try:
        deadline = time.monotonic() + timeout_s
        while not all(_healthy(url) for url in urls.values()):
            failed = [p for p in processes if p.poll() is not None]
            if failed or time.monotonic() > deadline:
                errors = " ".join(p.stderr.read().decode()[-1000:] for p in failed if p.stderr)
                raise RuntimeError(f"emulator did not start: {errors or 'timed out'}")
            time.sleep(0.05)
        yield urls
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()


def fetch_truth(url: str) -> list[dict[str, Any]]:
    with urllib.request.urlopen(url + "/emulator/truth", timeout=30) as response:  # noqa: S310 - loopback
        return json.loads(response.read())
