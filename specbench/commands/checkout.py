"""The configuration synth would build, read from a checkout: cdk.json's context with ``-c``
overrides (plan, predict, preflight, sweep next). Not in the pods' zip: it imports config/."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from specbench.commands import EXIT_USAGE
from specbench.jsonfile import JsonFileError, read_json_file

# The checkout's root: specbench/commands/checkout.py -> specbench/commands -> specbench -> the root.
ROOT = Path(__file__).resolve().parents[2]


def checkout_context(args: argparse.Namespace) -> tuple[dict, dict] | None:
    """cdk.json (``--cdk-json``, default the checkout's) and its context with the ``-c`` overrides
    applied, as the CDK CLI merges them; None after printing what is wrong."""
    path = Path(args.cdk_json) if args.cdk_json else ROOT / "cdk.json"
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
