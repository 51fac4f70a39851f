"""``specbench plan``: the configured sweep's matrix, waves, node-hours and cost, as synth prints it
(from a checkout: it reads config/)."""

from __future__ import annotations

import argparse

from specbench.commands.checkout import checkout_config
from specbench.commands.common import add_checkout_arguments


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``plan``'s parser and its handler (cli.py lists it in COMMANDS)."""
    plan = subparsers.add_parser("plan", help="print the configured sweep's matrix, waves, node-hours and cost (from a checkout)")
    add_checkout_arguments(plan)
    plan.set_defaults(handler=command_plan)


def command_plan(args: argparse.Namespace) -> int:
    """The sweep plan synth prints, from cdk.json's context and ``-c`` overrides."""
    config = checkout_config(args)
    if isinstance(config, int):
        return config
    from config.cost import node_price as configured_price
    from config.sweep import enabled, plan_text

    if not enabled(config):
        print("no sweep configured: set sweep.variants (e.g. -c sweep.variants=q17-k5:Qwen/Qwen3-1.7B:5)")
        return 0
    print(plan_text(config, configured_price(config)[0]))
    return 0
