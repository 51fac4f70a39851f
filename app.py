#!/usr/bin/env python3
"""CDK entry point. ``npx cdk synth`` and ``python app.py`` produce the same templates.

The CDK CLI passes cdk.json's context (and ``-c key=value``) in; run directly, this file reads
cdk.json itself. A bad setting stops synth with one line per problem and no traceback, and
before aws_cdk is imported: starting the jsii runtime takes over a second, checking the settings
milliseconds.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from config import ConfigError, load_config
from config.cost import node_price
from config.sweep import enabled as sweep_enabled
from config.sweep import plan_text, start_text
from config.validate import config_warnings

ROOT = Path(__file__).resolve().parent
# What App() reads besides its `context` argument (aws-cdk-lib 2.275 core/lib/app.js, App.loadContext:
# the defaults, then JSON.parse(process.env.CDK_CONTEXT_JSON), then the JSON file named by
# process.env.CONTEXT_OVERFLOW_LOCATION_ENV, each overriding the one before; cx-api names the variables).
CONTEXT_ENV = "CDK_CONTEXT_JSON"
CONTEXT_OVERFLOW_LOCATION_ENV = "CONTEXT_OVERFLOW_LOCATION_ENV"


def __getattr__(name: str) -> object:
    """``App`` and ``build_app`` import aws_cdk only when first used (PEP 562), so that a bad
    setting is reported without starting jsii; tests may still replace them on the module."""
    if name == "App":
        from aws_cdk import App

        return App
    if name == "build_app":
        from stacks import build_app

        return build_app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _lazy(name: str) -> Any:
    """``name`` as a test has set it on this module, else imported now (see __getattr__). Read from
    this module's own namespace, not ``sys.modules[__name__]``: run as a script under another
    runner (``python -m cProfile app.py``, runpy), ``__main__`` there is the runner's module."""
    return globals()[name] if name in globals() else __getattr__(name)


def direct_run_context() -> dict:
    """cdk.json's context, for runs without the CLI (the CLI hands it over in CDK_CONTEXT_JSON)."""
    settings = json.loads((ROOT / "cdk.json").read_text())
    context = dict(settings["context"])
    # What the CLI adds by default, so both ways of synthesizing produce identical templates.
    context.setdefault("aws:cdk:enable-path-metadata", True)  # also lets cfn-lint recognise CDK templates
    context.setdefault("aws:cdk:enable-asset-metadata", True)
    context.setdefault("aws:cdk:version-reporting", settings.get("versionReporting", True))
    return context


def app_context(defaults: dict, environ: Mapping[str, str]) -> dict:
    """The context ``App(context=defaults)`` will hold, read the way aws-cdk-lib reads it (see
    CONTEXT_ENV above), so that the settings can be checked before aws_cdk is imported."""
    context = dict(defaults)
    if environ.get(CONTEXT_ENV):
        context.update(json.loads(environ[CONTEXT_ENV]))
    if environ.get(CONTEXT_OVERFLOW_LOCATION_ENV):
        context.update(json.loads(Path(environ[CONTEXT_OVERFLOW_LOCATION_ENV]).read_text()))
    return context


def main(argv: list[str]) -> int:
    under_cli = "CDK_CONTEXT_JSON" in os.environ or "CDK_OUTDIR" in os.environ
    context: dict = {}
    if not under_cli:
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
    try:
        config = load_config(app_context(context, os.environ), os.environ)
    except ConfigError as err:
        print(err, file=sys.stderr)
        return 2
    for line in config_warnings(config):
        print(f"config warning: {line}", file=sys.stderr)
    if sweep_enabled(config):
        print(f"{plan_text(config, node_price(config)[0])}\n{start_text(config)}", file=sys.stderr)
    app_class = _lazy("App")
    app = app_class() if under_cli else app_class(context=context, outdir=args.outdir)
    _lazy("build_app")(app, config)
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
