"""``specbench emulate``: emulated baseline and speculative endpoints on 127.0.0.1, for tests and the
demo (a laptop's: the emulator is not in the pods' zip). The emulator parses its own arguments
(specbench/emulator/server.py): cli.py hands it the rest of the line."""

from __future__ import annotations

import argparse
import sys

from specbench.commands import EXIT_CRASHED


def register(subparsers: argparse._SubParsersAction) -> None:
    """List ``emulate`` in the command line's --help (its own flags are the emulator's)."""
    emulate = subparsers.add_parser("emulate", help="serve emulated baseline and speculative endpoints on 127.0.0.1 (see emulate --help)")
    emulate.set_defaults(handler=command_emulate)


def command_emulate(args: argparse.Namespace) -> int:
    """Reached only when ``emulate`` is not the first word (``specbench -- emulate``): no flags then."""
    return main([])


def main(argv: list[str]) -> int:
    """The emulator with ``argv`` (what follows ``emulate``); a port it cannot bind is one line, exit 1."""
    from specbench.emulator.server import main_emulate

    try:
        return main_emulate(argv)
    except OSError as error:  # a port in use, or not ours to bind
        print(f"specbench emulate: {error} (choose others with --baseline-port, --speculative-port)", file=sys.stderr)
        return EXIT_CRASHED
