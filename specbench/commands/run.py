"""``specbench run``: wait for the endpoints, drive the suite, store every result, publish.

The pods run it (charts/benchmark.py, specbench/sweep/point_runner.py): in the pods' zip.
Exit codes: specbench/cli.py's docstring.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from urllib.parse import urlsplit

from specbench.commands import EXIT_CRASHED, EXIT_INTERRUPTED, EXIT_NOT_READY, EXIT_SERVICE_FAILED, EXIT_UNPUBLISHED, EXIT_USAGE
from specbench.commands.common import PRICE_HELP, aws_problem, node_price, run_coroutine, with_price
from specbench.flags import ascii_int, non_negative_int, positive_float, positive_int, safe_name, seconds, temperature
from specbench.jsonfile import JsonFileError, read_json_file
from specbench.load import APIS, ENGINES
from specbench.load.types import Endpoint, LoadSpec
from specbench.names import allowed, echo, name_problem
from specbench.prompts.datasets import DatasetError, open_cache
from specbench.prompts.suite import Suite, load_suite
from specbench.results.store import StoreError
from specbench.sweep.points import parse_sweep_point

DEFAULT_ENDPOINTS = ("qwen-vllm=http://qwen-vllm:8000", "qwen-sd-vllm=http://qwen-sd-vllm:8000")


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


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``run``'s parser and its handler (cli.py lists it in COMMANDS)."""
    run = subparsers.add_parser("run", help="drive a suite at the endpoints, store every result, publish to CloudWatch")
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
    run.set_defaults(handler=command_run)


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


def failed_services(records: list) -> list[str]:
    """Services every one of whose requests failed (a wrong URL, a server that is not vLLM, ...)."""
    by_service: dict[str, bool] = {}
    for record in records:
        by_service[record.variant] = by_service.get(record.variant, False) or record.ok
    return sorted(name for name, any_ok in by_service.items() if not any_ok)


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
    from specbench.outputs.readiness import ReadinessPublisher
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
    # The readiness wait's service states go to CloudWatch as it goes (the dashboard's deployment row,
    # specbench/outputs/readiness.py); not when the run is not published or has no AWS region.
    readiness = None if args.no_publish or aws_problem(args.region) else ReadinessPublisher.for_region(args.namespace, args.region)
    runner = Runner(plan, make_engine(args.engine), store, progress=not args.no_progress, readiness=readiness)
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


def stored_where(store) -> str:  # type: ignore[no-untyped-def]
    return f"what completed is stored in {store.location}" if store.written else f"nothing was stored in {store.location}"


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
