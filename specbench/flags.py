"""Command-line values, parsed strictly: one line naming the flag and what is allowed, exit 2.
Standard library only; ``specbench`` (cli.py) and ``specbench emulate`` (emulator/server.py) share it.

Numbers are ASCII and finite: Python's int() and float() accept Unicode digits (``int("５")`` is 5),
``nan``, ``inf`` and ``1_000``, none of which a person means, and a NaN or an infinity could not be
stored as JSON. A timeout is > 0 (0 must never mean "no timeout"), a port 1-65535.
"""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Callable
from typing import Any, NoReturn

from specbench.names import allowed, echo, name_problem


class OneLineParser(argparse.ArgumentParser):
    """argparse with its errors in one line (the flag, the value, what is allowed), exit 2. No
    abbreviated flags: argparse would take ``predict --tp 1`` for ``--tp-beta 1`` (a prefix match),
    a wrong answer with no error; a flag is spelt in full or refused."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")  # 2: bad arguments, as every command


_INT = re.compile(r"[+-]?[0-9]+", re.ASCII)
_FLOAT = re.compile(r"[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?", re.ASCII)


def ascii_int(text: str) -> int:
    if not _INT.fullmatch(text):
        raise argparse.ArgumentTypeError(f"{echo(text)}: expected a whole number (ASCII digits)")
    return int(text)


def ascii_float(text: str) -> float:
    """A finite number in ASCII digits: never NaN or infinite (JSON could not store it)."""
    if not _FLOAT.fullmatch(text) or not math.isfinite(value := float(text)):
        raise argparse.ArgumentTypeError(f"{echo(text)}: expected a finite number (ASCII digits, e.g. 0.5)")
    return value


def safe_name(text: str) -> str:
    """A run id, a service or test case: specbench/names.py's rule."""
    problem = name_problem(text)
    if problem:
        raise argparse.ArgumentTypeError(f"{echo(text)}: {problem} (allowed: {allowed()})")
    return text


MAX_LOAD = 10_000  # clients in flight: far past any max_num_seqs (config/validate.py: at most 256)


def load_list(text: str) -> list[int]:
    """``1,2,4``: whole numbers of clients in flight, 1 to MAX_LOAD each, comma-separated."""
    allowed_form = f"expected whole numbers 1-{MAX_LOAD} (clients in flight), comma-separated, e.g. 1,2,4"
    parts = text.split(",")
    if not text.strip() or any(not _INT.fullmatch(p.strip()) or not 1 <= int(p) <= MAX_LOAD for p in parts):
        raise argparse.ArgumentTypeError(f"{echo(text)}: {allowed_form}")
    return [int(p) for p in parts]


def positive_int(text: str) -> int:
    value = ascii_int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text}: must be at least 1")
    return value


def non_negative_int(text: str) -> int:
    value = ascii_int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{echo(text)}: must be a whole number >= 0")
    return value


def port(text: str) -> int:
    value = ascii_int(text)
    if not 1 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{echo(text)}: a TCP port is 1-65535")
    return value


def listen_port(text: str) -> int:
    """A port to listen on: 1-65535, or 0 for any free one (the OS picks; the server prints it)."""
    value = ascii_int(text)
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{echo(text)}: a TCP port is 1-65535 (0: any free port)")
    return value


def finite_number(text: str, ok: Callable[[float], bool], what: str) -> float:
    """An ASCII finite number that ``ok`` accepts; else one line saying ``what`` is allowed."""
    try:
        value = ascii_float(text)
    except argparse.ArgumentTypeError:
        value = math.nan
    if not ok(value):  # nan fails every comparison
        raise argparse.ArgumentTypeError(f"{echo(text)}: {what}")
    return value


def positive_float(text: str) -> float:
    return finite_number(text, lambda v: v > 0, "must be a number > 0")


def seconds(text: str) -> float:
    """A timeout: finite and > 0 (0 must never mean "no timeout")."""
    return finite_number(text, lambda v: v > 0, "must be a number of seconds > 0 (finite)")


def temperature(text: str) -> float:
    return finite_number(text, lambda v: v >= 0, "must be a finite number >= 0 (0 is greedy)")
