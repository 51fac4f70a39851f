"""What a sweep's analysis costs: ``make bench-sweep``.

The issue's sweep, 2 drafts x 7 values of k x 3 loads x 8 prompt classes (8 requests per class and
point, the baseline in the first and last wave: 48 points, 3,072 requests), stored in moto's S3 as
``specbench run --sweep-point`` stores it; then read back (AWS calls counted with a botocore event
hook, by operation) and analysed at 2,000 bootstrap resamples (time measured, the report without
charts, then the charts alone).
"""

from __future__ import annotations

import argparse
import collections
import math
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import boto3  # noqa: E402
from moto import mock_aws  # noqa: E402

from specbench.analysis.sweep import analyze_sweep  # noqa: E402
from specbench.outputs import sweep_report  # noqa: E402
from specbench.results.store import S3Store  # noqa: E402
from tests.sweep_data import bench_truth, store_points, synthetic_points  # noqa: E402

REGION, BUCKET, SWEEP_ID = "us-east-2", "specdecode-bench-data", "bench-sweep"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--resamples", type=int, default=2000)
    parser.add_argument("--requests", type=int, default=8, help="requests per class and point")
    parser.add_argument("--charts", action="store_true", help="also time drawing every chart")
    args = parser.parse_args(argv)
    os.environ.update(AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench", AWS_DEFAULT_REGION=REGION)  # noqa: S105
    truth = bench_truth()
    points = synthetic_points(truth, requests=args.requests)
    with mock_aws():
        s3 = boto3.client("s3", region_name=REGION)
        s3.create_bucket(Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": REGION})
        store = S3Store(BUCKET, "results/", s3)
        store_points(store, SWEEP_ID, points)
        files = len(store.keys(f"sweeps/{SWEEP_ID}/"))
        calls: collections.Counter[str] = collections.Counter()
        s3.meta.events.register("before-call.s3.*", lambda model, **_: calls.update([model.name]))
        started = time.perf_counter()
        read = sweep_report.load_sweep_points(store, SWEEP_ID)
        reading = time.perf_counter() - started
    started, cpu = time.perf_counter(), time.process_time()
    analysis = analyze_sweep(read, sweep_id=SWEEP_ID, resamples=args.resamples)
    analysing, analysing_cpu = time.perf_counter() - started, time.process_time() - cpu
    with tempfile.TemporaryDirectory() as out:
        started = time.perf_counter()
        sweep_report.write_report(analysis, Path(out), charts=False)
        writing = time.perf_counter() - started
        drawing = None
        if args.charts:
            started = time.perf_counter()
            charts = sweep_report.write_charts(analysis, Path(out))
            drawing = (time.perf_counter() - started, len(charts))
        widgets = sweep_report.dashboard_widgets(analysis)
    requests = sum(len(p.records) for p in read)
    print(
        f"shape: {len(truth.drafts)} drafts x {len(truth.ks)} k x {len(truth.loads)} loads x {len(truth.classes)} classes: "
        f"{len(read)} points (baseline twice per load), {requests} requests, {files} stored files"
    )
    print(f"reading from S3 (moto): {sum(calls.values())} AWS calls {dict(sorted(calls.items()))} in {reading:.2f} s")
    minimum = math.ceil(files / 1000) + files
    print(f"  minimum for this layout: {math.ceil(files / 1000)} ListObjectsV2 page(s) + one GET per file = {minimum}")
    print(f"analysis ({args.resamples} resamples): {analysing:.1f} s wall, {analysing_cpu:.1f} s CPU")
    print(f"report (Markdown, JSON, widgets): {writing:.2f} s")
    if drawing:
        print(f"charts: {drawing[1]} PNGs in {drawing[0]:.1f} s")
    print(f"dashboard: {len(widgets)} text widgets, {sum(len(w['properties']['markdown']) for w in widgets)} characters of markdown")
    print(f"table: {len(analysis.table)} lines, first: {analysis.table[0]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
