"""The ``specbench`` commands, one module each; specbench/cli.py is the dispatcher.

Each command's module has ``register(subparsers)``, which adds the command's parser and sets its
handler (``set_defaults(handler=...)``), as vLLM's command modules add theirs (vllm-project/vllm
vllm/entrypoints/cli/main.py: ``cmd.subparser_init(subparsers).set_defaults(dispatch_function=cmd.cmd)``).
cli.py imports a command's module only when that command is chosen (``load``), so ``specbench run``
never imports the report's matplotlib or the emulator, and the pods' zip can hold only the commands
the pods run (specbench/bundle.py ``JOB_ENTRIES``): another is refused there in one line.

Standard library only: cli.py imports this for every command, ``--help`` included.
"""

from __future__ import annotations

import importlib
from types import ModuleType

# Exit codes (specbench/cli.py's docstring says what each means for which command).
EXIT_CRASHED, EXIT_USAGE, EXIT_UNPUBLISHED, EXIT_NOT_READY, EXIT_SERVICE_FAILED = 1, 2, 3, 4, 5
EXIT_INTERRUPTED = 130  # Ctrl-C: 128 + SIGINT (2), what a shell reports for a process SIGINT ended


class NotInBundle(Exception):
    """A command whose module this build does not hold (the pods' zip holds the pods' commands only)."""


def load(module: str, command: str) -> ModuleType:
    """The module ``specbench.commands.<module>`` of ``command``; NotInBundle when this build has no
    such module (a ModuleNotFoundError for anything it imports is not caught: that is another fault)."""
    name = f"{__name__}.{module}"
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as error:
        if error.name != name:
            raise
        raise NotInBundle(
            f"{command}: this command is not in the pod bundle (the zip holds only the commands the pods run); "
            "run it from a checkout of the project"
        ) from None
