"""The product's output on a laptop, with no AWS account: ``make demo``.

1. starts the emulated baseline and speculative vLLM endpoints (``specbench emulate``, one process
   each) and a moto server for S3 and CloudWatch, all on 127.0.0.1;
2. runs the benchmark as the Job does (``specbench run`` with the deployment's settings snapshot),
   storing the run in the moto bucket and publishing its metrics to moto's CloudWatch;
3. runs one check of the cost guard (lambdas/cost_guard) against the emulated account, which has no
   Neuron node: it publishes 0 node-hours and 0 nodes up, as it would on a deployment at rest;
4. invokes the aggregation Lambda's handler on the S3 event of the run's ``publish.json``;
5. writes the dashboard body it put, its summary, and the HTML/Markdown report with charts; the
   body's top row (Deployment state) holds each service's state as the benchmark's readiness wait
   published it to moto's CloudWatch, the cost guard's figures against ``budget.node_hours``, and
   the sweep (none configured here: the row says so);
6. runs the dataset-backed suite (``builtin:classes-offline``: the project's own fixtures for Spec-Bench's
   six prompt classes, code and JSON) and prints acceptance measured from the stream and speedups
   per class (its report in ``<out>/report-classes``).

``--rehearsal`` runs it with the rehearsal profile's settings (``env.profile=rehearsal``: its short suite,
its requests per test case, its dashboard name, no dataset suite after it); the settings snapshot, the
report and the dashboard then say rehearsal.

``--three-way`` adds a third emulated service, an EAGLE3 head on the vLLM-Neuron stack
(``specbench.emulator.server.eagle3_profile``), beside the baseline and the draft model of the reference
stack. The EAGLE3 service is then compared with a baseline on another stack: the run's settings, the
report and the dashboard label it a cross-stack comparison.

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
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from moto.server import ThreadedMotoServer  # noqa: E402

from charts import benchmark_spec, serving_plan  # noqa: E402
from config import PlatformConfig, layout, load_config  # noqa: E402
from config.sweep import first_job  # noqa: E402
from config.variants import service_variants  # noqa: E402
from lambdas.aggregate import handler as aggregation  # noqa: E402
from specbench import cli  # noqa: E402
from specbench.analysis import aggregate  # noqa: E402
from specbench.aws_retry import Retrier  # noqa: E402
from specbench.emulator.process import _healthy, emulators_in_subprocess, free_ports  # noqa: E402
from specbench.emulator.server import EAGLE3_SERVICE  # noqa: E402
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


# k of the emulated EAGLE3 service: within the plugin's documented 2..7 (config/serving_stacks.py).
EAGLE3_K = 5


@contextlib.contextmanager
def eagle3_emulator(time_scale: float, k: int = EAGLE3_K, timeout_s: float = 30.0) -> Iterator[str]:
    """The EAGLE3 emulator in its own process (as each vLLM server has its own); yields its URL."""
    port = free_ports(1)[0]
    code = (
        "import sys, threading\n"
        "from specbench.emulator.server import EmulatorServer, eagle3_profile\n"
        "EmulatorServer(eagle3_profile(float(sys.argv[1]), int(sys.argv[3])), int(sys.argv[2])).start()\n"
        "threading.Event().wait()\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    process = subprocess.Popen([sys.executable, "-c", code, str(time_scale), str(port), str(k)], env=env, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout_s
        while not _healthy(url):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"EAGLE3 emulator did not start: {process.stderr.read().decode()[-1000:] if process.stderr else ''}")
            time.sleep(0.05)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()


def three_way_settings(reference: dict, bucket: str = BUCKET) -> dict:
    """The reference deployment's snapshot plus the vLLM-Neuron stack's EAGLE3 service, as one run's
    settings: every service names its stack and method, and the run is labelled cross-stack (the
    EAGLE3 service's baseline runs on the reference stack)."""
    config = load_config({"serving.stack": "vllm-neuron", "serving.num_speculative_tokens": EAGLE3_K})
    plan = serving_plan(config, bucket)
    eagle3 = json.loads(benchmark_spec(config, plan).settings_json)["variants"][-1]
    settings = json.loads(json.dumps(reference))
    settings["variants"].append({**eagle3, "name": EAGLE3_SERVICE})
    settings["serving"]["comparison"] = "cross-stack"
    return settings


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
    parser.add_argument(
        "--requests", type=int, default=None, help="requests per test case and service (default: the settings', 8 for the reference)"
    )
    parser.add_argument("--test-case", action="append", help="run only these test cases (repeatable; default: all 8)")
    parser.add_argument(
        "--classes-suite",
        default=None,
        help="the dataset suite run after it ('' to skip; default: builtin:classes-offline, none with --rehearsal)",
    )
    parser.add_argument(
        "--rehearsal",
        action="store_true",
        help="with the rehearsal profile's settings (env.profile=rehearsal: its suite, requests, dashboard; every output says rehearsal)",
    )
    parser.add_argument(
        "--three-way", action="store_true", help="also an EAGLE3 head on the vLLM-Neuron stack: baseline, draft model, EAGLE3 head"
    )
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()

    config = load_config({"env.profile": "rehearsal"} if args.rehearsal else {})
    requests = args.requests if args.requests is not None else config.benchmark.requests_per_test_case
    classes_suite = args.classes_suite if args.classes_suite is not None else ("" if args.rehearsal else "builtin:classes-offline")
    spec = benchmark_spec(config, serving_plan(config, BUCKET))
    settings_file = out / "settings.json"
    snapshot = json.loads(spec.settings_json)
    if args.three_way:
        snapshot = three_way_settings(snapshot)
    settings_file.write_text(json.dumps(snapshot, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    run_id = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + "-demo00"

    with contextlib.ExitStack() as running:
        endpoint = running.enter_context(moto_server())
        urls = dict(running.enter_context(emulators_in_subprocess(time_scale=args.time_scale)))
        if args.three_way:
            urls[EAGLE3_SERVICE] = running.enter_context(eagle3_emulator(args.time_scale))
        offline_aws(endpoint)
        s3, cloudwatch = aggregation.make_clients(REGION)
        s3.create_bucket(Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": REGION})
        print(f"moto (S3, CloudWatch) at {endpoint}; emulators at {', '.join(f'{k}={v}' for k, v in urls.items())}", flush=True)

        common = ["--results", f"s3://{BUCKET}/{layout.RESULTS_PREFIX}", "--settings", str(settings_file)]
        common += [arg for name, url in urls.items() for arg in ("--endpoint", f"{name}={url}")]
        common += ["--requests", str(requests), "--namespace", config.benchmark.metrics_namespace, "--region", REGION]
        run_args = ["run", "--run-id", run_id, *common, *(arg for case in args.test_case or [] for arg in ("--test-case", case))]
        if config.benchmark.suite_file:  # the Job passes it the same way (charts/benchmark.py)
            run_args += ["--suite", config.benchmark.suite_file]
        code = cli.main(run_args)
        if code != 0:
            print(f"demo: the benchmark exited with {code}", file=sys.stderr)
            return code
        benchmark_done = time.perf_counter()

        guard = cost_guard_check(config)
        services = (EAGLE3_SERVICE,) if args.three_way else ()
        os.environ.update(aggregation_environment(config, services))
        event = {"source": "aws.s3", "detail-type": "Object Created"}
        event["detail"] = {"bucket": {"name": BUCKET}, "object": {"key": f"{layout.RESULTS_PREFIX}{run_id}/publish.json"}}
        settings = aggregation.Settings.from_env(os.environ)
        # Two attempts: moto fails percentile queries every time, so waiting out eight would only slow the demo.
        result = aggregation.refresh(event, settings, s3, cloudwatch, retrier=Retrier(max_attempts=2, base_delay_s=0.05))
        body = cloudwatch.get_dashboard(DashboardName=settings.dashboard_name)["DashboardBody"]
        (out / "dashboard.json").write_text(json.dumps(json.loads(body), indent=2) + "\n", encoding="utf-8")
        (out / "aggregation.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")

        files = runfiles.load_run(RunStore(S3Store(BUCKET, layout.RESULTS_PREFIX, s3), run_id))
        classes = None
        if classes_suite:
            classes_id = run_id.replace("-demo00", "-demo01")
            code = cli.main(["run", "--run-id", classes_id, *common, "--suite", classes_suite, "--no-publish"])
            if code != 0:
                print(f"demo: the dataset suite run exited with {code}", file=sys.stderr)
                return code
            classes = runfiles.load_run(RunStore(S3Store(BUCKET, layout.RESULTS_PREFIX, s3), classes_id))
    summary = aggregate.summarize_run(
        files.run, files.records, files.acceptance, baseline=config.serving.baseline_service, draft_cost_ratio=EMULATOR_DRAFT_COST_RATIO
    )
    from specbench.outputs.report import write_report

    written = write_report(summary, out / "report")
    if classes is not None:
        by_class = aggregate.summarize_run(
            classes.run,
            classes.records,
            classes.acceptance,
            baseline=config.serving.baseline_service,
            draft_cost_ratio=EMULATOR_DRAFT_COST_RATIO,
        )
        write_report(by_class, out / "report-classes")
        print()
        print(class_table(by_class))
        print()
        print(cost_table(by_class))
        print(f"per-class report: {out / 'report-classes' / 'report.html'}")
    finished = time.perf_counter()
    print()
    print(cost_table(summary))
    print()
    print(summary.verdict)
    print(f"aggregation: {result['aws_calls_total']} AWS calls {result['aws_calls']}, {result['seconds']} s")
    if result["live_error"]:
        print(f"live CloudWatch figures: none, moto answers no percentile query ({result['live_error'][:60]}...); CloudWatch does")
    print(f"dashboard body: {out / 'dashboard.json'} ({result['widgets']} widgets)")
    state = result["deployment"]
    reported = ", ".join(state["services_reported"]) or "none (the benchmark published no service state)"
    print(
        f"deployment state row: services reported {reported}; cost guard: {guard['node_hours']:.2f} node-hours, "
        f"{guard['nodes_up']} Neuron nodes up; sweeps: {', '.join(state['sweeps']) or 'none'}"
        + (f"; not read: {state['error']}" if state["error"] else "")
    )
    print(f"report: {written['html']} and {written['markdown']}")
    print(f"wall time: {finished - started:.0f} s (benchmark {benchmark_done - started:.0f} s)")
    return 0


def class_table(summary: aggregate.RunSummary) -> str:
    """Per prompt class: the end-to-end and per-token speedups, and acceptance from the stream."""
    from specbench.analysis.stats import format_interval
    from specbench.outputs.report import acceptance_matrix

    speedups = {
        (group.name, c.variant): (
            format_interval(c.speedups[aggregate.HEADLINE_METRIC]),
            format_interval(c.speedups[aggregate.MODEL_METRIC]),
        )
        for group in summary.prompt_classes
        for c in group.comparisons
    }
    lines = [
        f"{'prompt class':<15} {'E2E speedup':<20} {'TPOT speedup':<20} {'acceptance length (stream)':<26} {'rate (stream)':<22} self-check"
    ]
    for row in acceptance_matrix(summary).rows:
        e2e, tpot = speedups[(row[0], row[1])]
        lines.append(f"{row[0]:<15} {e2e:<20} {tpot:<20} {row[3]:<26} {row[4]:<22} {row[5]}")
    return "\n".join(lines)


def cost_table(summary: aggregate.RunSummary) -> str:
    """Per prompt class and service: output tokens per second per node while busy and the cost of a
    million output tokens, 95% CIs, and the speculative service's change against the baseline."""
    from specbench.analysis import cost
    from specbench.analysis.stats import format_interval

    lines = [
        f"cost per million output tokens at {summary.price.describe()}; {summary.servers_per_node} servers per node "
        f"({summary.servers_per_node_source})",
        f"{'prompt class':<15} {'load':<5} {'service':<14} {'tokens/s per node':<24} {'cost per M tokens':<22} change vs baseline",
    ]
    for group in summary.prompt_classes:
        savings = {(s.variant, s.level): s for c in group.comparisons for s in c.savings if s}
        for variant in group.variants.values():
            for t in variant.throughput:
                change = (
                    "-"
                    if variant.variant == summary.baseline
                    else cost.describe_saving(savings.get((variant.variant, t.level)), summary.price)
                )
                per_node = format_interval(t.per_node, unit="", digits=1)
                money = cost.describe_cost(t.cost_per_million, summary.price)
                lines.append(f"{group.name:<15} {t.level:<5} {variant.variant:<14} {per_node:<24} {money:<22} {change}")
    return "\n".join(lines)


def cost_guard_check(config: PlatformConfig) -> dict:
    """One scheduled check of the cost guard's handler against moto (its clients follow
    AWS_ENDPOINT_URL): no Neuron instance is running there, so it records an empty ledger and
    publishes NeuronNodeHours 0 and NeuronNodesUp 0 for the dashboard's top row."""
    sys.path.insert(0, str(ROOT / "lambdas" / "cost_guard"))  # its handler imports budget.py as the Lambda does
    from lambdas.cost_guard import handler as guard

    clients = guard.clients(REGION)
    topic = clients["sns"].create_topic(Name="specdecode-demo-cost-guard")["TopicArn"]
    settings = guard.Settings(
        cluster=config.cluster.name,
        nodegroup="no-node-group-offline",
        max_size=config.neuron_nodes.max_size,
        budget_node_hours=config.budget.node_hours,
        scale_after_run=False,
        topic_arn=topic,
        ledger_bucket=BUCKET,
        ledger_key=f"{layout.COST_GUARD_PREFIX}{config.cluster.name}/neuron-node-hours.json",  # stacks/cost_guard.py ledger_key
        metrics_namespace=config.benchmark.metrics_namespace,
        price_per_hour=None,
        region=REGION,
    )
    return guard.run({"source": "aws.events", "detail-type": "Scheduled Event"}, settings, clients, datetime.now(timezone.utc))


def aggregation_environment(config: PlatformConfig, extra_services: tuple[str, ...] = ()) -> dict[str, str]:
    """The Lambda's environment as the stack sets it (stacks/results.py); ``extra_services``: the
    three-way demo's EAGLE3 service, which the reference configuration does not deploy."""
    r = config.results
    strategy, points, node_hours = first_job(config)
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
        "SERVICES": ",".join([*(v.name for v in service_variants(config.serving)), *extra_services]),
        "BUDGET_NODE_HOURS": str(config.budget.node_hours),
        "ENV_PROFILE": config.env.profile,
        "SWEEP_STRATEGY": strategy,
        "SWEEP_FIRST_JOB_POINTS": str(points),
        "SWEEP_FIRST_JOB_NODE_HOURS": str(node_hours),
    }


if __name__ == "__main__":
    raise SystemExit(main())
