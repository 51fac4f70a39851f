"""``specbench publish RUN``: publish (again) a stored run's metrics to CloudWatch (in the pods' zip)."""

from __future__ import annotations

import argparse
import sys

from specbench.commands import EXIT_CRASHED, EXIT_UNPUBLISHED, EXIT_USAGE
from specbench.commands.common import aws_problem
from specbench.names import allowed, echo, name_problem


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``publish``'s parser and its handler (cli.py lists it in COMMANDS)."""
    publish = subparsers.add_parser("publish", help="publish (again) a stored run's metrics to CloudWatch")
    publish.add_argument("run", help="the run's location: a directory or s3://BUCKET/PREFIX/RUN_ID")
    publish.add_argument("--namespace", default="Qwen/LLMPerf")
    publish.add_argument("--region", default=None)
    publish.add_argument("--all", action="store_true", help="republish every value, even after a partly successful publish")
    publish.set_defaults(handler=command_publish)


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
