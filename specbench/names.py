"""Names that become folder names, S3 keys and CloudWatch dimension values: run ids, endpoint and
service names, test cases, sweep ids. Standard library only (the CDK app's config checks and the
suite reader use it).

One rule everywhere they enter (CLI flags, suite files, settings): ASCII letters and digits, ``-``,
``_``, ``.``, starting with a letter or digit (so never ``.``, ``..``, a hidden file or a flag),
1 to 128 characters. Nothing else: a ``/`` or ``..`` would leave the results folder (``--run-id
../../escaped``), a space, a colon or a newline breaks an S3 key's or a dimension's use in scripts,
and non-ASCII digits and letters look like others and sort apart. Matched whole (``fullmatch``:
``$`` would let a trailing newline through) and ASCII-only (``\\w`` and ``\\d`` are Unicode in Python).
"""

from __future__ import annotations

import re

MAX_NAME = 128
_SAFE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*", re.ASCII)
_CHAR = re.compile(r"[A-Za-z0-9._-]", re.ASCII)


def allowed(limit: int = MAX_NAME) -> str:
    return f"ASCII letters, digits, '-', '_', '.', starting with a letter or digit, 1-{limit} characters"


def echo(value: object, limit: int = 80) -> str:
    """A value as an error line shows it: repr'd, cut to about ``limit`` characters."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def name_problem(value: object, limit: int = MAX_NAME) -> str | None:
    """Why ``value`` cannot be such a name, or None."""
    if not isinstance(value, str):
        return f"expected a string, got {type(value).__name__}"
    if not value:
        return "is empty"
    if len(value) > limit:
        return f"is {len(value)} characters long (at most {limit})"
    if value in (".", ".."):
        return "is a relative folder ('.' or '..')"
    if _SAFE.fullmatch(value):
        return None
    bad = next((ch for ch in value if not _CHAR.fullmatch(ch)), None)
    return f"holds {bad!r}" if bad is not None else f"starts with {value[0]!r}"


def check_name(value: object, where: str, limit: int = MAX_NAME) -> str:
    """``value`` when safe; ValueError naming ``where`` (a flag or field) and the rule otherwise."""
    problem = name_problem(value, limit)
    if problem:
        raise ValueError(f"{where} {echo(value)}: {problem} (allowed: {allowed(limit)})")
    return value  # type: ignore[return-value]
