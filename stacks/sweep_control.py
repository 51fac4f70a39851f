"""The staged sweep controller's AWS identity (charts/sweep_control.py is its Kubernetes side): a
Pod Identity role for ``<namespace>/specbench-sweep-control`` only, made beside the bucket with the
other data roles (``control_role``, called by stacks/storage.py when ``sweep.strategy=staged``), and
in the platform stack the association that binds it and its read of the one code object
(``SweepControlAccess``, like the benchmark's ``BenchmarkRun``).

The role may do three things:

- get and put objects under ``results/sweeps/`` (config/layout.py ``SWEEPS_PREFIX``): the controller
  reads every stored point and stage document of its sweep and writes the stage documents and the
  first Job's template, all under ``results/sweeps/<sweep id>/``; no delete;
- list the bucket, only under that prefix (``s3:ListBucket`` with a ``StringLike`` condition on
  ``s3:prefix``, as aws.amazon.com/premiumsupport/knowledge-center/iam-s3-user-specific-folder/
  limits a user to a folder; storage.py's roles do the same); a missing key then reads as 404, not 403;
- get the one code object it runs: the CDK asset, and charts.dist's upload of the same zip under
  ``results/code/<sha256>.pyz`` (stacks/benchmark.py ``CodeRead`` does the same for the benchmark).

Its Kubernetes permissions (create and read Jobs in its namespace) are its Role's, in the chart. The
sweep's chart depends on the association and the code read, so the controller's pod starts with
working credentials and ``cdk destroy`` deletes it before them.
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from constructs import Construct

from charts.sweep_control import NAME as SERVICE_ACCOUNT
from config import layout

from .addons.pod_identity import associate, code_read, pod_identity_role
from .nag import acknowledge, wildcard_finding


def control_statements(bucket: s3.IBucket) -> list[iam.PolicyStatement]:
    """Least privilege for ``specbench sweep control`` on the data bucket: the sweeps' folders."""
    sweeps = layout.SWEEPS_PREFIX
    return [
        iam.PolicyStatement(actions=["s3:GetObject", "s3:PutObject"], resources=[bucket.arn_for_objects(f"{sweeps}*")]),
        iam.PolicyStatement(
            actions=["s3:ListBucket"], resources=[bucket.bucket_arn], conditions={"StringLike": {"s3:prefix": [f"{sweeps}*"]}}
        ),
    ]


def control_role(scope: Construct, bucket: s3.IBucket, cluster_name: str, namespace: str) -> iam.Role:
    """The controller's role, trusted by Pod Identity for its one service account of this cluster."""
    role = pod_identity_role(
        scope,
        "SweepControlRole",
        description="Staged sweep controller: results/sweeps/ in the data bucket",
        cluster_name=cluster_name,
        namespace=namespace,
        service_account=SERVICE_ACCOUNT,
    )
    for statement in control_statements(bucket):
        role.add_to_policy(statement)
    # Only a staged sweep's synthesis has this role, so this acknowledgment stays on in the variant
    # that tests/test_lint.py synthesizes without the others; tests/test_sweep_control_stack.py checks
    # it names exactly the one wildcard resource of the role's policy.
    acknowledge(
        role,
        wildcard_finding(scope, bucket.bucket_arn, f"/{layout.SWEEPS_PREFIX}*"),
        f"Object access is limited to the {layout.SWEEPS_PREFIX} prefix; the wildcard is the sweep id and the files of its folder.",
    )
    return role


@dataclass(frozen=True)
class SweepControlAccessProps:
    cluster: eks.Cluster
    namespace: str  # the sweep's (the serving namespace)
    role: iam.IRole  # control_role's, from the data stack
    code_objects: tuple[str, ...]  # the ARNs of the code object the controller's pod fetches


class SweepControlAccess(Construct):
    def __init__(self, scope: Construct, construct_id: str, props: SweepControlAccessProps) -> None:
        super().__init__(scope, construct_id)
        cluster = props.cluster
        self.association = associate(self, "PodIdentity", cluster, props.namespace, SERVICE_ACCOUNT, props.role)
        self.code_read = code_read(self, "CodeRead", props.role, props.code_objects)
