"""Configuration errors: one line per problem, naming the field, the value and what is allowed."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Problem:
    key: str
    value: Any
    problem: str
    allowed: str = ""

    def __str__(self) -> str:
        shown = ",".join(self.value) if isinstance(self.value, tuple) else self.value
        line = f"{self.key}={shown!r}: {self.problem}"
        return f"{line}; allowed: {self.allowed}" if self.allowed else line


class ConfigError(ValueError):
    """Raised at synth when the configuration is invalid; carries every problem found."""

    def __init__(self, problems: list[Problem]):
        self.problems = list(problems)
        super().__init__("\n".join(f"config error: {p}" for p in self.problems))

    def keys(self) -> list[str]:
        return [p.key for p in self.problems]
