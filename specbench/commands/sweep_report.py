"""``specbench sweep-report``: a sweep's (or a multi-level run's) recommendation table, curves and
load figures, and optionally its own CloudWatch dashboard (a laptop's: not in the pods' zip)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from specbench.commands import EXIT_CRASHED, EXIT_USAGE
from specbench.commands.common import PRICE_HELP, aws_problem, flag_price, node_price, print_skipped, report_store, servers_count
from specbench.flags import positive_float, positive_int, safe_name
from specbench.jsonfile import dumps as jsonfile_dumps
from specbench.jsonfile import read_json_file


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``sweep-report``'s parser and its handler (cli.py lists it in COMMANDS)."""
    sweep = subparsers.add_parser("sweep-report", help="a sweep's recommendation table, curves and load figures (Markdown, PNG, JSON)")
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
    sweep.set_defaults(handler=command_sweep_report)


def command_sweep_report(args: argparse.Namespace) -> int:
    import time

    from botocore.exceptions import BotoCoreError, ClientError

    from specbench.analysis.sweep import E2E, TPOT, analyze_sweep, configured_slo, points_from_run, recorded_mix
    from specbench.outputs.sweep_next import stage_documents
    from specbench.outputs.sweep_report import load_sweep_points, write_report
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
    try:  # the traffic mix and each TP variant's servers per node, as the points' settings recorded them
        mix = recorded_mix(runs[0] if runs else {}, points)
    except ValueError as error:
        print(f"specbench: {error}", file=sys.stderr)
        return EXIT_USAGE
    started = time.perf_counter()
    analysis = analyze_sweep(
        points,
        sweep_id=name,
        metric=TPOT if args.metric == "tpot" else E2E,
        slo=configured_slo(runs[0] if runs else {}, args.slo_ttft_ms, args.slo_tpot_ms),
        resamples=args.resamples,
        servers_per_node=servers,
        price=price,
        weights=mix.weights,
        servers_by_tp=mix.servers_by_tp,
        reference_tp=mix.reference_tp,
    )
    out = Path(args.out or f"sweep-report-{name}")
    written = write_report(analysis, out, charts=not args.no_charts, staged=[] if args.run else staged_docs)
    print("\n".join(analysis.summary))
    print("\n".join(f"cheapest within the SLOs {ranking.text}" for ranking in analysis.mix))
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
