"""``specbench import-llmperf DIR``: one llmperf results directory into a stored run (a laptop's:
no pod runs it, so it is not in the pods' zip)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from specbench.commands import EXIT_USAGE
from specbench.flags import safe_name


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``import-llmperf``'s parser and its handler (cli.py lists it in COMMANDS)."""
    imported = subparsers.add_parser("import-llmperf", help="bring one llmperf results directory into a stored run")
    imported.add_argument("directory", help="llmperf's --results-dir of one service and test case")
    imported.add_argument("--variant", type=safe_name, required=True, help="the service it measured, e.g. qwen-sd-vllm")
    imported.add_argument("--test-case", type=safe_name, required=True)
    imported.add_argument("--prompt-class", default=None, help="structured or open-ended (default: the reference suite's)")
    imported.add_argument("--results", default="results", help="directory, or s3://BUCKET/PREFIX/")
    imported.add_argument(
        "--run-id", type=safe_name, required=True, help="the run to add to (created if new); import each service into the same one"
    )
    imported.add_argument("--region", default=None)
    imported.set_defaults(handler=command_import)


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
