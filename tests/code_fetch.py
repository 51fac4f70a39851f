"""Run a pod's own fetch-and-check step (charts/benchmark.py FETCH, from the pod spec) against a moto
server: the container's script without its pip line (the requirements, boto3 among them, are this
environment's), /tmp moved to a test folder, boto3 pointed at moto by AWS_ENDPOINT_URL (botocore
configprovider.py reads it for every client) with moto's fake keys standing for Pod Identity's."""

from __future__ import annotations

import logging
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import moto_aws


def pod_script(container: dict[str, Any], tmp: Path) -> str:
    """The container's script as the pod runs it, but for pip and with /tmp at ``tmp``."""
    assert container["command"][:2] == ["sh", "-c"]
    script = container["command"][2]
    (pip,) = [line for line in script.splitlines() if "pip install" in line]
    return script.replace(pip + "\n", "").replace("/tmp/", f"{tmp}/")


def run_pod(
    container: dict[str, Any], tmp: Path, moto_url: str, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    pod_env = {e["name"]: e["value"] for e in container["env"] if "value" in e and e["name"] != "PYTHONPATH"}
    creds = moto_aws.FAKE_CREDENTIALS
    pod_env.update(
        HOME=str(tmp),
        PATH=f"{Path(sys.executable).parent}:/usr/bin:/bin",
        AWS_ENDPOINT_URL=moto_url,
        AWS_ACCESS_KEY_ID=creds["aws_access_key_id"],
        AWS_SECRET_ACCESS_KEY=creds["aws_secret_access_key"],
        AWS_EC2_METADATA_DISABLED="true",
        **(env or {}),
    )
    return subprocess.run(
        ["sh", "-c", pod_script(container, tmp), "specbench", *args], env=pod_env, capture_output=True, text=True, timeout=120
    )


def moto_server() -> Iterator[str]:
    """A moto server on a free loopback port (a subprocess cannot share an in-process mock)."""
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.CRITICAL)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()
