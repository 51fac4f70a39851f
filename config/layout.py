"""Names shared by the stacks, the charts and the benchmark: bucket prefixes and Kubernetes labels.

These are contracts between components, not tunables, so they are constants rather than settings.
"""

# One data bucket, four prefixes (documented in docs/architecture.md, "Storage").
MODELS_PREFIX = "models/"  # Hugging Face weights, one folder per model id
ARTIFACTS_PREFIX = "neuron-artifacts/"  # compiled Neuron graphs, one folder per serving config hash
RESULTS_PREFIX = "results/"  # benchmark runs, one folder per run id
# A sweep's points and stage documents, one folder per sweep id (specbench/outputs/sweep_report.py
# SWEEPS_PREFIX, under the results location): all the staged sweep's controller may touch.
SWEEPS_PREFIX = f"{RESULTS_PREFIX}sweeps/"
DATASETS_PREFIX = "datasets/"  # dataset files a suite names, one object per sha256 (reruns read the same bytes)
COST_GUARD_PREFIX = "cost-guard/"  # the cost guard's node-hour ledger, one object per cluster (stacks/cost_guard.py)

# Node labels and taints the charts select on.
NODE_POOL_LABEL = "specdecode/pool"
SYSTEM_POOL = "system"
NEURON_POOL = "neuron"
NEURON_TAINT_KEY = "aws.amazon.com/neuron"
NEURON_TAINT_VALUE = "true"

# Service accounts the add-ons bind through EKS Pod Identity, and their namespaces.
CLOUDWATCH_NAMESPACE = "amazon-cloudwatch"
CLOUDWATCH_SERVICE_ACCOUNT = "cloudwatch-agent"
MOUNTPOINT_NAMESPACE = "kube-system"
MOUNTPOINT_SERVICE_ACCOUNT = "s3-csi-driver-sa"
NEURON_HELM_NAMESPACE = "kube-system"
# The benchmark Job's service account, in the serving namespace.
BENCHMARK_SERVICE_ACCOUNT = "specbench"

# The serving contract the benchmark relies on: every vLLM Service listens here, and /health
# answers 200 once the model is loaded.
SERVING_PORT = 8000
HEALTH_PATH = "/health"

# The scheduler the Neuron Helm chart's scheduler extension runs as (chart value
# scheduler.customScheduler); pods that ask for several Neuron devices name it.
NEURON_SCHEDULER_NAME = "my-scheduler"

# Where the serving pods see the bucket's model cache (Mountpoint for S3): models/<org>/<name>/
# under MODELS_MOUNT, compiled graphs under ARTIFACTS_MOUNT. A model folder is complete once the
# model-cache Job has written its marker file, last.
MODELS_MOUNT = "/models"
ARTIFACTS_MOUNT = "/neuron-artifacts"
MODEL_COMPLETE_MARKER = ".specdecode-complete"
