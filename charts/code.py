"""The project's code in the cluster's other pods: the ``specbench`` zip (the code asset,
stacks/benchmark.py ``code_asset``; charts.dist's upload for plain YAML), never a ConfigMap.

An init container (``fetch_container``) copies the zip from S3 into an emptyDir and keeps it only if
its sha256 is the one the pod template records (``SPECBENCH_BUNDLE_SHA256``, the zip the objects'
names are hashes of); a missing object, a denied read or another sha256 is one line on stderr and
exit 1, so the pod's containers never start (an init container must succeed before the next one
starts: kubernetes.io/docs/concepts/workloads/pods/init-containers/). The containers that then run
project code mount that emptyDir read-only and run a module of the zip with ``run_module`` (zipimport:
a stored zip on ``sys.path``, no unpacking), so the bytes they run are the bytes that were checked.

Why the AWS CLI image (``serving.aws_cli_image``) fetches: the containers that run this code use
images without boto3 (the serving image: the model-cache fill, the hardware-facts probe, the sweep's
vLLM supervisor; the benchmark image before its pip install: the sweep's gate check and client). The
AWS CLI image needs no install (charts/benchmark.py ``FETCH`` would need the ~30 s pip install and
PyPI first), is the image these pods already read S3 and Secrets Manager with (the hardware-facts
uploader and gate, the token reader), and signs with the pod's Pod Identity credentials like any SDK.
The check is ``sha256sum -c``: the image is Amazon Linux 2 (aws/aws-cli docker/Dockerfile: ``FROM
public.ecr.aws/amazonlinux/amazonlinux:2``), whose coreutils also give the ``cat``, ``ls`` and
``sleep`` the gate already runs there. tests/test_pod_code.py runs ``FETCH_SCRIPT`` against moto.
"""

from __future__ import annotations

import shlex
from typing import Any

from .benchmark import BUNDLE, BUNDLE_SHA256_ENV, CODE_BUCKET_ENV, CODE_KEY_ENV
from .objects import guaranteed
from .security import NON_ROOT_UID, container_security

FETCH_CONTAINER = "fetch-code"
VOLUME = "specbench-code"
SCRATCH_VOLUME = f"{FETCH_CONTAINER}-scratch"
DIR = "/code"
ZIP = f"{DIR}/{BUNDLE}"
SCRATCH = "/scratch"  # the AWS CLI's HOME (its ~/.aws cache); the root filesystem is read-only
# The init container's script. ``aws s3 cp`` exits non-zero on a missing object, bucket or a denied
# read (its last stderr line names the error); the zip is written under a temporary name and renamed
# only once checked, so a consumer never sees unchecked bytes.
FETCH_SCRIPT = f"""\
set -eu
where="s3://${{{CODE_BUCKET_ENV}:-}}/${{{CODE_KEY_ENV}:-}}"
expected="${{{BUNDLE_SHA256_ENV}:-}}"
if [ -z "${{{CODE_BUCKET_ENV}:-}}" ] || [ -z "${{{CODE_KEY_ENV}:-}}" ] || [ -z "$expected" ]; then
  echo "specbench: no code to fetch ('$where', sha256 '$expected'): set {CODE_BUCKET_ENV}, _KEY and {BUNDLE_SHA256_ENV}" >&2
  exit 1
fi
part={ZIP}.part
if ! error=$(aws s3 cp --only-show-errors "$where" "$part" 2>&1); then
  rm -f "$part"
  reason=$(printf '%s' "$error" | tail -n 1)
  echo "specbench: cannot fetch the code $where ($reason): missing or not readable by this pod's role; redeploy" >&2
  exit 1
fi
if ! printf '%s  %s\\n' "$expected" "$part" | sha256sum -c --status; then
  actual=$(sha256sum "$part")
  rm -f "$part"
  echo "specbench: $where has sha256 ${{actual%% *}}, not $expected ({BUNDLE_SHA256_ENV}): tampered or another deploy's" >&2
  exit 1
fi
mv "$part" {ZIP}
"""
# How a container runs a module of the checked zip: ``python -c RUN_MODULE ZIP MODULE ARGS...`` puts
# the zip first on sys.path and runs MODULE as ``python -m`` would (runpy.run_module, alter_sys: its
# sys.argv[0] is the module's path). Not through PYTHONPATH: in the serving image that variable
# would replace whatever the image sets, and the sweep's supervisor hands its environment to vLLM,
# whose environment must stay the services' (charts/sweep.py, parity).
RUN_MODULE = (
    "import runpy, sys; sys.argv.pop(0); sys.path.insert(0, sys.argv.pop(0)); "
    "runpy.run_module(sys.argv[0], run_name=__name__, alter_sys=True)"
)


def run_module(python: str, module: str, *args: str) -> list[str]:
    """The argv that runs ``module`` (``specbench.…``) of the fetched zip with ``args``."""
    return [python, "-c", RUN_MODULE, ZIP, module, *args]


def run_module_line(python: str, module: str) -> str:
    """``run_module`` as a line of a shell script (``exec``-ed, the script's "$@" passed on)."""
    return f'exec {" ".join(shlex.quote(a) for a in run_module(python, module))} "$@"'


def fetch_container(image: str, bucket: str, key: str, sha256: str, region: str) -> dict[str, Any]:
    """The init container that leaves the checked zip at ZIP. Non-root, read-only root filesystem,
    every capability dropped (restricted), whatever the pod's other containers run as."""
    return {
        "name": FETCH_CONTAINER,
        "image": image,
        "command": ["sh", "-c", FETCH_SCRIPT],
        "env": [
            {"name": BUNDLE_SHA256_ENV, "value": sha256},
            {"name": CODE_BUCKET_ENV, "value": bucket},
            {"name": CODE_KEY_ENV, "value": key},
            {"name": "AWS_REGION", "value": region},
            {"name": "HOME", "value": SCRATCH},
        ],
        "resources": guaranteed("100m", "256Mi"),
        "securityContext": container_security(
            readOnlyRootFilesystem=True, runAsNonRoot=True, runAsUser=NON_ROOT_UID, runAsGroup=NON_ROOT_UID
        ),
        "volumeMounts": [{"name": VOLUME, "mountPath": DIR}, {"name": SCRATCH_VOLUME, "mountPath": SCRATCH}],
    }


def mount() -> dict[str, Any]:
    """The checked zip's folder in a container that runs it: read-only."""
    return {"name": VOLUME, "mountPath": DIR, "readOnly": True}


def volumes() -> list[dict[str, Any]]:
    """The emptyDirs ``fetch_container`` writes: the zip (a few hundred KB) and the CLI's HOME."""
    return [{"name": VOLUME, "emptyDir": {"sizeLimit": "64Mi"}}, {"name": SCRATCH_VOLUME, "emptyDir": {"sizeLimit": "16Mi"}}]
