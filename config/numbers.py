"""Numbers in settings, parsed strictly: ASCII digits only, finite.

Python's ``int()`` and ``float()`` accept Unicode digits (``int("５")`` is 5, ``int("١٢")`` is 12),
underscores (``"1_0"``), ``nan`` and ``inf``; ``\\d`` in a pattern matches Unicode digits unless
the pattern is ASCII. A setting is what a person typed or a file holds: anything but plain ASCII
digits is a mistake to report, never a number to guess.
"""

from __future__ import annotations

import math
import re

_INT = re.compile(r"[+-]?[0-9]+", re.ASCII)
_FLOAT = re.compile(r"[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?", re.ASCII)


def parse_int(text: str) -> int:
    """ValueError unless ``text`` (surrounding spaces aside) is a whole number in ASCII digits."""
    stripped = text.strip()
    if not _INT.fullmatch(stripped):
        raise ValueError("expected a whole number" + _ascii_note(stripped))
    return int(stripped)


def parse_float(text: str) -> float:
    """ValueError unless ``text`` is a finite number in ASCII digits (no nan, inf, '_')."""
    stripped = text.strip()
    if stripped.lower().lstrip("+-") in ("nan", "inf", "infinity"):
        raise ValueError("expected a finite number (not NaN or infinite)")
    if not _FLOAT.fullmatch(stripped):
        raise ValueError("expected a number" + _ascii_note(stripped))
    value = float(stripped)
    if not math.isfinite(value):
        raise ValueError("expected a finite number")
    return value


def _ascii_note(text: str) -> str:
    return "" if text.isascii() else " (ASCII digits only)"
