"""Names shared by the stacks, the charts and the benchmark: bucket prefixes and Kubernetes labels.

These are contracts between components, not tunables, so they are constants rather than settings.
"""

# One data bucket, three prefixes (documented in the README's "Storage" section).
MODELS_PREFIX = "models/"  # Hugging Face weights, one folder per model id
ARTIFACTS_PREFIX = "neuron-artifacts/"  # compiled Neuron graphs, one folder per serving config hash
RESULTS_PREFIX = "results/"  # benchmark runs, one folder per run id

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
