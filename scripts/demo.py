"""The product's output on a laptop, with no AWS account: ``make demo``.

1. starts the emulated baseline and speculative vLLM endpoints (``specbench emulate``, one process
   each) and a moto server for S3 and CloudWatch, all on 127.0.0.1;
2. runs the benchmark as the Job does (``specbench run`` with the deployment's settings snapshot),
   storing the run in the moto bucket and publishing its metrics to moto's CloudWatch;
3. invokes the aggregation Lambda's handler on the S3 event of the run's ``publish.json``;
4. writes the dashboard body it put, its summary, and the HTML/Markdown report with charts.

The emulators run at ``--time-scale`` (0.2 by default: every latency is a fifth of the real model's,
speedups are unchanged), so a full 8-test-case suite takes about two minutes.

moto answers GetMetricData only for Sum/Average/Minimum/Maximum/SampleCount; the handler's live
percentile read fails there and the dashboard is built from the stored run alone (on AWS it works;
the handler's tests cover it with a stubbed CloudWatch).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from moto.server import ThreadedMotoServer  # noqa: E402

from charts import benchmark_spec, serving_plan  # noqa: E402
from config import PlatformConfig, layout, load_config  # noqa: E402
from lambdas.aggregate import handler as aggregation  # noqa: E402
from specbench import cli  # noqa: E402
from specbench.analysis import aggregate  # noqa: E402
from specbench.aws_retry import Retrier  # noqa: E402
from specbench.emulator.process import emulators_in_subprocess, free_ports  # noqa: E402
from specbench.results import runfiles  # noqa: E402
from specbench.results.store import RunStore, S3Store  # noqa: E402

BUCKET = "specdecode-demo-data"
REGION = "us-east-2"
# The emulator's draft/target step cost ratio (specbench.emulator.server.default_profiles): the model's
# expected speedups should then match what is measured, which the report shows.
EMULATOR_DRAFT_COST_RATIO = 0.08


@contextlib.contextmanager
def moto_server() -> Iterator[str]:
    port = free_ports(1)[0]
    # werkzeug logs every request, and a traceback for each percentile query moto cannot answer.
    logging.getLogger("werkzeug").setLevel(logging.CRITICAL)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()


def offline_aws(endpoint: str) -> None:
    """Every boto3 client of this process (and the benchmark's) talks to moto, with dummy keys."""
    os.environ.update(
        AWS_ENDPOINT_URL=endpoint,
        AWS_ACCESS_KEY_ID="demo",
        AWS_SECRET_ACCESS_KEY="demo",  # noqa: S105 - moto accepts any
        AWS_DEFAULT_REGION=REGION,
        AWS_REGION=REGION,
        AWS_EC2_METADATA_DISABLED="true",
    )
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN"):
        os.environ.pop(name, None)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="demo-output", help="where to write the dashboard body and the report (default: %(default)s)")
    parser.add_argument("--time-scale", type=float, default=0.2, help="emulated latencies x this (default: %(default)s)")
    parser.add_argument("--requests", type=int, default=8, help="requests per test case and service (default: %(default)s)")
    parser.add_argument("--test-case", action="append", help="run only these test cases (repeatable; default: all 8)")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()

    config = load_config({})
    spec = benchmark_spec(config, serving_plan(config, BUCKET))
    settings_file = out / "settings.json"
    settings_file.write_text(spec.settings_json, encoding="utf-8")
    run_id = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + "-demo00"

    with moto_server() as endpoint, emulators_in_subprocess(time_scale=args.time_scale) as urls:
        offline_aws(endpoint)
        s3, cloudwatch = aggregation.make_clients(REGION)
        s3.create_bucket(Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": REGION})
        print(f"moto (S3, CloudWatch) at {endpoint}; emulators at {', '.join(f'{k}={v}' for k, v in urls.items())}", flush=True)

        run_args = ["run", "--results", f"s3://{BUCKET}/{layout.RESULTS_PREFIX}", "--run-id", run_id, "--settings", str(settings_file)]
        run_args += [arg for name, url in urls.items() for arg in ("--endpoint", f"{name}={url}")]
        run_args += ["--requests", str(args.requests), "--namespace", config.benchmark.metrics_namespace, "--region", REGION]
        run_args += [arg for case in args.test_case or [] for arg in ("--test-case", case)]
        code = cli.main(run_args)
        if code != 0:
            print(f"demo: the benchmark exited with {code}", file=sys.stderr)
            return code
        benchmark_done = time.perf_counter()

        os.environ.update(aggregation_environment(config))
        event = {"source": "aws.s3", "detail-type": "Object Created"}
        event["detail"] = {"bucket": {"name": BUCKET}, "object": {"key": f"{layout.RESULTS_PREFIX}{run_id}/publish.json"}}
        settings = aggregation.Settings.from_env(os.environ)
        # Two attempts: moto fails percentile queries every time, so waiting out eight would only slow the demo.
        result = aggregation.refresh(event, settings, s3, cloudwatch, retrier=Retrier(max_attempts=2, base_delay_s=0.05))
        body = cloudwatch.get_dashboard(DashboardName=settings.dashboard_name)["DashboardBody"]
        (out / "dashboard.json").write_text(json.dumps(json.loads(body), indent=2) + "\n", encoding="utf-8")
        (out / "aggregation.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")

        files = runfiles.load_run(RunStore(S3Store(BUCKET, layout.RESULTS_PREFIX, s3), run_id))
    summary = aggregate.summarize_run(
        files.run, files.records, files.acceptance, baseline=config.serving.baseline_service, draft_cost_ratio=EMULATOR_DRAFT_COST_RATIO
    )
    from specbench.outputs.report import write_report

    written = write_report(summary, out / "report")
    finished = time.perf_counter()
    print()
    print(summary.verdict)
    print(f"aggregation: {result['aws_calls_total']} AWS calls {result['aws_calls']}, {result['seconds']} s")
    if result["live_error"]:
        print(f"live CloudWatch figures: none, moto answers no percentile query ({result['live_error'][:60]}...); CloudWatch does")
    print(f"dashboard body: {out / 'dashboard.json'} ({result['widgets']} widgets)")
    print(f"report: {written['html']} and {written['markdown']}")
    print(f"wall time: {finished - started:.0f} s (benchmark {benchmark_done - started:.0f} s)")
    return 0


def aggregation_environment(config: PlatformConfig) -> dict[str, str]:
    """The Lambda's environment as the stack sets it (stacks/results.py)."""
    r = config.results
    return {
        "RESULTS_BUCKET": BUCKET,
        "RESULTS_PREFIX": layout.RESULTS_PREFIX,
        "DASHBOARD_NAME": r.dashboard_name,
        "METRICS_NAMESPACE": config.benchmark.metrics_namespace,
        "CLUSTER_NAME": config.cluster.name,
        "SERVING_NAMESPACE": config.serving.namespace,
        "BASELINE_VARIANT": config.serving.baseline_service,
        "DRAFT_COST_RATIO": str(EMULATOR_DRAFT_COST_RATIO),
        "LOOKBACK_HOURS": str(r.lookback_hours),
        "BOOTSTRAP_RESAMPLES": str(r.bootstrap_resamples),
    }


if __name__ == "__main__":
    raise SystemExit(main())
