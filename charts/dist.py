"""Write the serving, benchmark and (when configured) sweep objects as plain YAML for kubectl or GitOps: the same charts
``cdk deploy`` applies, one file per chart, numbered in apply order.

    python -m charts.dist --bucket-name NAME [--outdir dist] [-c key=value ...]

NAME is the ``DataBucketName`` output of the SpecDecodeData stack; the configuration comes from
cdk.json's context and ``-c`` overrides, as for synth. The pods' code is not in the YAML: the
``specbench`` zip is written beside it, and its pods fetch it from ``s3://NAME/results/code/`` (which
the benchmark role and the model-cache Job's role read): upload it there first (the command is printed).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import sys
from dataclasses import replace
from pathlib import Path

import cdk8s

from config import ConfigError, layout, load_config
from config.sweep import enabled as sweep_enabled

from .benchmark import BUNDLE
from .build import serving_charts
from .spec import benchmark_spec, serving_plan
from .sweep import sweep_spec

ROOT = Path(__file__).resolve().parents[1]
# S3 general-purpose bucket names.
BUCKET_NAME = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")


def write_dist(config, bucket_name: str, outdir: Path) -> list[Path]:
    """Synthesize the charts into ``outdir`` (replacing its YAML files); returns the files written."""
    outdir.mkdir(parents=True, exist_ok=True)
    for old in outdir.glob("*.k8s.yaml"):
        old.unlink()
    app = cdk8s.App(outdir=str(outdir), yaml_output_type=cdk8s.YamlOutputType.FILE_PER_CHART)
    plan = serving_plan(config, bucket_name)
    bench = benchmark_spec(config, plan)
    bench = replace(bench, code_bucket=bucket_name, code_key=code_key(bench.bundle))
    # The model-cache Job fetches the same zip (its role may get that key: stacks/serving.py).
    plan = replace(plan, model_cache=replace(plan.model_cache, code_bucket=bucket_name, code_key=code_key(plan.model_cache.bundle)))
    serving_charts(app, plan, bench, sweep_spec(config, plan, bench) if sweep_enabled(config) else None)
    app.synth()
    (outdir / BUNDLE).write_bytes(bench.bundle)
    return sorted(outdir.glob("*.k8s.yaml"))


def code_key(bundle: bytes) -> str:
    """Where dist's pods fetch the zip: under results/, which the benchmark role may read."""
    return f"{layout.RESULTS_PREFIX}code/{hashlib.sha256(bundle).hexdigest()}.pyz"


def cdk_context(overrides: list[str]) -> dict:
    context = json.loads((ROOT / "cdk.json").read_text()).get("context", {})
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"-c {item!r}: expected KEY=VALUE")
        context[key] = value
    return context


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Write the serving and benchmark objects as plain YAML.")
    parser.add_argument("--bucket-name", required=True, help="the DataBucketName output of the SpecDecodeData stack")
    parser.add_argument("--outdir", type=Path, default=ROOT / "dist")
    parser.add_argument("-c", "--context", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args(argv)
    if not BUCKET_NAME.match(args.bucket_name):
        print(f"--bucket-name={args.bucket_name!r}: is not an S3 bucket name; allowed: 3-63 of a-z 0-9 . -", file=sys.stderr)
        return 2
    try:
        config = load_config(cdk_context(args.context), os.environ)
    except ConfigError as err:
        print(err, file=sys.stderr)
        return 2
    for path in write_dist(config, args.bucket_name, args.outdir):
        print(path)
    key = code_key((args.outdir / BUNDLE).read_bytes())
    print(f"upload the pods' code first: aws s3 cp {args.outdir / BUNDLE} s3://{args.bucket_name}/{key}", file=sys.stderr)
    # The volumes name the bucket's region; it must be the region the stacks were deployed to.
    print(f"region {config.env.region} (set -c env.region=... if you deployed elsewhere)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
