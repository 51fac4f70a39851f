"""Configuration errors: one line per problem, naming the field, the value and what is allowed."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Problem:
    key: str
    value: Any
    problem: str
    allowed: str = ""
    # Keys this finding is derived from: it is dropped when one of them (or its own key) already
    # has a problem of its own, so one bad value gives one line, not a cascade.
    depends_on: tuple[str, ...] = ()

    def __str__(self) -> str:
        shown = ",".join(map(str, self.value)) if isinstance(self.value, tuple) else self.value
        key = self.key if len(self.key) <= ECHO_LIMIT else echo(self.key)
        line = f"{key}={echo(shown)}: {self.problem}"
        return f"{line}; allowed: {self.allowed}" if self.allowed else line


ECHO_LIMIT = 80  # characters of a value an error line shows: a 5000-character value is one line still


def echo(value: Any, limit: int = ECHO_LIMIT) -> str:
    """``repr(value)``, cut to about ``limit`` characters with how long it was."""
    text = repr(value)
    if len(text) <= limit:
        return text
    size = f"... ({len(str(value))} characters)"
    return text[: limit - len(size)] + size


class ConfigError(ValueError):
    """Raised at synth when the configuration is invalid; carries every problem found."""

    def __init__(self, problems: list[Problem]):
        self.problems = list(problems)
        super().__init__("\n".join(f"config error: {p}" for p in self.problems))

    def keys(self) -> list[str]:
        return [p.key for p in self.problems]


def one_line_each(problems: Iterable[Problem], reported: Iterable[str] = ()) -> list[Problem]:
    """Problems as the user should see them: first-hand problems, plus derived ones whose inputs
    are all fine; the same key and value reported once (the first, most basic finding)."""
    problems = list(problems)
    bad = set(reported) | {p.key for p in problems if not p.depends_on}
    kept: list[Problem] = []
    seen: set[tuple[str, str]] = set()
    for p in problems:
        if p.key in reported or (p.depends_on and bad & {p.key, *p.depends_on}):
            continue
        ident = (p.key, repr(p.value))
        if ident not in seen:
            seen.add(ident)
            kept.append(p)
    return kept
