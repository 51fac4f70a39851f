"""Names that become folder names, S3 keys and CloudWatch dimension values: run ids, endpoint and
service names, test cases, sweep ids and points. Standard library only (the CDK app's config checks
and the suite reader use it).

One pattern everywhere they enter (CLI flags, suite files, settings): ASCII letters and digits,
``-``, ``_``, ``.``, 1 to 128 characters, not ``.`` or ``..``. Nothing else: a ``/`` or ``..`` would
leave the results folder (``--run-id ../../escaped``), a space or a colon breaks an S3 key's or a
dimension's use in scripts, and non-ASCII digits and letters look alike and sort apart.
"""

from __future__ import annotations

import re

MAX_NAME = 128
_SAFE = re.compile(r"[A-Za-z0-9._-]+", re.ASCII)
ALLOWED = f"ASCII letters, digits, '-', '_', '.'; 1-{MAX_NAME} characters; not '.' or '..'"


def echo(value: object, limit: int = 80) -> str:
    """A value as an error line shows it: repr'd, cut to about ``limit`` characters."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def name_problem(value: object) -> str | None:
    """Why ``value`` cannot be such a name, or None."""
    if not isinstance(value, str):
        return f"expected a string, got {type(value).__name__}"
    if not value:
        return "is empty"
    if len(value) > MAX_NAME:
        return f"is {len(value)} characters long (at most {MAX_NAME})"
    if value in (".", ".."):
        return "is a relative folder ('.' or '..')"
    if not _SAFE.fullmatch(value):
        bad = next(ch for ch in value if not _SAFE.fullmatch(ch))
        return f"holds {bad!r}"
    return None


def check_name(value: object, where: str) -> str:
    """``value`` when safe; ValueError naming ``where`` (a flag or field) and the rule otherwise."""
    problem = name_problem(value)
    if problem:
        raise ValueError(f"{where} {echo(value)}: {problem} (allowed: {ALLOWED})")
    return value  # type: ignore[return-value]
