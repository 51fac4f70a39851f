"""``specbench sweep``: a staged sweep's steps. ``sweep control`` (the in-cluster controller) runs
in a pod and is in the pods' zip; ``sweep next`` (it reads config/) and ``sweep stage-job`` (the
filter between ``kubectl create job`` and ``kubectl apply``) run on a laptop: their handlers are in
commands/sweep_next.py, imported only when one of them is chosen, so the zip leaves them out.
"""

from __future__ import annotations

import argparse

from specbench.commands import load
from specbench.commands.common import add_checkout_arguments, node_price
from specbench.flags import positive_int, safe_name


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``sweep``'s parser, its three steps' parsers and their handlers (cli.py lists it in COMMANDS)."""
    staged_sweep = subparsers.add_parser("sweep", help="a staged sweep's next stage (sweep.strategy=staged; docs/sweeps.md)")
    steps = staged_sweep.add_subparsers(dest="sweep_command", required=True)
    nxt = steps.add_parser("next", help="decide at every load from the stored points; print and store the next stage and its command")
    nxt.add_argument("--sweep-id", type=safe_name, required=True, help="the sweep (its points under <results>/sweeps/<sweep id>/)")
    nxt.add_argument("--results", default="results", help="directory or s3://BUCKET/PREFIX/ (default: ./results)")
    nxt.add_argument(
        "--node-price-per-hour",
        type=node_price,
        default=None,
        help="objective: mix-weighted cost per million tokens at this node price (default: the setting results.node_price_per_hour; "
        "0: the mix-weighted speedup)",
    )
    nxt.add_argument("--resamples", type=positive_int, default=400, help="bootstrap replicates of the model's interval")
    add_checkout_arguments(nxt)
    nxt.add_argument("--region", default=None)
    nxt.set_defaults(handler=command_next)
    job = steps.add_parser("stage-job", help="filter: the CronJob's Job JSON (stdin) made into a stage's Job (stdout)")
    job.add_argument("--stage", required=True, help="the after-stage-<n>.json that sweep next stored (a path or s3:// URL)")
    job.add_argument("--region", default=None)
    job.set_defaults(handler=command_stage_job)
    from specbench.outputs.sweep_controller import add_arguments as add_control_arguments

    ctl = steps.add_parser("control", help="run a staged sweep's stages in the cluster (a pod; docs/sweeps.md)")
    add_control_arguments(ctl)
    ctl.set_defaults(handler=command_control)


def command_control(args: argparse.Namespace) -> int:
    """``sweep control``: the in-cluster controller (specbench/outputs/sweep_controller.py)."""
    from specbench.outputs.sweep_controller import control

    return control(args)


def command_next(args: argparse.Namespace) -> int:
    return load("sweep_next", "sweep next").command_next(args)


def command_stage_job(args: argparse.Namespace) -> int:
    return load("sweep_next", "sweep stage-job").command_stage_job(args)
