"""``specbench predict``: the serving model's TPOT, E2E, tokens/s per node, speedup and cost per
prompt class and load; ``--calibrate`` fits it to stored runs first (from a checkout: it reads config/)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from specbench.commands import EXIT_USAGE
from specbench.commands.checkout import checkout_config
from specbench.commands.common import PRICE_HELP, add_checkout_arguments, node_price, report_store
from specbench.flags import load_list, positive_int
from specbench.jsonfile import dumps as jsonfile_dumps


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``predict``'s parser and its handler (cli.py lists it in COMMANDS)."""
    predict = subparsers.add_parser(
        "predict", help="the serving model's TPOT, E2E, tokens/s per node, speedup and cost per class and load (from a checkout)"
    )
    add_checkout_arguments(predict)
    predict.add_argument("--acceptance", action="append", default=[], metavar="CLASS=A", help="assume per-token acceptance A for a class")
    predict.add_argument("--from-run", default="", metavar="RUN", help="acceptance per class from a stored run")
    predict.add_argument("--from-sweep", default=None, metavar="SWEEP_ID", help="acceptance per class from a stored sweep (in --results)")
    predict.add_argument("--results", default=None, help="directory or s3://BUCKET/PREFIX/ of stored runs (default: results)")
    predict.add_argument("--region", default=None)
    predict.add_argument(
        "--loads", type=load_list, default=None, help="clients in flight, comma-separated (default: 1, 2, 4 ... 2 x max_num_seqs)"
    )
    predict.add_argument(
        "--profile", default="", metavar="FILE", help="the free parameters (a --calibrate output; default: the write-up's)"
    )
    predict.add_argument(
        "--node-price-per-hour", type=node_price, default=None, help=PRICE_HELP.replace("the run's settings recorded", "the setting")
    )
    predict.add_argument("--prompt-tokens", type=positive_int, default=None, help="default: benchmark.input_tokens")
    predict.add_argument("--output-tokens", type=positive_int, default=None, help="default: benchmark.output_tokens")
    predict.add_argument("--k-max", type=positive_int, default=15, help="the largest k the best-k search tries")
    predict.add_argument("--json", default="", metavar="PATH", help="also write the prediction as JSON")
    predict.add_argument(
        "--calibrate",
        nargs="+",
        default=[],
        metavar="RUN",
        help="fit the free parameters to these stored runs ('writeup': the write-up's figures)",
    )
    predict.add_argument("--fit", default="", help="the parameters to fit, comma-separated (default: those the points identify)")
    predict.add_argument("--save-profile", default="serving-profile.json", metavar="PATH", help="where --calibrate writes the profile")
    predict.add_argument(
        "--role",
        action="append",
        default=[],
        metavar="NAME=ROLE",
        help="what an endpoint of a --calibrate or --from-run run served, where the run did not record it "
        "(NAME=baseline or NAME=METHOD:MODEL:K)",
    )
    from specbench.commands import rank

    rank.add_arguments(predict)  # --rank and its flags (commands/rank.py)
    predict.set_defaults(handler=command_predict)


def command_predict(args: argparse.Namespace) -> int:
    """``predict``: the serving model on a deployment (a profile's, the calibration runs', else the
    configured one; ``-c`` fields override); ``--calibrate`` fits it first, each point on the deployment
    its run recorded. Every named source must exist; every parameter is said fitted or assumed."""
    from botocore.exceptions import BotoCoreError, ClientError

    from specbench.analysis import provenance
    from specbench.analysis import serving_model as sm
    from specbench.analysis.prediction import default_loads, predict_deployment
    from specbench.analysis.sweep import points_from_run
    from specbench.outputs import prediction as out
    from specbench.outputs.sweep_report import load_sweep_points
    from specbench.results.roles import describe_roles, parse_roles, run_roles
    from specbench.results.runfiles import load_run
    from specbench.results.store import open_store

    config = checkout_config(args)
    if isinstance(config, int):
        return config
    from config.cost import node_price as configured_price

    def run_points(run: str, flag: str):  # type: ignore[no-untyped-def]
        store = report_store(run, args.results, args.region)
        files = load_run(store)
        if not files.run and not files.records:  # a named source that is not there is an error, never a default
            raise ValueError(f"{flag} {run}: no run at {store.location} (neither run.json nor records/)")
        damaged = next((str(s) for s in files.skipped if str(s).startswith("run.json")), "")
        if damaged:  # what ran and what each endpoint serves are in run.json: never guessed without it
            raise ValueError(f"{flag} {run}: {damaged}")
        points = points_from_run(files.run, files.records, files.acceptance, store.location, given)
        if "sweep" in files.run:  # a sweep point records its variant
            return files.run, points, ""
        found = run_roles(files.run, files.acceptance, {r.variant for r in files.records}, given)
        return files.run, points, describe_roles(found)

    def measured_acceptance(points, flag: str, name: str) -> dict:  # type: ignore[no-untyped-def]
        found = out.acceptance_from_points(points)
        if not found:
            raise ValueError(
                f"{flag} {name}: no acceptance figure for any prompt class (no speculative point with /metrics figures or a "
                "stream that passes its self-check); pass --acceptance CLASS=A"
            )
        return found

    from specbench.commands.rank import misplaced

    if misplaced(args):
        print(f"specbench: --{misplaced(args).replace('_', '-')} needs --rank", file=sys.stderr)
        return EXIT_USAGE
    try:
        given = parse_roles(args.role)
        local = out.deployment_from_config(config)
        explicit = out.explicit_fields(args.context)
        profile, base, base_source, calibration = sm.writeup_profile(), None, "", provenance.writeup()
        if args.profile:
            profile, base, calibration = out.read_profile(args.profile, profile)
            base_source = f"the profile {args.profile}"
        workload = sm.Workload(args.prompt_tokens or config.benchmark.input_tokens, args.output_tokens or config.benchmark.output_tokens)
        fit, measured_run_points = None, []
        if args.calibrate:
            measured, notes = [], []
            for run in args.calibrate:
                if run == out.WRITEUP:
                    measured += sm.writeup_points()
                    continue
                recorded, points, described = run_points(run, "--calibrate")
                measured_run_points += points
                notes += [f"{run}: {described}"] if described else []
                measured += out.measured_points(points, out.run_deployment(recorded, run, local, notes), notes)
            free = tuple(name.strip() for name in args.fit.split(",") if name.strip()) or None
            fit = sm.fit_profile(measured, profile, free)
            calibration = provenance.from_points(f"fitted on --calibrate {' '.join(args.calibrate)}", fit.fitted, measured)
            base, base_source = out.calibrated_deployment(measured, local), "the calibration runs"
            print("\n".join([*notes, *out.render_fit(fit, measured, calibration)]))
            out.save_profile(Path(args.save_profile), fit, base, calibration)
            print(f"profile saved: {args.save_profile} (use it with predict --profile, emulate --profile)\n")
            profile = fit.profile
        deployment, sources = out.choose_deployment(local, explicit, base, base_source)
        loads = args.loads or default_loads(deployment.max_num_seqs)
        acceptance = out.acceptance_table(out.parse_acceptance(args.acceptance), "assumed")
        if args.from_run:
            recorded, points, described = run_points(args.from_run, "--from-run")
            if described:  # where each endpoint's role was read (roles.describe_roles)
                print(f"--from-run {args.from_run}: {described}", file=sys.stderr)
            notes: list[str] = []
            print(
                "\n".join(
                    out.from_run_carry_over(
                        out.run_deployment(recorded, f"--from-run {args.from_run}", deployment, notes), deployment, args.from_run
                    )
                )
            )
            acceptance.update(out.acceptance_table(measured_acceptance(points, "--from-run", args.from_run), f"run {args.from_run}"))
        if args.from_sweep is not None:  # given, even empty: an empty id is refused, not ignored
            results = open_store(args.results or "results", args.region)
            if not args.from_sweep.strip():
                raise ValueError("--from-sweep: empty (give a sweep id: a DNS label, as sweep-report --sweep-id)")
            left_out: list[str] = []
            try:
                swept = load_sweep_points(results, args.from_sweep, left_out=left_out)
            except ValueError as error:  # the id is checked as --sweep-id: name the flag given here
                raise ValueError(str(error).replace("--sweep-id", "--from-sweep")) from None
            for line in left_out:  # specbench/sweep/checked.py check_grid: never silently used
                print(f"left out: {line}", file=sys.stderr)
            if not swept:
                where = f"{results.location.rstrip('/')}/sweeps/{args.from_sweep}/"
                raise ValueError(f"--from-sweep {args.from_sweep}: no sweep point stored under {where}")
            table = measured_acceptance(swept, "--from-sweep", args.from_sweep)
            acceptance.update(out.acceptance_table(table, f"sweep {args.from_sweep}"))
        if not acceptance and measured_run_points:
            acceptance = out.acceptance_table(out.acceptance_from_points(measured_run_points), "the calibration runs")
        if not acceptance:
            acceptance = out.acceptance_table(out.ASSUMED_ACCEPTANCE, "assumed (default; set --acceptance CLASS=A)")
        price = configured_price(config)[0] if args.node_price_per_hour is None else (args.node_price_per_hour or None)
        if args.rank:  # the candidates ranked instead of this deployment's table (commands/rank.py)
            from specbench.commands import rank

            source = configured_price(config)[1] if args.node_price_per_hour is None else "--node-price-per-hour"
            ranked = rank.run(args, config, deployment, profile, calibration, base, acceptance, workload, price, source)
        else:
            report = predict_deployment(deployment, profile, acceptance, loads, workload, price, args.k_max, calibration, sources)
    except (OSError, ValueError, BotoCoreError, ClientError) as error:
        print(f"specbench: {error}", file=sys.stderr)
        return EXIT_USAGE
    if args.rank:
        print("\n".join(ranked))
        return 0
    print("\n".join(out.render(report)))
    if args.json:
        try:
            Path(args.json).write_text(jsonfile_dumps(out.json_document(report, fit), indent=2) + "\n", encoding="utf-8")
        except OSError as error:  # a folder, a missing parent, no permission
            print(f"specbench: --json {args.json}: cannot write ({error.strerror or error})", file=sys.stderr)
            return EXIT_USAGE
        print(f"written: {args.json}")
    return 0
