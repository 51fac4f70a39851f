"""Run a pod's own fetch-and-check step (charts/benchmark.py FETCH, from the pod spec) against a moto
server: the container's script without its pip line (the requirements, boto3 among them, are this
environment's), /tmp moved to a test folder, boto3 pointed at moto by AWS_ENDPOINT_URL (botocore
configprovider.py reads it for every client) with moto's fake keys standing for Pod Identity's."""

from __future__ import annotations

import logging
import os
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


# --- the fetch-code init container (charts/code.py) ---------------------------------------------------


def aws_cli(folder: Path) -> Path:
    """A real AWS CLI for the init container's ``aws s3 cp``: awscli v1 as aws-cdk-lib's awscli layer
    ships it (the pinned ``aws-cdk.asset-awscli-v1``; its layer.zip holds the CLI and its botocore
    under ``awscli/``), run by this interpreter. The image's CLI is v2; ``s3 cp`` and its exit codes
    are the same command. Returns the folder that holds an ``aws`` command, for PATH."""
    bin_dir = folder / "bin"
    if (bin_dir / "aws").exists():
        return bin_dir
    import importlib.metadata
    import io
    import tarfile
    import zipfile

    dist = importlib.metadata.distribution("aws-cdk.asset-awscli-v1")
    (tgz,) = [f for f in dist.files or () if str(f).endswith(".jsii.tgz")]
    with tarfile.open(dist.locate_file(tgz)) as archive:
        layer = archive.extractfile("package/lib/layer.zip")
        assert layer is not None
        # Read into memory: ZipFile seeks back and forth, and each backward seek in a gzip stream
        # decompresses it again from the start (~0.5 s of CPU).
        with zipfile.ZipFile(io.BytesIO(layer.read())) as zipped:
            zipped.extractall(folder)
    cli = folder / "awscli"
    _match_bytecode(cli)
    bin_dir.mkdir()
    (bin_dir / "aws").write_text(f'#!/bin/sh\nPYTHONPATH="{cli}" exec "{sys.executable}" "{cli / "aws"}" "$@"\n')
    (bin_dir / "aws").chmod(0o755)
    return bin_dir


def _match_bytecode(root: Path) -> None:
    """Give each source the mtime its shipped ``.pyc`` records (extractall stamps files with the
    time of extraction): otherwise every module is stale and the first ``aws`` run compiles them
    all again (~0.6 s of CPU, every session). Only where the recorded size matches, so the check
    Python itself makes (mtime and size) still decides: a ``.pyc`` of other source is recompiled."""
    tag = sys.implementation.cache_tag
    for pyc in root.rglob(f"__pycache__/*.{tag}.pyc"):
        source = pyc.parent.parent / f"{pyc.name.removesuffix(f'.{tag}.pyc')}.py"
        with pyc.open("rb") as file:
            header = file.read(16)
        flags, mtime, size = (int.from_bytes(header[i : i + 4], "little") for i in (4, 8, 12))
        if flags == 0 and source.is_file() and source.stat().st_size & 0xFFFFFFFF == size:
            os.utime(source, (mtime, mtime))


def remap(value: str, root: Path) -> str:
    """A pod path under the code folder (/code/...) moved to ``root``/code/."""
    return value.replace("/code/", f"{root}/code/")


def run_fetch(
    container: dict[str, Any], root: Path, moto_url: str, aws_bin: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """The fetch-code init container's exact script and environment, its emptyDirs under ``root``
    (the zip's /code, its HOME), the CLI pointed at moto by AWS_ENDPOINT_URL with moto's fake keys
    standing for Pod Identity's."""
    assert container["command"][:2] == ["sh", "-c"]
    (root / "code").mkdir(parents=True, exist_ok=True)
    (root / "scratch").mkdir(exist_ok=True)
    pod_env = {e["name"]: e["value"] for e in container["env"]}
    creds = moto_aws.FAKE_CREDENTIALS
    pod_env.update(
        HOME=str(root / "scratch"),
        PATH=f"{aws_bin}:/usr/bin:/bin",
        AWS_ENDPOINT_URL=moto_url,
        AWS_ACCESS_KEY_ID=creds["aws_access_key_id"],
        AWS_SECRET_ACCESS_KEY=creds["aws_secret_access_key"],
        AWS_EC2_METADATA_DISABLED="true",
        **(env or {}),
    )
    script = remap(container["command"][2], root)
    return subprocess.run(["sh", "-c", script], env=pod_env, capture_output=True, text=True, timeout=120)


def run_consumer(container: dict[str, Any], root: Path, *replace: tuple[str, str]) -> subprocess.CompletedProcess:
    """A container's exact ``run_module`` argv against the zip the fetch left under ``root``, by this
    interpreter with ``-I -S`` (no site-packages, no PYTHON* variables: the standard library only, as
    in the images); ``replace`` swaps other pod paths for test ones."""
    python, *argv = container["command"]
    assert python in ("python", "python3") and argv[0] == "-c"
    argv = [remap(a, root) for a in argv]
    for old, new in replace:
        argv = [new if a == old else a for a in argv]
    env = {e["name"]: e["value"] for e in container.get("env", []) if "value" in e}
    env["PATH"] = "/usr/bin:/bin"
    return subprocess.run([sys.executable, "-I", "-S", *argv], env=env, capture_output=True, text=True, timeout=120)
