"""``specbench report RUN``: a stored run's report, HTML and Markdown with PNG charts (a laptop's:
not in the pods' zip, so its matplotlib charts never reach them)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from specbench.commands import EXIT_USAGE
from specbench.commands.common import PRICE_HELP, flag_price, node_price, print_skipped, report_store, servers_count
from specbench.flags import ascii_float, positive_int


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``report``'s parser and its handler (cli.py lists it in COMMANDS)."""
    report = subparsers.add_parser("report", help="write a stored run's report: HTML and Markdown with PNG charts")
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
    report.set_defaults(handler=command_report)


def command_report(args: argparse.Namespace) -> int:
    from botocore.exceptions import BotoCoreError, ClientError

    from specbench.analysis.aggregate import summarize_run
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
