"""``specbench suite``: validate a suite file and print its test cases (``--fetch``: draw its
dataset prompts too)."""

from __future__ import annotations

import argparse

from specbench.prompts.datasets import open_cache
from specbench.prompts.suite import load_suite


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``suite``'s parser and its handler (cli.py lists it in COMMANDS)."""
    suite = subparsers.add_parser("suite", help="validate a suite file and print its test cases")
    suite.add_argument("--suite", default="")
    suite.add_argument("--fetch", action="store_true", help="also fetch, check and sample its dataset sources")
    suite.add_argument("--dataset-cache", default="")
    suite.set_defaults(handler=command_suite)


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
