"""``specbench``: run the benchmark, republish a stored run, validate a suite, emulate endpoints.

    python -m specbench emulate --time-scale 0.1          # baseline on :8000, speculative on :8001
    python -m specbench run --endpoint qwen-vllm=http://127.0.0.1:8000 --endpoint qwen-sd-vllm=http://127.0.0.1:8001 --no-publish
    python -m specbench publish ./results/<run_id> --region us-east-2
    python -m specbench report <run_id>                     # ./report-<run_id>/report.html, report.md, charts
    python -m specbench sweep-report --results ./results --sweep-id ID   # ./sweep-report-ID/sweep-report.md, charts
    python -m specbench suite [--suite my-suite.json]
    python -m specbench import-llmperf ./llmperf-out/sd-json --variant qwen-sd-vllm --test-case json --run-id reference
    python -m specbench plan -c sweep.variants=q17-k5:Qwen/Qwen3-1.7B:5 -c neuron_nodes.desired_size=2   # a checkout only
    python -m specbench preflight -c neuron_nodes.availability_zone=us-east-2b   # a checkout only; reads the account

Exit codes of ``run``: 0 completed (failed requests are counted, not fatal), 1 crashed or the
environment failed, or stopped by SIGTERM (what completed is stored), 2 bad arguments, 3 stored but
not all published, 4 endpoints never ready, 5 completed but every request of some service failed,
130 interrupted by Ctrl-C (SIGINT; 128 + the signal's number, as shells report it; what completed
is stored, requests in flight recorded as interrupted).
Every command reports a problem in one line (no traceback): 2 for bad input, 1 for the environment,
130 for Ctrl-C.
Exit codes of ``preflight``: 0 every check passed, 1 a check failed (or the caller's identity could
not be read), 2 bad arguments or settings, 3 warnings only (a check whose API call failed is one).

This module only dispatches: each command is a module of specbench/commands/ (its parser and its
handler), imported when that command is chosen. ``--help`` lists every command from COMMANDS
without importing any. In the pods' zip, which holds only the commands the pods run, another
command exits 2 with one line saying so.
"""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Iterable, Sequence

from specbench.commands import EXIT_INTERRUPTED, EXIT_USAGE, NotInBundle, load
from specbench.flags import OneLineParser

# Every command: its name, its module under specbench/commands/ and its one-line help, in --help's
# order. --help lists them from here without importing a command's module; each module's
# register() adds the same help (tests/test_cli_inputs.py compares the two --help texts).
COMMANDS = (
    ("run", "run", "drive a suite at the endpoints, store every result, publish to CloudWatch"),
    ("publish", "publish", "publish (again) a stored run's metrics to CloudWatch"),
    ("report", "report", "write a stored run's report: HTML and Markdown with PNG charts"),
    ("sweep-report", "sweep_report", "a sweep's recommendation table, curves and load figures (Markdown, PNG, JSON)"),
    ("import-llmperf", "import_llmperf", "bring one llmperf results directory into a stored run"),
    ("sweep", "sweep", "a staged sweep's next stage (sweep.strategy=staged; docs/sweeps.md)"),
    ("plan", "plan", "print the configured sweep's matrix, waves, node-hours and cost (from a checkout)"),
    ("predict", "predict", "the serving model's TPOT, E2E, tokens/s per node, speedup and cost per class and load (from a checkout)"),
    ("preflight", "preflight", "read the account (read-only) for what the deploy needs: one line per check (from a checkout)"),
    ("suite", "suite", "validate a suite file and print its test cases"),
    ("emulate", "emulate", "serve emulated baseline and speculative endpoints on 127.0.0.1 (see emulate --help)"),
)
NAMES = frozenset(name for name, _, _ in COMMANDS)


def parser(full: Iterable[str] | None = None) -> argparse.ArgumentParser:
    """The command line: every command listed with its help; those in ``full`` (default: every one)
    with their own parsers, their modules imported. A command not in ``full`` parses nothing."""
    root = OneLineParser(prog="specbench", description="Measure speculative decoding against a baseline, per prompt type.")
    commands = root.add_subparsers(dest="command", required=True)
    for name, module, help_text in COMMANDS:
        if full is None or name in full:
            load(module, name).register(commands)
        else:
            commands.add_parser(name, help=help_text)
    return root


def chosen(argv: Sequence[str]) -> tuple[str, ...]:
    """The command ``argv`` names, as a 1-tuple (none: empty): its first word that is not an option
    (the root parser's only option is -h)."""
    first = next((word for word in argv if not word.startswith("-")), "")
    return (first,) if first in NAMES else ()


@functools.cache  # at most one entry per command, and one for none
def _shared_parser(full: tuple[str, ...] = ()) -> argparse.ArgumentParser:
    """One parser per command and process for main(): building one is up to ~100 add_argument calls
    and argparse's gettext lookups, and tests and scripts call main() hundreds of times in one
    process. Parsing never changes a parser (argparse builds a new Namespace on every call)."""
    return parser(full)


def _parse(argv: Sequence[str]) -> argparse.Namespace:
    """The arguments of one call; list values copied, so that no call shares (and could change) the
    parser's own list defaults (``--test-case`` and ``-c`` default to [], which argparse hands out as is)."""
    args = _shared_parser(chosen(argv)).parse_args(argv)
    return argparse.Namespace(**{key: list(value) if isinstance(value, list) else value for key, value in vars(args).items()})


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        if argv[:1] == ["emulate"]:  # the emulator parses the rest of the line itself
            return load("emulate", "emulate").main(argv[1:])
        args = _parse(argv)
        return args.handler(args)
    except NotInBundle as error:  # the pods' zip: a laptop's command
        print(f"specbench: {error}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("specbench: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as error:  # noqa: BLE001 - the promise is one line, never a traceback
        from specbench.commands.common import exit_code

        return exit_code(error)
