"""``specbench preflight``: the account read (read-only) for what the deploy needs, one line per
check (from a checkout: it reads config/). Exit codes: specbench/cli.py's docstring."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from specbench.commands import EXIT_USAGE
from specbench.commands.checkout import ROOT, checkout_context
from specbench.commands.common import add_checkout_arguments
from specbench.flags import positive_float


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``preflight``'s parser and its handler (cli.py lists it in COMMANDS)."""
    preflight = subparsers.add_parser(
        "preflight", help="read the account (read-only) for what the deploy needs: one line per check (from a checkout)"
    )
    add_checkout_arguments(preflight)
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
    preflight.set_defaults(handler=command_preflight)


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
    cdk_out = Path(args.cdk_out) if args.cdk_out else ROOT / "cdk.out"
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
