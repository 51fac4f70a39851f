"""``specbench``: run the benchmark, republish a stored run, validate a suite, emulate endpoints.

    python -m specbench emulate --time-scale 0.1          # baseline on :8000, speculative on :8001
    python -m specbench run --endpoint qwen-vllm=http://127.0.0.1:8000 --endpoint qwen-sd-vllm=http://127.0.0.1:8001 --no-publish
    python -m specbench publish ./results/<run_id> --region us-east-2
    python -m specbench report <run_id>                     # ./report-<run_id>/report.html, report.md, charts
    python -m specbench sweep-report --results ./results --sweep-id ID   # ./sweep-report-ID/sweep-report.md, charts
    python -m specbench suite [--suite my-suite.json]
    python -m specbench import-llmperf ./llmperf-out/sd-json --variant qwen-sd-vllm --test-case json --run-id reference
    python -m specbench plan -c sweep.variants=q17-k5:Qwen/Qwen3-1.7B:5 -c neuron_nodes.desired_size=2   # a checkout only
    python -m specbench preflight -c neuron_nodes.availability_zone=us-east-2b   # a checkout only; reads the account

Exit codes of ``run``: 0 completed (failed requests are counted, not fatal), 1 crashed or the
environment failed, or stopped by SIGTERM (what completed is stored), 2 bad arguments, 3 stored but
not all published, 4 endpoints never ready, 5 completed but every request of some service failed,
130 interrupted by Ctrl-C (SIGINT; 128 + the signal's number, as shells report it; what completed
is stored, requests in flight recorded as interrupted).
Every command reports a problem in one line (no traceback): 2 for bad input, 1 for the environment,
130 for Ctrl-C.
Exit codes of ``preflight``: 0 every check passed, 1 a check failed (or the caller's identity could
not be read), 2 bad arguments or settings, 3 warnings only (a check whose API call failed is one).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import urlsplit

from specbench.analysis import prices
from specbench.flags import (
    OneLineParser,
    ascii_float,
    ascii_int,
    finite_number,
    load_list,
    non_negative_int,
    positive_float,
    positive_int,
    safe_name,
    seconds,
    temperature,
)
from specbench.jsonfile import JsonFileError, read_json_file
from specbench.jsonfile import dumps as jsonfile_dumps
from specbench.load import APIS, ENGINES
from specbench.load.types import Endpoint, LoadSpec
from specbench.names import allowed, echo, name_problem
from specbench.prompts.datasets import DatasetError, open_cache
from specbench.prompts.suite import Suite, SuiteError, load_suite
from specbench.results.store import StoreError
from specbench.sweep.points import parse_sweep_point

DEFAULT_ENDPOINTS = ("qwen-vllm=http://qwen-vllm:8000", "qwen-sd-vllm=http://qwen-sd-vllm:8000")
EXIT_CRASHED, EXIT_USAGE, EXIT_UNPUBLISHED, EXIT_NOT_READY, EXIT_SERVICE_FAILED = 1, 2, 3, 4, 5
EXIT_INTERRUPTED = 130  # Ctrl-C: 128 + SIGINT (2), what a shell reports for a process SIGINT ended


def parse_endpoint(text: str) -> Endpoint:
    name, sep, url = text.partition("=")
    if not sep or not name or not url.startswith(("http://", "https://")):
        raise argparse.ArgumentTypeError(f"--endpoint {echo(text)}: expected NAME=http(s)://HOST:PORT")
    problem = name_problem(name)
    if problem:  # the name becomes a folder, an S3 key part and the Variant dimension
        raise argparse.ArgumentTypeError(f"--endpoint {echo(text)}: the name {problem} (allowed: {allowed()})")
    try:
        parsed = urlsplit(url)
        parsed.port  # noqa: B018 - raises ValueError outside 0-65535 or when not a number
    except ValueError:
        parsed = None
    if parsed is None or not parsed.hostname or not parsed.hostname.isascii() or parsed.port == 0:
        raise argparse.ArgumentTypeError(f"--endpoint {echo(text)}: expected NAME=http(s)://HOST:PORT with a port 1-65535")
    return Endpoint(name, url.rstrip("/"))


def node_price(text: str) -> float:
    """--node-price-per-hour: 0 (no price: cost not computed) or a plausible USD per node-hour for
    some Trainium type (specbench/analysis/prices.py); the commands check the run's own type."""
    return finite_number(text, lambda v: not prices.price_problem(v), prices.price_allowed())


def servers_count(text: str) -> int:
    """--servers-per-node: a whole number from 1 (it divides) to one server per logical core."""
    value = ascii_int(text)
    if prices.servers_problem(value):
        raise argparse.ArgumentTypeError(f"{text}: {prices.servers_problem(value)}; allowed: {prices.servers_allowed()}")
    return value


PRICE_HELP = (
    "USD per hour of one Neuron node, for the cost per million output tokens (0: no price, cost not computed; "
    "default: the price the run's settings recorded, results.node_price_per_hour)"
)


def _cost_problem(cost: dict, source: str, price: float | None) -> str:
    """Why a settings snapshot's cost inputs (and a flag's price for its instance type) are unusable, or ""."""
    instance = cost.get("instance_type") if isinstance(cost.get("instance_type"), str) else ""
    recorded, servers, cores = cost.get("node_price_per_hour"), cost.get("servers_per_node"), cost.get("logical_cores_per_node")
    if price is None and recorded is not None and (problem := prices.price_problem(recorded, instance)):  # a flag replaces it
        return f"--settings: cost.node_price_per_hour {recorded!r} {problem}; allowed: {prices.price_allowed(instance)}"
    if servers is not None and (problem := prices.servers_problem(servers, cores)):
        return f"--settings: cost.servers_per_node {servers!r} {problem}; allowed: {prices.servers_allowed(cores)}"
    if price is not None and (problem := prices.price_problem(price, instance)):
        return f"{source} {price:g}: {problem}; allowed: {prices.price_allowed(instance)}"
    return ""


def with_price(settings: dict, price: float | None, source: str) -> dict:
    """The settings snapshot with ``price`` (from a flag) recorded as the run's node price; ValueError
    (one line) when its cost inputs, or the flag's price for its instance type, are unusable."""
    if settings.get("cost") is not None and not isinstance(settings.get("cost"), dict):
        raise ValueError(f"--settings: cost is {type(settings['cost']).__name__}, expected an object (node_price_per_hour, ...)")
    cost = dict(settings.get("cost") or {})
    problem = _cost_problem(cost, source, price)
    if problem:
        raise ValueError(problem)
    if price is None:
        return settings
    cost.pop("price_entry", None)  # the catalog's entry is no longer the price
    cost.update(node_price_per_hour=price, price_source=source if price > 0 else f"no price ({source} 0): cost not computed")
    return {**settings, "cost": cost}


def parser() -> argparse.ArgumentParser:
    root = OneLineParser(prog="specbench", description="Measure speculative decoding against a baseline, per prompt type.")
    commands = root.add_subparsers(dest="command", required=True)

    run = commands.add_parser("run", help="drive a suite at the endpoints, store every result, publish to CloudWatch")
    run.add_argument(
        "--endpoint",
        action="append",
        type=parse_endpoint,
        help="NAME=URL; repeat; the first is the baseline unless --role says otherwise (default: the two services)",
    )
    run.add_argument("--model", default="Qwen/Qwen3-32B", help="served model name sent in every request")
    run.add_argument("--engine", choices=ENGINES, default="native")
    run.add_argument("--api", choices=APIS, default="chat", help="chat completions (as llmperf) or completions")
    run.add_argument(
        "--suite", default="", help="suite JSON file, or builtin:NAME (reference, classes, classes-offline; default: builtin reference)"
    )
    run.add_argument(
        "--dataset-cache",
        default="",
        help="directory or s3://BUCKET/datasets/ caching dataset files by sha256 (reruns read the same bytes)",
    )
    run.add_argument(
        "--thinking",
        choices=("off", "on"),
        default="off",
        help="Qwen3 thinking mode, sent as chat_template_kwargs.enable_thinking on every chat request (default: off)",
    )
    run.add_argument("--test-case", action="append", default=[], help="run only this test case; repeat")
    run.add_argument("--input-tokens", type=positive_int, default=64)
    run.add_argument("--output-tokens", type=positive_int, default=600, help="max_tokens of every request")
    run.add_argument(
        "--concurrency",
        type=positive_int,
        action="append",
        help="requests in flight per endpoint (closed loop); repeat for several load levels (default: 4)",
    )
    run.add_argument(
        "--request-rate",
        type=positive_float,
        action="append",
        default=[],
        help="requests/s per endpoint, Poisson arrivals (open loop, native engine); repeat for several load levels",
    )
    run.add_argument("--requests", type=positive_int, default=8, help="requests per test case and endpoint")
    run.add_argument("--temperature", type=temperature, default=0.0, help="sampling temperature, >= 0 (default: 0, greedy)")
    run.add_argument("--seed", type=ascii_int, default=11111)
    run.add_argument("--ignore-eos", action="store_true", help="always generate --output-tokens (vLLM extension)")
    run.add_argument("--request-timeout", type=seconds, default=1200.0, help="seconds per request (> 0)")
    run.add_argument("--ready-timeout", type=seconds, default=900.0, help="seconds to wait for every endpoint's /health and /v1/models")
    run.add_argument(
        "--max-consecutive-failures",
        type=non_negative_int,
        default=LoadSpec.max_consecutive_failures,
        help="either engine: after this many failed requests in a row, send nothing more to that endpoint this run "
        "(recorded as not_sent); 0 never stops (default: %(default)s)",
    )
    run.add_argument("--results", default="results", help="directory, or s3://BUCKET/PREFIX/ (default: ./results)")
    run.add_argument("--run-id", type=safe_name, default=None, help="default: UTC time and a random suffix; letters, digits, '-', '_', '.'")
    run.add_argument("--settings", default="", help="JSON snapshot of the deployment, stored with the run")
    run.add_argument(
        "--role",
        action="append",
        default=[],
        metavar="NAME=ROLE",
        help="what an endpoint serves, recorded in run.json for runs without --settings: NAME=baseline or "
        "NAME=METHOD:MODEL:K (METHOD draft or eagle3); repeat (default: the first --endpoint is the baseline)",
    )
    run.add_argument("--node-price-per-hour", type=node_price, default=None, help=PRICE_HELP + "; recorded in run.json")
    run.add_argument(
        "--resamples",
        type=positive_int,
        default=1000,
        help="bootstrap resamples of the cost table's confidence intervals printed at the end",
    )
    run.add_argument("--namespace", default="Qwen/LLMPerf", help="CloudWatch namespace")
    run.add_argument("--region", default=None, help="AWS region for S3 and CloudWatch")
    run.add_argument("--no-publish", action="store_true", help="store only; publish later with `specbench publish`")
    run.add_argument("--no-progress", action="store_true")
    run.add_argument("--sweep-id", default="", help="the sweep this run is a point of (with --sweep-point)")
    run.add_argument(
        "--sweep-point", default="", help='the point, as JSON: {"point_id", "wave", "variant": {...}, "load": {"kind", "value"}}'
    )

    publish = commands.add_parser("publish", help="publish (again) a stored run's metrics to CloudWatch")
    publish.add_argument("run", help="the run's location: a directory or s3://BUCKET/PREFIX/RUN_ID")
    publish.add_argument("--namespace", default="Qwen/LLMPerf")
    publish.add_argument("--region", default=None)
    publish.add_argument("--all", action="store_true", help="republish every value, even after a partly successful publish")

    report = commands.add_parser("report", help="write a stored run's report: HTML and Markdown with PNG charts")
    report.add_argument("run", help="the run's location (a directory or s3://BUCKET/PREFIX/RUN_ID), or a run id inside --results")
    report.add_argument("--results", default=None, help="where a bare run id is: directory or s3://BUCKET/PREFIX/ (default: ./results)")
    report.add_argument("--out", default="", help="output directory (default: ./report-<run_id>)")
    report.add_argument("--baseline", default=None, help="the service compared against (default: the one without a draft model)")
    report.add_argument(
        "--draft-cost-ratio",
        type=ascii_float,  # finite here; the range is checked by the command (its own message)
        default=0.1,
        help="c, a draft step's cost in target steps, for the expected speedup (0 < c < 1)",
    )
    report.add_argument("--resamples", type=positive_int, default=2000, help="bootstrap resamples of every confidence interval")
    report.add_argument("--node-price-per-hour", type=node_price, default=None, help=PRICE_HELP)
    report.add_argument(
        "--servers-per-node", type=servers_count, default=None, help="servers of this size per node (default: the run's settings)"
    )
    report.add_argument("--region", default=None)
    report.add_argument("--no-charts", action="store_true", help="HTML and Markdown only, no PNG charts (no matplotlib needed)")

    sweep = commands.add_parser("sweep-report", help="a sweep's recommendation table, curves and load figures (Markdown, PNG, JSON)")
    sweep.add_argument(
        "--results", default="results", help="directory or s3://BUCKET/PREFIX/ holding sweeps/<sweep id>/ (default: ./results)"
    )
    source = sweep.add_mutually_exclusive_group(required=True)
    source.add_argument("--sweep-id", type=safe_name, help="the sweep: every point stored under <results>/sweeps/<sweep id>/")
    source.add_argument("--run", help="instead: one multi-level run of the services (directory or s3://BUCKET/PREFIX/RUN_ID)")
    sweep.add_argument(
        "--role", action="append", default=[], metavar="NAME=ROLE", help="with --run: what an endpoint served, if the run did not record it"
    )
    sweep.add_argument("--out", default="", help="output directory (default: ./sweep-report-<sweep id or run id>)")
    sweep.add_argument("--metric", choices=("e2e", "tpot"), default="e2e", help="what the recommendation ranks by (default: end-to-end)")
    sweep.add_argument(
        "--slo-ttft-ms",
        type=positive_float,
        default=None,
        help="goodput: a request's TTFT limit (default: the deployment's sweep.slo_ttft_ms)",
    )
    sweep.add_argument(
        "--slo-tpot-ms",
        type=positive_float,
        default=None,
        help="goodput: a request's time-per-output-token limit (default: the deployment's sweep.slo_tpot_ms)",
    )
    sweep.add_argument(
        "--servers-per-node",
        type=servers_count,
        default=None,
        help="tokens/s per node = per server x this (default: the deployment's settings, logical cores per node // TP; else 1)",
    )
    sweep.add_argument("--node-price-per-hour", type=node_price, default=None, help=PRICE_HELP)
    sweep.add_argument("--resamples", type=positive_int, default=2000, help="bootstrap resamples of every confidence interval")
    sweep.add_argument("--no-charts", action="store_true", help="Markdown and JSON only (no matplotlib)")
    sweep.add_argument("--dashboard", default="", help="also put the table and per-point bars as this CloudWatch dashboard (its own)")
    sweep.add_argument("--region", default=None)

    imported = commands.add_parser("import-llmperf", help="bring one llmperf results directory into a stored run")
    imported.add_argument("directory", help="llmperf's --results-dir of one service and test case")
    imported.add_argument("--variant", type=safe_name, required=True, help="the service it measured, e.g. qwen-sd-vllm")
    imported.add_argument("--test-case", type=safe_name, required=True)
    imported.add_argument("--prompt-class", default=None, help="structured or open-ended (default: the reference suite's)")
    imported.add_argument("--results", default="results", help="directory, or s3://BUCKET/PREFIX/")
    imported.add_argument(
        "--run-id", type=safe_name, required=True, help="the run to add to (created if new); import each service into the same one"
    )
    imported.add_argument("--region", default=None)

    staged_sweep = commands.add_parser("sweep", help="a staged sweep's next stage (sweep.strategy=staged; docs/sweeps.md)")
    steps = staged_sweep.add_subparsers(dest="sweep_command", required=True)
    nxt = steps.add_parser("next", help="decide at every load from the stored points; print and store the next stage and its command")
    nxt.add_argument("--sweep-id", type=safe_name, required=True, help="the sweep (its points under <results>/sweeps/<sweep id>/)")
    nxt.add_argument("--results", default="results", help="directory or s3://BUCKET/PREFIX/ (default: ./results)")
    nxt.add_argument(
        "--node-price-per-hour",
        type=node_price,
        default=None,
        help="objective: mix-weighted cost per million tokens at this node price (default: the setting results.node_price_per_hour; "
        "0: the mix-weighted speedup)",
    )
    nxt.add_argument("--resamples", type=positive_int, default=400, help="bootstrap replicates of the model's interval")
    nxt.add_argument("-c", "--context", action="append", default=[], metavar="KEY=VALUE", help="a setting, as with cdk -c")
    nxt.add_argument("--cdk-json", default="", help="the project's cdk.json (default: the checkout's)")
    nxt.add_argument("--region", default=None)
    job = steps.add_parser("stage-job", help="filter: the CronJob's Job JSON (stdin) made into a stage's Job (stdout)")
    job.add_argument("--stage", required=True, help="the after-stage-<n>.json that sweep next stored (a path or s3:// URL)")
    job.add_argument("--region", default=None)
    from specbench.outputs.sweep_controller import add_arguments as add_control_arguments

    ctl = steps.add_parser("control", help="run a staged sweep's stages in the cluster (a pod; docs/sweeps.md)")
    add_control_arguments(ctl)

    plan = commands.add_parser("plan", help="print the configured sweep's matrix, waves, node-hours and cost (from a checkout)")
    plan.add_argument("-c", "--context", action="append", default=[], metavar="KEY=VALUE", help="a setting, as with cdk -c")
    plan.add_argument("--cdk-json", default="", help="the project's cdk.json (default: the checkout's)")

    predict = commands.add_parser(
        "predict", help="the serving model's TPOT, E2E, tokens/s per node, speedup and cost per class and load (from a checkout)"
    )
    predict.add_argument("-c", "--context", action="append", default=[], metavar="KEY=VALUE", help="a setting, as with cdk -c")
    predict.add_argument("--cdk-json", default="", help="the project's cdk.json (default: the checkout's)")
    predict.add_argument("--acceptance", action="append", default=[], metavar="CLASS=A", help="assume per-token acceptance A for a class")
    predict.add_argument("--from-run", default="", metavar="RUN", help="acceptance per class from a stored run")
    predict.add_argument("--from-sweep", default=None, metavar="SWEEP_ID", help="acceptance per class from a stored sweep (in --results)")
    predict.add_argument("--results", default=None, help="directory or s3://BUCKET/PREFIX/ of stored runs (default: results)")
    predict.add_argument("--region", default=None)
    predict.add_argument(
        "--loads", type=load_list, default=None, help="clients in flight, comma-separated (default: 1, 2, 4 ... 2 x max_num_seqs)"
    )
    predict.add_argument(
        "--profile", default="", metavar="FILE", help="the free parameters (a --calibrate output; default: the write-up's)"
    )
    predict.add_argument(
        "--node-price-per-hour", type=node_price, default=None, help=PRICE_HELP.replace("the run's settings recorded", "the setting")
    )
    predict.add_argument("--prompt-tokens", type=positive_int, default=None, help="default: benchmark.input_tokens")
    predict.add_argument("--output-tokens", type=positive_int, default=None, help="default: benchmark.output_tokens")
    predict.add_argument("--k-max", type=positive_int, default=15, help="the largest k the best-k search tries")
    predict.add_argument("--json", default="", metavar="PATH", help="also write the prediction as JSON")
    predict.add_argument(
        "--calibrate",
        nargs="+",
        default=[],
        metavar="RUN",
        help="fit the free parameters to these stored runs ('writeup': the write-up's figures)",
    )
    predict.add_argument("--fit", default="", help="the parameters to fit, comma-separated (default: those the points identify)")
    predict.add_argument("--save-profile", default="serving-profile.json", metavar="PATH", help="where --calibrate writes the profile")
    predict.add_argument(
        "--role",
        action="append",
        default=[],
        metavar="NAME=ROLE",
        help="what an endpoint of a --calibrate or --from-run run served, where the run did not record it "
        "(NAME=baseline or NAME=METHOD:MODEL:K)",
    )
    preflight = commands.add_parser(
        "preflight", help="read the account (read-only) for what the deploy needs: one line per check (from a checkout)"
    )
    preflight.add_argument("-c", "--context", action="append", default=[], metavar="KEY=VALUE", help="a setting, as with cdk -c")
    preflight.add_argument("--cdk-json", default="", help="the project's cdk.json (default: the checkout's)")
    preflight.add_argument(
        "--cdk-out", default="", help="the synthesized app, for the bootstrap version it needs (default: the checkout's cdk.out)"
    )
    preflight.add_argument(
        "--toolkit-stack-name", default="", help="the CDK bootstrap stack (default: cdk.json's toolkitStackName, else CDKToolkit)"
    )
    preflight.add_argument(
        "--run-hours", type=positive_float, default=None, help="hours a reservation must last from now (default: the deploy's estimate)"
    )
    preflight.add_argument(
        "--time-limit",
        type=positive_float,
        default=60.0,
        metavar="SECONDS",
        help="the bound on all its AWS calls together (default 60); a call still waiting then is named, the rest not made",
    )

    suite = commands.add_parser("suite", help="validate a suite file and print its test cases")
    suite.add_argument("--suite", default="")
    suite.add_argument("--fetch", action="store_true", help="also fetch, check and sample its dataset sources")
    suite.add_argument("--dataset-cache", default="")

    # Parsed by the emulator itself (main() hands it the rest of the line); listed here for --help.
    commands.add_parser("emulate", help="serve emulated baseline and speculative endpoints on 127.0.0.1 (see emulate --help)")
    return root


@functools.lru_cache(maxsize=1)
def _shared_parser() -> argparse.ArgumentParser:
    """One parser per process for main(): building it is ~100 add_argument calls and argparse's
    gettext lookups (3 ms of CPU), and tests and scripts call main() hundreds of times in one process.
    Parsing never changes a parser (argparse builds a new Namespace on every call)."""
    return parser()


def _parse(argv: Sequence[str]) -> argparse.Namespace:
    """The arguments of one call; list values copied, so that no call shares (and could change) the
    parser's own list defaults (``--test-case`` and ``-c`` default to [], which argparse hands out as is)."""
    args = _shared_parser().parse_args(argv)
    return argparse.Namespace(**{key: list(value) if isinstance(value, list) else value for key, value in vars(args).items()})


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        if argv[:1] == ["emulate"]:
            from specbench.emulator.server import main_emulate

            try:
                return main_emulate(argv[1:])
            except OSError as error:  # a port in use, or not ours to bind
                print(f"specbench emulate: {error} (choose others with --baseline-port, --speculative-port)", file=sys.stderr)
                return EXIT_CRASHED
        args = _parse(argv)
        if args.command == "run":
            return command_run(args)
        if args.command == "publish":
            return command_publish(args)
        if args.command == "import-llmperf":
            return command_import(args)
        if args.command == "report":
            return command_report(args)
        if args.command == "plan":
            return command_plan(args)
        if args.command == "predict":
            return command_predict(args)
        if args.command == "preflight":
            return command_preflight(args)
        if args.command == "sweep-report":
            return command_sweep_report(args)
        if args.command == "sweep" and args.sweep_command == "control":
            return command_sweep_control(args)
        if args.command == "sweep":
            return command_sweep(args)
        return command_suite(args)
    except (SuiteError, DatasetError) as error:
        print(f"specbench: {error}", file=sys.stderr)
        return EXIT_USAGE
    except StoreError as error:  # a results location that cannot be written (import-llmperf, publish)
        print(f"specbench: {error}", file=sys.stderr)
        return EXIT_CRASHED
    except KeyboardInterrupt:
        print("specbench: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as error:  # noqa: BLE001 - the promise is one line, never a traceback
        print(f"specbench: unexpected {type(error).__name__}: {error}", file=sys.stderr)
        return EXIT_CRASHED


def read_settings(path: str) -> dict:
    """The --settings file: a JSON object; ValueError naming the flag and the file otherwise."""
    if not path:
        return {}
    try:
        data = read_json_file(path)
    except JsonFileError as error:
        raise ValueError(f"--settings {path}: {error}") from None
    if not isinstance(data, dict):
        raise ValueError(f"--settings {path}: expected a JSON object (the deployment's settings.json), got {type(data).__name__}")
    return data


def aws_problem(region: str | None) -> str | None:
    """Why CloudWatch cannot be called from here (no region, no credentials), or None."""
    import boto3

    session = boto3.Session(region_name=region)
    if not session.region_name:
        return "no AWS region: pass --region or set AWS_REGION"
    if session.get_credentials() is None:
        return "no AWS credentials found (environment, profile, Pod Identity or instance role)"
    return None


def failed_services(records: list) -> list[str]:
    """Services every one of whose requests failed (a wrong URL, a server that is not vLLM, ...)."""
    by_service: dict[str, bool] = {}
    for record in records:
        by_service[record.variant] = by_service.get(record.variant, False) or record.ok
    return sorted(name for name, any_ok in by_service.items() if not any_ok)


def command_suite(args: argparse.Namespace) -> int:
    suite = load_suite(args.suite)
    if args.fetch:
        suite = suite.materialize(open_cache(args.dataset_cache))
    print(f"suite {suite.name!r}: {len(suite.test_cases)} test cases")
    for case in suite.test_cases:
        if case.dataset:
            drawn = f" drew {', '.join(item.id for item in case.items)}" if case.items else ""
            what = f"{case.sample} from {case.dataset} {list(case.categories) or ''}{drawn}"
        else:
            what = repr(case.text)
        print(f"  {case.name:<20} {case.prompt_class:<14} {what}")
    for source in suite.sources:
        print(f"  dataset {source.name}: {source.location()} ({source.licence}, sha256 {source.sha256[:12]}...)")
    return 0


def dataset_suite(suite: Suite, args: argparse.Namespace) -> Suite:
    """The suite with its dataset prompts drawn (fetched, checked, cached), before any traffic; a
    dataset suite needs the native engine and the chat API (its prompts are chat messages)."""
    if not suite.sources:
        return suite
    if args.engine != "native" or args.api != "chat":
        raise DatasetError(f"suite {suite.name!r} draws dataset prompts (chat messages): use --engine native --api chat")
    return suite.materialize(open_cache(args.dataset_cache, args.region))


def command_run(args: argparse.Namespace) -> int:
    from specbench.load import make_engine
    from specbench.outputs.publish import cost_table, describe_publish, publish_run, summary_table
    from specbench.results.records import error_kinds
    from specbench.results.roles import flag_roles, parse_roles
    from specbench.results.store import RunStore, open_store
    from specbench.runner import Runner, RunPlan, new_run_id

    if args.request_rate and args.engine == "llmperf":
        print("specbench: --request-rate: the llmperf engine is closed-loop only (--concurrency); use --engine native", file=sys.stderr)
        return EXIT_USAGE
    endpoints = tuple(args.endpoint or [parse_endpoint(text) for text in DEFAULT_ENDPOINTS])
    if len({e.name for e in endpoints}) != len(endpoints):
        print("specbench: --endpoint names must be unique", file=sys.stderr)
        return EXIT_USAGE
    if bool(args.sweep_id) != bool(args.sweep_point):
        print("specbench: --sweep-id and --sweep-point go together", file=sys.stderr)
        return EXIT_USAGE
    try:
        sweep = parse_sweep_point(args.sweep_id, args.sweep_point) if args.sweep_id else {}
        settings = with_price(read_settings(args.settings), args.node_price_per_hour, "specbench run --node-price-per-hour")
        roles, baseline = flag_roles([e.name for e in endpoints], parse_roles(args.role), settings)
        store = RunStore(open_store(args.results, args.region), args.run_id or new_run_id())
    except ValueError as error:  # a bad --settings file, a bad --role, a bad --results
        print(f"specbench: {error}", file=sys.stderr)
        return EXIT_USAGE
    try:
        existing = store.keys()
    except Exception as error:  # noqa: BLE001 - an unreadable location: the runner's first write says why
        existing = []
        del error
    if existing:  # a second run into the same folder would overwrite some files and keep others
        print(
            f"specbench: --run-id {store.run_id}: {store.location} already holds a run ({len(existing)} files, e.g. {existing[0]}); "
            "choose another --run-id",
            file=sys.stderr,
        )
        return EXIT_USAGE
    concurrencies = list(dict.fromkeys(args.concurrency or [4]))
    load = LoadSpec(
        model=args.model,
        max_tokens=args.output_tokens,
        concurrency=concurrencies[0],
        requests=args.requests,
        request_timeout_s=args.request_timeout,
        temperature=args.temperature,
        seed=args.seed,
        api=args.api,
        ignore_eos=args.ignore_eos,
        enable_thinking=args.thinking == "on",
        max_consecutive_failures=args.max_consecutive_failures,
    )
    plan = RunPlan(
        endpoints=endpoints,
        suite=dataset_suite(load_suite(args.suite).select(args.test_case), args),
        load=load,
        levels=load_levels(load, concurrencies if args.concurrency else [], list(dict.fromkeys(args.request_rate))),
        input_tokens=args.input_tokens,
        engine=args.engine,
        ready_timeout_s=args.ready_timeout,
        settings=settings,
        sweep=sweep,
        roles=roles,
    )
    print(f"run {store.run_id}: {len(plan.suite.test_cases)} test cases x {len(endpoints)} endpoints -> {store.location}", flush=True)
    runner = Runner(plan, make_engine(args.engine), store, progress=not args.no_progress)
    try:
        result = run_until_signal(runner.run())
    except (asyncio.CancelledError, KeyboardInterrupt) as stop:
        print(f"interrupted: {stored_where(store)} (requests in flight recorded as interrupted)", file=sys.stderr)
        return EXIT_INTERRUPTED if isinstance(stop, KeyboardInterrupt) else EXIT_CRASHED
    except StoreError as error:
        if not store.written:
            print(f"specbench: --results {args.results}: {error}; nothing was stored there", file=sys.stderr)
            return EXIT_USAGE
        print(f"specbench: {error}; {stored_where(store)} up to this failure", file=sys.stderr)
        return EXIT_CRASHED
    except Exception as error:  # noqa: BLE001 - the message and the stored location are what the user needs
        print(f"specbench: {type(error).__name__}: {error}\n{stored_where(store)}", file=sys.stderr)
        return EXIT_NOT_READY if type(error).__name__ == "NotReadyError" else EXIT_CRASHED
    print(summary_table(result.cases, baseline=baseline))
    print(cost_table(result.records, settings, baseline, load.level, resamples=args.resamples))
    # issue 22: what was stored, and the failed requests per kind as run.json counts them.
    failed_kinds = error_kinds(result.records)
    listed = ", ".join(f"{kind} {n}" for kind, n in failed_kinds.items())
    failed = f" ({sum(failed_kinds.values())} failed: {listed}; docs/benchmark.md#error-kinds)" if failed_kinds else ""
    print(f"stored {len(result.records)} request records in {store.location}{failed}")
    code = 0
    dead = failed_services(result.records)
    if dead:
        first = {r.variant: r for r in reversed(result.records) if not r.ok}
        for name in dead:
            print(f"specbench: every request to {name} failed; first error: {first[name].error_code}: {first[name].error_msg[:200]}")
        code = EXIT_SERVICE_FAILED
    if args.no_publish:
        return code
    problem = aws_problem(args.region)
    if problem:
        print(f"specbench: not published: {problem}; the run is stored: specbench publish {store.location}", file=sys.stderr)
        return EXIT_CRASHED
    report = publish_run(store, args.namespace, args.region)
    print(describe_publish(report, store.location))
    return code or (0 if report.ok else EXIT_UNPUBLISHED)


def load_levels(load: LoadSpec, concurrencies: list[int], rates: list[float]) -> tuple[LoadSpec, ...]:
    """The run's load levels: empty for the single level of one --concurrency and no --request-rate
    (stored exactly as before), else every concurrency then every rate, each a copy of ``load``."""
    from dataclasses import replace

    if len(concurrencies) <= 1 and not rates:
        return ()
    return tuple(replace(load, concurrency=c) for c in concurrencies) + tuple(replace(load, request_rate=r) for r in rates)


def print_skipped(read: list, limit: int = 5) -> None:  # type: ignore[type-arg]
    """What the readers left out of ``read`` (RunFiles): the first ``limit`` parts by ``file:line``
    and reason, then the counts; to stderr, nothing when nothing was left out."""
    skipped = [(files.keys_prefix + str(s)) for files in read for s in files.skipped]
    for line in skipped[:limit]:
        print(f"specbench: skipped {line}", file=sys.stderr)
    if skipped:
        used, lines = sum(len(f.records) for f in read), sum(f.record_lines for f in read)
        print(
            f"specbench: {used} of {lines} stored records used; {len(skipped)} damaged or impossible parts left out"
            + (f" ({len(skipped) - limit} more not listed here)" if len(skipped) > limit else ""),
            file=sys.stderr,
        )


def stored_where(store) -> str:  # type: ignore[no-untyped-def]
    return f"what completed is stored in {store.location}" if store.written else f"nothing was stored in {store.location}"


def command_sweep_report(args: argparse.Namespace) -> int:
    import time

    from botocore.exceptions import BotoCoreError, ClientError

    try:
        from specbench.analysis.sweep import E2E, TPOT, analyze_sweep, configured_slo, points_from_run
        from specbench.outputs.sweep_next import stage_documents
        from specbench.outputs.sweep_report import load_sweep_points, write_report
    except ImportError:  # the Job's zip leaves the analysis out
        print("specbench: this build has no sweep-report command; run it from a checkout of the project", file=sys.stderr)
        return EXIT_USAGE
    from specbench.results.roles import describe_roles, parse_roles, run_roles
    from specbench.results.runfiles import load_run
    from specbench.results.store import open_store

    if args.role and not args.run:
        print("specbench: --role applies with --run only (a sweep point records its variant)", file=sys.stderr)
        return EXIT_USAGE
    try:
        if args.run:
            store = report_store(args.run, None, args.region)
            files = load_run(store)
            read = [files]
            print_skipped(read)
            given = parse_roles(args.role)
            points = points_from_run(files.run, files.records, files.acceptance, store.location, given)
            if points and "sweep" not in files.run:  # where each endpoint's role was read, k from /metrics included
                found = run_roles(files.run, files.acceptance, {r.variant for r in files.records}, given)
                print(f"--run {args.run}: {describe_roles(found)}", file=sys.stderr)
            where, name = store.location, store.run_id
            runs = [files.run]
        else:
            results, runs, read = open_store(args.results, args.region), [], []
            left_out: list[str] = []
            points, name = load_sweep_points(results, args.sweep_id, runs, read, left_out), args.sweep_id
            print_skipped(read)
            for line in left_out:  # specbench/sweep/checked.py check_grid: never silently used
                print(f"left out: {line}", file=sys.stderr)
            staged_docs = stage_documents(results, args.sweep_id)  # a staged sweep's steps (sweep next), else none
            where = f"{results.location.rstrip('/')}/sweeps/{args.sweep_id}/"
    except (OSError, ValueError, BotoCoreError, ClientError) as error:  # a bad location, unreadable or malformed files
        print(f"specbench: {error}", file=sys.stderr)
        return EXIT_USAGE
    if not points:
        what = "no usable sweep point (the damaged ones are listed above)" if any(f.skipped for f in read) else "no sweep point stored"
        print(f"specbench: {what} under {where} ({'--run' if args.run else '--results, --sweep-id'})", file=sys.stderr)
        return EXIT_USAGE
    from specbench.analysis import cost

    deployment = ((runs[0] if runs else {}).get("plan") or {}).get("deployment") or {}
    servers = args.servers_per_node or cost.recorded_servers_per_node(deployment)[0]
    if args.node_price_per_hour is None:
        price = cost.recorded_price(deployment)
    else:
        price = flag_price(args.node_price_per_hour, "sweep-report --node-price-per-hour", deployment)
    started = time.perf_counter()
    analysis = analyze_sweep(
        points,
        sweep_id=name,
        metric=TPOT if args.metric == "tpot" else E2E,
        slo=configured_slo(runs[0] if runs else {}, args.slo_ttft_ms, args.slo_tpot_ms),
        resamples=args.resamples,
        servers_per_node=servers,
        price=price,
    )
    out = Path(args.out or f"sweep-report-{name}")
    written = write_report(analysis, out, charts=not args.no_charts, staged=[] if args.run else staged_docs)
    print("\n".join(analysis.summary))
    print(f"price: {price.describe()}; {servers} servers per node")
    print(f"{len(points)} points analysed in {time.perf_counter() - started:.1f} s; report: {written['markdown']}")
    return put_sweep_dashboard(args.dashboard, written["dashboard"], args.region) if args.dashboard else 0


def put_sweep_dashboard(name: str, body_file: Path, region: str | None) -> int:
    """PutDashboard of the sweep's widgets, as a dashboard of its own: PutDashboard replaces a whole
    body, and the benchmark's dashboard is the aggregation Lambda's to rewrite."""
    from botocore.exceptions import BotoCoreError, ClientError

    from specbench.outputs.dashboard import problems

    body = read_json_file(str(body_file))
    found = problems(name, body)
    if found:
        print(f"specbench: --dashboard {name}: {'; '.join(found)}", file=sys.stderr)
        return EXIT_USAGE
    problem = aws_problem(region)
    if problem:
        print(f"specbench: dashboard not put: {problem}; the widgets are in {body_file}", file=sys.stderr)
        return EXIT_CRASHED
    import boto3

    try:
        boto3.client("cloudwatch", region_name=region).put_dashboard(DashboardName=name, DashboardBody=jsonfile_dumps(body))
    except (BotoCoreError, ClientError) as error:
        print(f"specbench: dashboard not put: {error}; the widgets are in {body_file}", file=sys.stderr)
        return EXIT_CRASHED
    print(f"dashboard {name}: {len(body['widgets'])} widgets")
    return 0


def command_import(args: argparse.Namespace) -> int:
    from specbench.results.importer import import_llmperf
    from specbench.results.store import RunStore, open_store

    store = RunStore(open_store(args.results, args.region), args.run_id)
    try:
        count = import_llmperf(Path(args.directory), store, variant=args.variant, test_case=args.test_case, prompt_class=args.prompt_class)
    except (ValueError, OSError) as error:
        print(f"specbench: {error}", file=sys.stderr)
        return EXIT_USAGE
    print(f"imported {count} requests of {args.variant} / {args.test_case} into {store.location}")
    print(f"publish with: specbench publish {store.location}")
    return 0


def command_publish(args: argparse.Namespace) -> int:
    from specbench.outputs.publish import describe_publish, has_unpublished, publish_run
    from specbench.results.store import RunStore, open_store

    location, _, run_id = args.run.rstrip("/").rpartition("/")
    if not run_id:
        print("specbench: publish expects a run location ending in its run id", file=sys.stderr)
        return EXIT_USAGE
    problem = name_problem(run_id)
    if problem:
        print(f"specbench: publish {echo(args.run)}: the run id {problem} (allowed: {allowed()})", file=sys.stderr)
        return EXIT_USAGE
    problem = aws_problem(args.region)  # before the store: an S3 location needs the same credentials
    if problem:
        print(f"specbench: not published: {problem}", file=sys.stderr)
        return EXIT_CRASHED
    store = RunStore(open_store(location or ".", args.region), run_id)
    if not store.keys("run.json"):
        print(f"specbench: no run at {store.location} (run.json missing)", file=sys.stderr)
        return EXIT_USAGE
    from specbench.results.runfiles import run_json_problem

    problem = run_json_problem(store)
    if problem:  # a damaged run.json: its records' service and settings are unknown, so nothing is sent
        print(f"specbench: not published: {store.location}/{problem}; nothing was sent", file=sys.stderr)
        return EXIT_USAGE
    # After a partial publish, send only what is missing: CloudWatch would count the rest twice.
    unpublished_only = not args.all and has_unpublished(store)
    if unpublished_only:
        print(f"publishing what an earlier attempt left in {store.location}/unpublished.json (--all to republish everything)")
    report = publish_run(store, args.namespace, args.region, unpublished_only=unpublished_only)
    print(describe_publish(report, store.location))
    return 0 if report.ok else EXIT_UNPUBLISHED


def report_store(run: str, results: str | None, region: str | None):  # type: ignore[no-untyped-def]
    """The RunStore of ``specbench report RUN``: RUN is a location ending in the run id (as for
    ``publish``), or a bare run id inside ``results``. Raises ValueError on a malformed location."""
    from specbench.results.store import RunStore, open_store

    text = run.rstrip("/")
    if not text:
        raise ValueError("report expects a run id or a run location")
    problem = name_problem(text.rpartition("/")[2])
    if problem:
        raise ValueError(f"report {echo(run)}: the run id {problem} (allowed: {allowed()})")
    if "/" not in text:
        return RunStore(open_store(results or "results", region), text)
    if results is not None:
        raise ValueError(f"{run!r} is a run location: --results applies only to a bare run id")
    if text.startswith("s3://") and "/" not in text[len("s3://") :]:
        raise ValueError(f"run location {run!r}: expected s3://BUCKET/PREFIX/RUN_ID")
    location, _, run_id = text.rpartition("/")
    return RunStore(open_store(location or "/", region), run_id)


def flag_price(value: float, flag: str, deployment: dict | None = None):  # type: ignore[no-untyped-def]
    """A --node-price-per-hour as the NodePrice of a report; exit 2 with one line (as argparse's own
    errors) when it is implausible for the run's instance type (its settings' cost.instance_type)."""
    from specbench.analysis.cost import NodePrice

    cost = (deployment or {}).get("cost") or {}
    instance = cost.get("instance_type") if isinstance(cost, dict) and isinstance(cost.get("instance_type"), str) else ""
    if problem := prices.price_problem(value, instance):
        print(f"specbench: {flag} {value:g}: {problem}; allowed: {prices.price_allowed(instance)}", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)
    return NodePrice(value if value > 0 else None, flag if value > 0 else f"no price ({flag} 0)")


def command_report(args: argparse.Namespace) -> int:
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        from specbench.analysis.aggregate import summarize_run
    except ImportError:  # the Job's zip leaves the results' modules out
        print("specbench: this build has no report command; run it from a checkout of the project", file=sys.stderr)
        return EXIT_USAGE
    from specbench.results.runfiles import load_run

    if not 0.0 < args.draft_cost_ratio < 1.0:
        print(f"specbench: --draft-cost-ratio must lie between 0 and 1 (exclusive), got {args.draft_cost_ratio}", file=sys.stderr)
        return EXIT_USAGE
    try:
        store = report_store(args.run, args.results, args.region)
        files = load_run(store)
    except (OSError, ValueError, BotoCoreError, ClientError) as error:  # a bad location, unreadable or malformed files
        print(f"specbench: {error}", file=sys.stderr)
        return EXIT_USAGE
    if not files.run and not files.records and not files.skipped:
        print(f"specbench: no run at {store.location} (neither run.json nor records/)", file=sys.stderr)
        return EXIT_USAGE
    print_skipped([files])
    services = {r.variant for r in files.records}
    if args.baseline and services and args.baseline not in services:
        print(f"specbench: --baseline {args.baseline}: no such service in this run ({', '.join(sorted(services))})", file=sys.stderr)
        return EXIT_USAGE
    try:
        summary = summarize_run(
            files.run,
            files.records,
            files.acceptance,
            baseline=args.baseline,
            draft_cost_ratio=args.draft_cost_ratio,
            resamples=args.resamples,
            price=None
            if args.node_price_per_hour is None
            else flag_price(args.node_price_per_hour, "report --node-price-per-hour", (files.run.get("plan") or {}).get("deployment")),
            servers_per_node=args.servers_per_node,
            data_quality=files.quality(),
        )
    except ValueError as error:  # an imported run names no baseline
        print(f"specbench: {error}: --baseline NAME", file=sys.stderr)
        return EXIT_USAGE
    out = Path(args.out or f"report-{store.run_id}")
    try:
        from specbench.outputs.report import write_report

        written = write_report(summary, out, charts=not args.no_charts)
    except ImportError as error:  # matplotlib (or a library it needs) is not installed
        print(f"specbench: the report needs matplotlib ({error}): pip install -r specbench/requirements-report.txt", file=sys.stderr)
        return EXIT_USAGE
    except OSError as error:  # an --out that cannot be written
        print(f"specbench: {error}", file=sys.stderr)
        return EXIT_USAGE
    print(f"report of run {summary.run_id or store.run_id} ({summary.completeness}) from {store.location}:")
    for name, path in written.items():
        print(f"  {name:<20} {path}")
    print(summary.verdict)
    # The price and servers per node the cost figures used, and where they came from (or why none).
    print(f"price: {summary.price.describe()}; {summary.servers_per_node} servers per node ({summary.servers_per_node_source or 'given'})")
    return 0


def command_plan(args: argparse.Namespace) -> int:
    """The sweep plan synth prints, from cdk.json's context and ``-c`` overrides."""
    config = checkout_config(args)
    if isinstance(config, int):
        return config
    from config.cost import node_price as configured_price
    from config.sweep import enabled, plan_text

    if not enabled(config):
        print("no sweep configured: set sweep.variants (e.g. -c sweep.variants=q17-k5:Qwen/Qwen3-1.7B:5)")
        return 0
    print(plan_text(config, configured_price(config)[0]))
    return 0


def command_sweep_control(args: argparse.Namespace) -> int:
    """``sweep control``: the in-cluster controller; its own function so the Job's zip holds it without config/."""
    from specbench.outputs.sweep_controller import control

    return control(args)


def command_sweep(args: argparse.Namespace) -> int:
    """``sweep next`` (one step of a staged sweep) and ``sweep stage-job`` (the next stage's Job)."""
    from specbench.outputs import sweep_next

    if args.sweep_command == "stage-job":
        import json

        from botocore.exceptions import BotoCoreError, ClientError

        def parsed(text: str, where: str) -> object:
            try:
                return json.loads(text)
            except json.JSONDecodeError as error:
                raise ValueError(f"{where}: not JSON ({error.msg} at line {error.lineno} column {error.colno})") from None
            except RecursionError:  # json nests one Python call per level
                raise ValueError(f"{where}: nested too deeply to be a Job or a stage document") from None

        try:
            try:
                text = _read_location(args.stage, args.region)
            except OSError as error:
                raise ValueError(f"--stage {args.stage}: cannot be read ({error.strerror or error})") from None
            doc = parsed(text, f"--stage {args.stage}")
            job = parsed(sys.stdin.read(), "stdin")
            print(jsonfile_dumps(sweep_next.stage_job(job, doc), indent=2))
        except (OSError, ValueError, BotoCoreError, ClientError) as error:
            print(f"specbench: sweep stage-job: {error}", file=sys.stderr)
            return EXIT_USAGE
        return 0
    config = checkout_config(args)
    if isinstance(config, int):
        return config
    from config.sweep_decision import decision_settings
    from specbench.outputs import sweep_controller as controller
    from specbench.outputs.sweep_report import load_sweep_folders
    from specbench.results.store import open_store

    if not config.sweep.variants:
        print("specbench: sweep next: no sweep configured (sweep.variants is empty)", file=sys.stderr)
        return EXIT_USAGE
    # The same Inputs the in-cluster controller reads from its settings.json (one source for both).
    inputs = controller.inputs_from_settings(decision_settings(config, args.node_price_per_hour))
    try:
        store = open_store(args.results, args.region)
        folders = load_sweep_folders(store, args.sweep_id)
        if not folders:
            where = f"{store.location.rstrip('/')}/sweeps/{args.sweep_id}/"
            raise sweep_next.NextError(f"no sweep point stored under {where} (--sweep-id {args.sweep_id})")
        _, doc, location = sweep_next.advance(store, folders, args.sweep_id, inputs, args.resamples)
    except (OSError, ValueError) as error:
        print(f"specbench: sweep next: {error}", file=sys.stderr)
        return EXIT_USAGE
    print(sweep_next.render(doc))
    print(f"stored: {location}")
    return 0


def _read_location(location: str, region: str | None) -> str:
    """A file's text from a path or an s3:// URL."""
    if location.startswith("s3://"):
        from specbench.results.store import open_store

        folder, _, name = location.rpartition("/")
        return open_store(folder + "/", region).read_text(name)
    return Path(location).read_text(encoding="utf-8")


def checkout_config(args: argparse.Namespace):  # type: ignore[no-untyped-def]
    """The configuration synth would build, from cdk.json's context and ``-c``; an exit code if none."""
    import os

    try:
        from config import ConfigError, load_config
    except ImportError:  # the Job's zip has no configuration
        print(f"specbench: {args.command} needs the project's config package; run it from a checkout of the project", file=sys.stderr)
        return EXIT_USAGE
    loaded = checkout_context(args)
    if loaded is None:
        return EXIT_USAGE
    try:
        return load_config(loaded[1], os.environ)
    except ConfigError as error:
        print(error, file=sys.stderr)
        return EXIT_USAGE


def command_predict(args: argparse.Namespace) -> int:
    """``predict``: the serving model on a deployment (a profile's, the calibration runs', else the
    configured one; ``-c`` fields override); ``--calibrate`` fits it first, each point on the deployment
    its run recorded. Every named source must exist; every parameter is said fitted or assumed."""
    from botocore.exceptions import BotoCoreError, ClientError

    from specbench.analysis import provenance
    from specbench.analysis import serving_model as sm
    from specbench.analysis.prediction import default_loads, predict_deployment
    from specbench.analysis.sweep import points_from_run
    from specbench.outputs import prediction as out
    from specbench.outputs.sweep_report import load_sweep_points
    from specbench.results.roles import describe_roles, parse_roles, run_roles
    from specbench.results.runfiles import load_run
    from specbench.results.store import open_store

    config = checkout_config(args)
    if isinstance(config, int):
        return config
    from config.cost import node_price as configured_price

    def run_points(run: str, flag: str):  # type: ignore[no-untyped-def]
        store = report_store(run, args.results, args.region)
        files = load_run(store)
        if not files.run and not files.records:  # a named source that is not there is an error, never a default
            raise ValueError(f"{flag} {run}: no run at {store.location} (neither run.json nor records/)")
        damaged = next((str(s) for s in files.skipped if str(s).startswith("run.json")), "")
        if damaged:  # what ran and what each endpoint serves are in run.json: never guessed without it
            raise ValueError(f"{flag} {run}: {damaged}")
        points = points_from_run(files.run, files.records, files.acceptance, store.location, given)
        if "sweep" in files.run:  # a sweep point records its variant
            return files.run, points, ""
        found = run_roles(files.run, files.acceptance, {r.variant for r in files.records}, given)
        return files.run, points, describe_roles(found)

    def measured_acceptance(points, flag: str, name: str) -> dict:  # type: ignore[no-untyped-def]
        found = out.acceptance_from_points(points)
        if not found:
            raise ValueError(
                f"{flag} {name}: no acceptance figure for any prompt class (no speculative point with /metrics figures or a "
                "stream that passes its self-check); pass --acceptance CLASS=A"
            )
        return found

    try:
        given = parse_roles(args.role)
        local = out.deployment_from_config(config)
        explicit = out.explicit_fields(args.context)
        profile, base, base_source, calibration = sm.writeup_profile(), None, "", provenance.writeup()
        if args.profile:
            profile, base, calibration = out.read_profile(args.profile, profile)
            base_source = f"the profile {args.profile}"
        workload = sm.Workload(args.prompt_tokens or config.benchmark.input_tokens, args.output_tokens or config.benchmark.output_tokens)
        fit, measured_run_points = None, []
        if args.calibrate:
            measured, notes = [], []
            for run in args.calibrate:
                if run == out.WRITEUP:
                    measured += sm.writeup_points()
                    continue
                recorded, points, described = run_points(run, "--calibrate")
                measured_run_points += points
                notes += [f"{run}: {described}"] if described else []
                measured += out.measured_points(points, out.run_deployment(recorded, run, local, notes), notes)
            free = tuple(name.strip() for name in args.fit.split(",") if name.strip()) or None
            fit = sm.fit_profile(measured, profile, free)
            calibration = provenance.from_points(f"fitted on --calibrate {' '.join(args.calibrate)}", fit.fitted, measured)
            base, base_source = out.calibrated_deployment(measured, local), "the calibration runs"
            print("\n".join([*notes, *out.render_fit(fit, measured, calibration)]))
            out.save_profile(Path(args.save_profile), fit, base, calibration)
            print(f"profile saved: {args.save_profile} (use it with predict --profile, emulate --profile)\n")
            profile = fit.profile
        deployment, sources = out.choose_deployment(local, explicit, base, base_source)
        loads = args.loads or default_loads(deployment.max_num_seqs)
        acceptance = out.acceptance_table(out.parse_acceptance(args.acceptance), "assumed")
        if args.from_run:
            recorded, points, described = run_points(args.from_run, "--from-run")
            if described:  # where each endpoint's role was read (roles.describe_roles)
                print(f"--from-run {args.from_run}: {described}", file=sys.stderr)
            notes: list[str] = []
            print(
                "\n".join(
                    out.from_run_carry_over(
                        out.run_deployment(recorded, f"--from-run {args.from_run}", deployment, notes), deployment, args.from_run
                    )
                )
            )
            acceptance.update(out.acceptance_table(measured_acceptance(points, "--from-run", args.from_run), f"run {args.from_run}"))
        if args.from_sweep is not None:  # given, even empty: an empty id is refused, not ignored
            results = open_store(args.results or "results", args.region)
            if not args.from_sweep.strip():
                raise ValueError("--from-sweep: empty (give a sweep id: a DNS label, as sweep-report --sweep-id)")
            left_out: list[str] = []
            try:
                swept = load_sweep_points(results, args.from_sweep, left_out=left_out)
            except ValueError as error:  # the id is checked as --sweep-id: name the flag given here
                raise ValueError(str(error).replace("--sweep-id", "--from-sweep")) from None
            for line in left_out:  # specbench/sweep/checked.py check_grid: never silently used
                print(f"left out: {line}", file=sys.stderr)
            if not swept:
                where = f"{results.location.rstrip('/')}/sweeps/{args.from_sweep}/"
                raise ValueError(f"--from-sweep {args.from_sweep}: no sweep point stored under {where}")
            table = measured_acceptance(swept, "--from-sweep", args.from_sweep)
            acceptance.update(out.acceptance_table(table, f"sweep {args.from_sweep}"))
        if not acceptance and measured_run_points:
            acceptance = out.acceptance_table(out.acceptance_from_points(measured_run_points), "the calibration runs")
        if not acceptance:
            acceptance = out.acceptance_table(out.ASSUMED_ACCEPTANCE, "assumed (default; set --acceptance CLASS=A)")
        price = configured_price(config)[0] if args.node_price_per_hour is None else (args.node_price_per_hour or None)
        report = predict_deployment(deployment, profile, acceptance, loads, workload, price, args.k_max, calibration, sources)
    except (OSError, ValueError, BotoCoreError, ClientError) as error:
        print(f"specbench: {error}", file=sys.stderr)
        return EXIT_USAGE
    print("\n".join(out.render(report)))
    if args.json:
        try:
            Path(args.json).write_text(jsonfile_dumps(out.json_document(report, fit), indent=2) + "\n", encoding="utf-8")
        except OSError as error:  # a folder, a missing parent, no permission
            print(f"specbench: --json {args.json}: cannot write ({error.strerror or error})", file=sys.stderr)
            return EXIT_USAGE
        print(f"written: {args.json}")
    return 0


def checkout_context(args: argparse.Namespace) -> tuple[dict, dict] | None:
    """cdk.json (``--cdk-json``, default the checkout's) and its context with the ``-c`` overrides
    applied, as the CDK CLI merges them; None after printing what is wrong."""
    path = Path(args.cdk_json) if args.cdk_json else Path(__file__).resolve().parents[1] / "cdk.json"
    try:
        cdk_json = read_json_file(str(path))
    except JsonFileError as error:
        print(f"specbench: --cdk-json {path}: {error}", file=sys.stderr)
        return None
    context = cdk_json.get("context", {}) if isinstance(cdk_json, dict) else None
    if not isinstance(context, dict):
        what = f"its context is {type(context).__name__}" if isinstance(cdk_json, dict) else f"it holds {type(cdk_json).__name__}"
        print(f'specbench: --cdk-json {path}: expected a JSON object with a "context" object (as cdk.json), but {what}', file=sys.stderr)
        return None
    context = dict(context)
    for item in args.context:
        key, sep, value = item.partition("=")
        if not sep:
            print(f"specbench: -c {item!r}: expected KEY=VALUE", file=sys.stderr)
            return None
        context[key] = value
    return cdk_json, context


def command_preflight(args: argparse.Namespace) -> int:
    """The account read for what the deploy needs (specbench/preflight/); exit 0, 1 or 3."""
    import os
    from datetime import datetime, timezone

    try:
        from config import ConfigError, load_config, serving_stacks
        from config.sweep import enabled, sweep_plan
    except ImportError:  # the Job's zip has no configuration
        print("specbench: preflight needs the project's config package; run it from a checkout of the project", file=sys.stderr)
        return EXIT_USAGE
    import boto3
    from botocore.exceptions import BotoCoreError, ClientError

    from specbench.preflight import account, checks, commands, target

    loaded = checkout_context(args)
    if loaded is None:
        return EXIT_USAGE
    cdk_json, context = loaded
    try:
        session = boto3.Session()
    except BotoCoreError as error:  # ProfileNotFound: AWS_PROFILE names no profile of the config file
        code, message = account.describe(error)
        fix = checks.identity_fix(code, "", {})
        print(f"specbench preflight: cannot make an AWS session: {code}: {message} | fix: {fix}", file=sys.stderr)
        return checks.EXIT_FAILED
    # As `cdk deploy`: env.region, else the CLI's region (CDK_DEFAULT_REGION, us-east-1 when none is configured).
    # The CDK CLI reads AWS_REGION, then AWS_DEFAULT_REGION and the profile (botocore's region_name).
    cli_region = os.environ.get("AWS_REGION", "").strip() or session.region_name or ""
    region = str(context.get("env.region", "") or "").strip() or cli_region or "us-east-1"
    # Bad settings are a usage error whatever the credentials: checked before any call to AWS. No
    # rule reads the account but for its form (config/validate.py), so the offline default stands
    # in until STS names the caller's.
    try:
        load_config(context, {k: v for k, v in os.environ.items() if k != "CDK_DEFAULT_ACCOUNT"} | {"CDK_DEFAULT_REGION": region})
    except ConfigError as error:
        print(error, file=sys.stderr)
        return EXIT_USAGE
    deadline = account.Deadline(args.time_limit)
    try:
        identity = account.caller_identity(session, region, deadline)
    except (ClientError, *account.OTHER_ERRORS) as error:
        code, message = account.describe(error)
        fix = commands.rerun(checks.identity_fix(code, region, account.profiles(session), os.environ.get("AWS_PROFILE", "")), args.context)
        advice = checks.identity_advice(code)
        print(
            f"specbench preflight: cannot read the caller's identity (sts:GetCallerIdentity in {region}): {code}: {message}"
            + (f"; {advice}" if advice else "")
            + f" | fix: {fix}",
            file=sys.stderr,
        )
        return checks.EXIT_FAILED
    caller = str(identity["Account"])
    # The CDK CLI sets both when credentials resolve; the configuration derives the deploy's from them.
    environ = dict(os.environ, CDK_DEFAULT_ACCOUNT=caller, CDK_DEFAULT_REGION=region)
    try:
        config = load_config(context, environ)
    except ConfigError as error:
        print(error, file=sys.stderr)
        return EXIT_USAGE
    sweep_hours = sweep_plan(config).wall_hours if enabled(config) else None
    baseline = serving_stacks.STACKS.get(config.serving.baseline_stack)
    cdk_out = Path(args.cdk_out) if args.cdk_out else Path(__file__).resolve().parents[1] / "cdk.out"
    plan = target.build_target(
        config,
        context,
        manifest=target.read_manifest(cdk_out),
        toolkit_stack=args.toolkit_stack_name or str(cdk_json.get("toolkitStackName", "") or ""),
        baseline_image=baseline.image if baseline else "",
        sweep_wall_hours=sweep_hours,
        run_hours=args.run_hours,
    )
    now = datetime.now(timezone.utc)
    results = account.run_checks(plan, session, caller_account=caller, cli_region=cli_region, now=now, deadline=deadline)
    bound = f"its AWS calls bounded to {args.time_limit:g} s in all (--time-limit)"
    print(f"preflight of account {caller} ({identity.get('Arn', '')}), region {plan.region}, {bound}:")
    for check in results:
        print(check.line(args.context))
    counts = {status: sum(c.status == status for c in results) for status in (checks.PASSED, checks.WARNING, checks.FAILED)}
    ran_out = f"; the {args.time_limit:g} s bound ran out while {deadline.ran_out_at} waited" if deadline.ran_out_at else ""
    print(
        f"{len(results)} checks: {counts[checks.PASSED]} passed, {counts[checks.WARNING]} warnings, {counts[checks.FAILED]} failed{ran_out}"
    )
    return checks.exit_code(results)


def run_coroutine(coroutine):  # type: ignore[no-untyped-def]
    """asyncio.run, on uvloop where it is installed (specbench/requirements.txt; not on Windows).

    The client stamps every streamed chunk on the event loop, so the loop's own cost per network
    read is timing error under load: uvloop (libuv) cuts it (scripts/bench_chunk_lag.py, README).
    ``uvloop.run`` is asyncio.run with uvloop's loop (MagicStack/uvloop uvloop/__init__.py, 0.18+);
    signal handlers and threads (asyncio.to_thread) work as on asyncio's loop."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coroutine)
    return uvloop.run(coroutine)


def run_until_signal(coroutine):  # type: ignore[no-untyped-def]
    """Run a coroutine; SIGTERM (the Job's deadline, kubectl delete) cancels it so its cleanup runs."""

    async def guarded():  # type: ignore[no-untyped-def]
        task = asyncio.ensure_future(coroutine)
        loop = asyncio.get_running_loop()
        try:
            loop.add_signal_handler(signal.SIGTERM, task.cancel)
        except (NotImplementedError, RuntimeError):  # not the main thread, or no signals here
            pass
        return await task

    return run_coroutine(guarded())
