"""The benchmark as Kubernetes objects: a Job that ``cdk deploy`` creates after the services, and a
suspended CronJob with the same pod template from which ``kubectl create job --from`` reruns it.

No image is built: the ``specbench`` package reaches the pod as a zip application in S3, a CDK
file asset built at synth (stacks/serving.py), never in a manifest; the container pip-installs the
pinned requirements into an emptyDir, then ``FETCH`` (boto3, the pod's own credentials) gets the zip
to /tmp and refuses it unless it hashes to the sha256 the pod template records (charts/README.md,
"Benchmark", says why). The pod runs on the system node group, as a non-root user with a read-only
root filesystem; its only AWS identity is the Pod Identity role of the ``specbench`` service account
(the data stack's benchmark role, stacks/storage.py): put and get under ``results/``, PutMetricData
in the configured namespace, and (stacks/benchmark.py) get the one code object.
"""

from __future__ import annotations

import hashlib
from typing import Any

import cdk8s
from constructs import Construct

from config import layout

from .network import CLIENT_LABELS
from .objects import add_objects, guaranteed, metadata, suspended_cronjob
from .security import NON_ROOT_UID, non_root_pod_security
from .spec import BenchmarkSpec

NAME = "specbench"  # the ConfigMap and the CronJob
SERVICE_ACCOUNT = layout.BENCHMARK_SERVICE_ACCOUNT
LABELS = {"app.kubernetes.io/name": NAME}
CODE_MOUNT = "/opt/specbench"  # the ConfigMap: requirements, settings, suite (data, no code)
BUNDLE = "specbench.pyz"
TMP = "/tmp"
# The fetched zip, on the writable /tmp emptyDir (the root filesystem is read-only).
UNPACKED = f"{TMP}/{BUNDLE}"
# The sha256 of the zip, in the container's environment: what the fetched bytes must hash to.
BUNDLE_SHA256_ENV = "SPECBENCH_BUNDLE_SHA256"
# Where the zip is: the CDK asset's bucket and key (stacks/serving.py), or charts.dist's upload.
CODE_BUCKET_ENV, CODE_KEY_ENV = "SPECBENCH_CODE_BUCKET", "SPECBENCH_CODE_KEY"
# The fetcher, in the environment so the pod spec holds its exact text (tests/test_code_asset.py
# runs it against moto). It runs after the pinned, hashed install, which brings boto3 (specbench/
# requirements.lock; requirements.txt for llmperf). Its credentials are the pod's Pod Identity ones:
# the agent sets AWS_CONTAINER_CREDENTIALS_FULL_URI and AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE, which
# botocore's ContainerProvider reads (botocore/credentials.py, in the default chain). A missing
# object, a denied read or a hash mismatch is one line on stderr and exit 1, before anything runs.
FETCH_ENV = "SPECBENCH_FETCH"
FETCH = """\
import hashlib, os, sys
bucket, key, region, expected, target = sys.argv[1:]
where = f"s3://{bucket}/{key}"
if not (bucket and key and expected):
    sys.exit(f"specbench: no code to fetch ({where!r}, sha256 {expected!r}): set SPECBENCH_CODE_BUCKET, _KEY and SPECBENCH_BUNDLE_SHA256")
import boto3, botocore.exceptions
try:
    data = boto3.client("s3", region_name=region).get_object(Bucket=bucket, Key=key)["Body"].read()
except botocore.exceptions.ClientError as error:
    code = error.response.get("Error", {}).get("Code", "unknown")
    sys.exit(f"specbench: cannot fetch the code {where} ({code}): missing or not readable by this pod's role; redeploy")
except botocore.exceptions.BotoCoreError as error:
    sys.exit(f"specbench: cannot fetch the code {where} ({error})")
actual = hashlib.sha256(data).hexdigest()
if actual != expected:
    sys.exit(f"specbench: {where} has sha256 {actual}, not {expected} (SPECBENCH_BUNDLE_SHA256): tampered or another deploy's")
with open(target + ".part", "wb") as part:
    part.write(data)
os.replace(target + ".part", target)
"""
REQUIREMENTS = "requirements.txt"
SETTINGS = "settings.json"
SUITE = "suite.json"
DEPS = "/deps"
HOME = "/home/specbench"
# Any non-root uid works: nothing in the image is written, and the emptyDirs are world-writable.
RUN_AS = NON_ROOT_UID
# A rerun is a decision, not a retry: the Job fails on its first pod failure (see job_spec).
BACKOFF_LIMIT = 0


def install_and_run(engine: str) -> str:
    """The container's script. The native engine's requirements are a hash lock
    (specbench/requirements.lock): with ``--require-hashes`` pip refuses any file whose sha256 is
    not listed, so a compromised index or mirror cannot swap a package. The llmperf engine's cannot
    be: llmperf's own dependencies (Ray, transformers, ...) keep its loose pins (charts/README.md,
    "Benchmark")."""
    return "\n".join(("set -eu", install_requirements(engine), fetch_bundle(), f'exec python {UNPACKED} run "$@"'))


def fetch_bundle() -> str:
    """The shell line that fetches and checks the zip into UNPACKED (the sweep pods run it too)."""
    args = " ".join(f'"${name}"' for name in (CODE_BUCKET_ENV, CODE_KEY_ENV, "AWS_REGION", BUNDLE_SHA256_ENV))
    return f'python -c "${FETCH_ENV}" {args} {UNPACKED}'


def code_env(spec: BenchmarkSpec) -> list[dict[str, str]]:
    """Where the zip is, its sha256 and the fetcher: the environment ``fetch_bundle`` reads."""
    return [
        {"name": BUNDLE_SHA256_ENV, "value": hashlib.sha256(spec.bundle).hexdigest()},
        {"name": CODE_BUCKET_ENV, "value": spec.code_bucket},
        {"name": CODE_KEY_ENV, "value": spec.code_key},
        {"name": "AWS_REGION", "value": spec.region},
        {"name": FETCH_ENV, "value": FETCH},
    ]


def install_requirements(engine: str) -> str:
    """The pip command that installs the ConfigMap's requirements into DEPS (the sweep pods run it too)."""
    hashes = " --require-hashes" if engine == "native" else ""
    return (
        f"python -m pip install --no-cache-dir --disable-pip-version-check --no-warn-script-location --progress-bar off{hashes} "
        f"--target {DEPS} -r {CODE_MOUNT}/{REQUIREMENTS}"
    )


def run_args(spec: BenchmarkSpec) -> list[str]:
    """Flags of ``specbench run`` (passed to the script above as "$@": no shell quoting involved)."""
    args: list[str] = []
    for name, url in spec.endpoints:
        args += ["--endpoint", f"{name}={url}"]
    args += ["--model", spec.model, "--engine", spec.engine]
    if spec.suite_json:
        args += ["--suite", f"{CODE_MOUNT}/{SUITE}"]
    args += [
        "--input-tokens",
        str(spec.input_tokens),
        "--output-tokens",
        str(spec.output_tokens),
        "--concurrency",
        str(spec.concurrency),
        "--requests",
        str(spec.requests),
        "--temperature",
        repr(spec.temperature),
        "--seed",
        str(spec.seed),
        "--request-timeout",
        str(spec.request_timeout_seconds),
        "--ready-timeout",
        str(spec.ready_timeout_seconds),
        "--results",
        spec.results_uri,
        "--dataset-cache",
        spec.dataset_cache_uri,
        "--thinking",
        "on" if spec.enable_thinking else "off",
        "--namespace",
        spec.metrics_namespace,
        "--region",
        spec.region,
        "--settings",
        f"{CODE_MOUNT}/{SETTINGS}",
    ]
    if spec.max_consecutive_failures is not None:
        args += ["--max-consecutive-failures", str(spec.max_consecutive_failures)]
    return args


def pod_template(spec: BenchmarkSpec) -> dict[str, Any]:
    """The one pod template of the Job and of the CronJob's job template."""
    container = {
        "name": "specbench",
        "image": spec.image,
        "command": ["sh", "-c", install_and_run(spec.engine), "specbench"],
        "args": run_args(spec),
        "env": [
            {"name": "PYTHONPATH", "value": DEPS},
            {"name": "HOME", "value": HOME},
            # RUN_AS has no passwd entry in the image; getpass.getuser() (Ray uses it) reads this first.
            {"name": "USER", "value": "specbench"},
            {"name": "PYTHONDONTWRITEBYTECODE", "value": "1"},
            {"name": "PYTHONUNBUFFERED", "value": "1"},  # progress reaches the log as it happens
            *code_env(spec),
        ],
        "resources": guaranteed(str(spec.cpu), f"{spec.memory_gib}Gi"),
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "runAsNonRoot": True,
            "capabilities": {"drop": ["ALL"]},
        },
        "volumeMounts": [
            {"name": "code", "mountPath": CODE_MOUNT, "readOnly": True},
            {"name": "deps", "mountPath": DEPS},
            {"name": "tmp", "mountPath": TMP},
            {"name": "home", "mountPath": HOME},
        ],
    }
    return {
        # The client label: the namespace's network policy admits these pods to the vLLM services.
        "metadata": {"labels": {**LABELS, **CLIENT_LABELS}},
        "spec": {
            "serviceAccountName": SERVICE_ACCOUNT,
            # Pod Identity delivers AWS credentials through its own projected volume; the pod
            # never talks to the Kubernetes API.
            "automountServiceAccountToken": False,
            "restartPolicy": "Never",
            # The system node group: no Neuron toleration, so never on a Trainium node.
            "nodeSelector": {layout.NODE_POOL_LABEL: layout.SYSTEM_POOL},
            "securityContext": non_root_pod_security(),
            "containers": [container],
            "volumes": [
                {"name": "code", "configMap": {"name": NAME}},
                # The installed requirements (llmperf with Ray and its tokenizers is the largest).
                {"name": "deps", "emptyDir": {"sizeLimit": "4Gi"}},
                # The fetched zip, pip's build directories, and Ray's session and object spill
                # directory for llmperf.
                {"name": "tmp", "emptyDir": {"sizeLimit": "4Gi"}},
                # Tokenizer downloads (llmperf's Llama-2 tokenizer) land in the Hugging Face cache.
                {"name": "home", "emptyDir": {"sizeLimit": "1Gi"}},
            ],
        },
    }


def job_spec(spec: BenchmarkSpec) -> dict[str, Any]:
    """Spec of the Job, and of every Job the CronJob makes.

    backoffLimit 0: a failed run is not retried by Kubernetes. A retry would drive the whole suite
    again and publish a second set of metrics for the same settings (the first attempt's are
    already in CloudWatch), and the usual failures (services never ready, the deadline) would
    fail again the same way. A rerun is a decision: ``kubectl create job --from=cronjob/specbench``.
    """
    return {
        "backoffLimit": BACKOFF_LIMIT,
        "activeDeadlineSeconds": spec.active_deadline_seconds,
        "ttlSecondsAfterFinished": spec.ttl_seconds_after_finished,
        "template": pod_template(spec),
    }


def benchmark_job(spec: BenchmarkSpec) -> dict[str, Any]:
    """The run ``cdk deploy`` starts. Named by a hash of the spec: a Job's pod template is
    immutable, so a changed setting, suite or code creates a new Job (the old one is pruned)."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": metadata(f"{NAME}-{spec.digest()}", spec.namespace, LABELS),
        "spec": job_spec(spec),
    }


def rerun_cronjob(spec: BenchmarkSpec) -> dict[str, Any]:
    """The rerun template: never scheduled (suspended), only copied by
    ``kubectl -n <namespace> create job specbench-rerun-$(date +%s) --from=cronjob/specbench``."""
    return suspended_cronjob(NAME, spec.namespace, LABELS, job_spec(spec))


def code_config_map(spec: BenchmarkSpec) -> dict[str, Any]:
    """The requirements, the settings snapshot and a custom suite: data the pod reads, no code (the
    zip is fetched from S3, so the manifest's size does not grow with the package)."""
    data = {REQUIREMENTS: spec.requirements, SETTINGS: spec.settings_json}
    if spec.suite_json:
        data[SUITE] = spec.suite_json
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": metadata(NAME, spec.namespace, LABELS),
        "data": data,
    }


def benchmark_objects(spec: BenchmarkSpec) -> tuple[dict[str, Any], ...]:
    objects = (
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": metadata(SERVICE_ACCOUNT, spec.namespace, LABELS),
            "automountServiceAccountToken": False,
        },
        code_config_map(spec),
        rerun_cronjob(spec),
    )
    return (*objects, benchmark_job(spec)) if spec.run_on_deploy else objects


class BenchmarkChart(cdk8s.Chart):
    def __init__(self, scope: Construct, construct_id: str, spec: BenchmarkSpec) -> None:
        super().__init__(scope, construct_id, disable_resource_name_hashes=True)
        self.spec = spec
        add_objects(self, benchmark_objects(spec))
