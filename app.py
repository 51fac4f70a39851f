#!/usr/bin/env python3
"""CDK entry point. ``npx cdk synth`` and ``python app.py`` produce the same templates.

The CDK CLI passes cdk.json's context (and ``-c key=value``) in; run directly, this file reads
cdk.json itself. A bad setting stops synth with one line per problem and no traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from aws_cdk import App

from config import ConfigError, load_config
from config.cost import node_price
from config.sweep import SWEEP_START, plan_text
from config.sweep import enabled as sweep_enabled
from config.validate import config_warnings
from stacks import build_app

ROOT = Path(__file__).resolve().parent


def direct_run_context() -> dict:
    """cdk.json's context, for runs without the CLI (the CLI hands it over in CDK_CONTEXT_JSON)."""
    settings = json.loads((ROOT / "cdk.json").read_text())
    context = dict(settings["context"])
    # What the CLI adds by default, so both ways of synthesizing produce identical templates.
    context.setdefault("aws:cdk:enable-path-metadata", True)  # also lets cfn-lint recognise CDK templates
    context.setdefault("aws:cdk:enable-asset-metadata", True)
    context.setdefault("aws:cdk:version-reporting", settings.get("versionReporting", True))
    return context


def main(argv: list[str]) -> int:
    under_cli = "CDK_CONTEXT_JSON" in os.environ or "CDK_OUTDIR" in os.environ
    if under_cli:
        app = App()
    else:
        parser = argparse.ArgumentParser(description="Synthesize without the CDK CLI (same templates as `cdk synth`).")
        parser.add_argument("--outdir", default=str(ROOT / "cdk.out"), help="cloud assembly directory (default: cdk.out)")
        parser.add_argument("-c", "--context", action="append", default=[], metavar="KEY=VALUE", help="override a setting, as with cdk -c")
        args = parser.parse_args(argv)
        context = direct_run_context()
        for item in args.context:
            key, sep, value = item.partition("=")
            if not sep:
                parser.error(f"-c {item!r}: expected KEY=VALUE")
            context[key] = value
        app = App(context=context, outdir=args.outdir)
    try:
        config = load_config(app.node.get_all_context(), os.environ)
    except ConfigError as err:
        print(err, file=sys.stderr)
        return 2
    for line in config_warnings(config):
        print(f"config warning: {line}", file=sys.stderr)
    if sweep_enabled(config):
        print(f"{plan_text(config, node_price(config)[0])}\n{SWEEP_START}", file=sys.stderr)
    build_app(app, config)
    try:
        app.synth()
    except RuntimeError as err:  # jsii surfaces synth-time validation failures this way
        if "ValidationFailed" not in str(err):
            raise
        print(f"synth failed validation (cdk-nag / CloudFormation): see {app.outdir}/validation-report.json", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
