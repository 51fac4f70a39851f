"""The benchmark on the cluster: its cdk8s chart, applied after every service it measures, and the
Pod Identity association that gives its service account the data stack's benchmark role.

That role (stacks/storage.py) may do three things and nothing else: publish metrics into the
configured CloudWatch namespace, put and get objects under the data bucket's ``results/`` prefix,
and list that prefix; here it also gets ``s3:GetObject`` on the one object of the code asset
(``code_asset``: the ``specbench`` zip the pods fetch, never inline in a manifest). The chart's
manifest depends on every service manifest, on the association and on that policy, so
``cdk deploy`` creates the Job last, with working credentials, and ``cdk destroy`` deletes it first.
"""

from __future__ import annotations

import hashlib
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3_assets as s3_assets
from constructs import Construct, IDependable

from charts import BenchmarkChart, BenchmarkSpec
from charts.benchmark import BUNDLE
from config import layout

from .addons.pod_identity import associate, code_read


def code_asset(scope: Construct, construct_id: str, bundle: bytes) -> s3_assets.Asset:
    """The ``specbench`` zip as a CDK file asset. A file asset is uploaded as is, a directory zipped
    (aws-cdk packages/@aws-cdk/aws-s3-assets/README.md: "a file asset, which is uploaded as-is"); its
    hash is the content's, so the same code is the same object and a change is a new key (the
    default synthesizer names the object ``<asset hash>.pyz``, the file's extension kept). The file
    is written under a name of its sha256: byte-stable (specbench/bundle.py), so a second synthesis
    rewrites the same bytes."""
    folder = Path(tempfile.gettempdir()) / "specbench-code-asset" / hashlib.sha256(bundle).hexdigest()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / BUNDLE
    if not path.is_file() or path.read_bytes() != bundle:
        partial = folder / f".{BUNDLE}.part"
        partial.write_bytes(bundle)
        partial.replace(path)
    return s3_assets.Asset(scope, construct_id, path=str(path))


def with_code(spec: BenchmarkSpec, asset: s3_assets.Asset) -> BenchmarkSpec:
    """``spec`` with the asset's location (tokens) as where its pods fetch the code from."""
    return replace(spec, code_bucket=asset.s3_bucket_name, code_key=asset.s3_object_key)


@dataclass(frozen=True)
class BenchmarkRunProps:
    cluster: eks.Cluster
    chart: BenchmarkChart
    # The data stack's benchmark role: results/ and the metrics namespace only.
    role: iam.IRole
    # The code asset its pods (and the sweep's) fetch with that role.
    code: s3_assets.Asset
    # The service manifests: applied before the benchmark, deleted after it.
    depends_on: Sequence[IDependable] = field(default_factory=tuple)


class BenchmarkRun(Construct):
    def __init__(self, scope: Construct, construct_id: str, props: BenchmarkRunProps) -> None:
        super().__init__(scope, construct_id)
        cluster = props.cluster
        self.association = associate(self, "PodIdentity", cluster, props.chart.spec.namespace, layout.BENCHMARK_SERVICE_ACCOUNT, props.role)
        self.code_read = code_read(self, "CodeRead", props.role, [props.code.bucket.arn_for_objects(props.code.s3_object_key)])
        self.manifest = cluster.add_cdk8s_chart("BenchmarkChart", props.chart)
        # Credentials are bound before the pod asks for them, and stay until it is gone.
        self.manifest.node.add_dependency(self.association, self.code_read, *props.depends_on)
