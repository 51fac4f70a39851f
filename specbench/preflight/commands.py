"""The fixes preflight prints, as text a user can paste into bash or zsh (pure).

Every word that is not a plain word is quoted with ``shlex.quote`` (POSIX single quotes, which
bash and zsh both read literally): ``--query`` expressions hold ``[`` ``]`` ``?`` and ``*``, which
zsh expands as a glob and stops on with "no matches found" when unquoted (zsh manual, "Filename
Generation"; bash leaves an unmatched pattern as it is). No fix holds ``#`` comments, parentheses
or ``<placeholders>``: interactive zsh does not treat ``#`` as a comment unless
``interactive_comments`` is set, and ``(``/``<`` are syntax in both shells.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from typing import Any

# The README's own command: its exit code is preflight's (a Makefile target's is make's: 2).
PREFLIGHT = "scripts/preflight"
OR = " | or: "  # between alternative fixes on one line; each side is a command on its own
# Where a cdk command in a fix takes the user's -c settings (``rerun`` puts them there).
WITH_CONTEXT = "\x00"
_FIRST = re.compile(r"(?<!^)(?=[A-Z])")


def word(value: object) -> str:
    """One shell word: as it is when plain, else single-quoted."""
    return shlex.quote(str(value))


def alternatives(*fixes: str) -> str:
    """Several fixes, any one of which is enough, each pasteable on its own."""
    return OR.join(f for f in fixes if f)


def settings_fix(settings: Mapping[str, object]) -> str:
    """``-c key=value`` for each setting (a tuple as cdk -c takes one: comma-separated). The command
    prints these after the preflight command with the user's own -c settings (``rerun``)."""
    parts = []
    for key, value in settings.items():
        text = ",".join(str(v) for v in value) if isinstance(value, (tuple, list)) else str(value)
        parts.append(f"-c {word(f'{key}={text}')}")
    return " ".join(parts)


def rerun(fix: str, context_args: Sequence[str]) -> str:
    """A fix as printed: one that is options (``-c ...``, ``--time-limit ...``) becomes the preflight
    command with the user's -c settings, then the fix's (a later -c of the same key wins, as in cdk);
    a cdk command gets the user's settings at WITH_CONTEXT. Each alternative of the line on its own."""
    given = " ".join(f"-c {word(item)}" for item in context_args)
    printed = []
    for one in fix.split(OR):
        if one.startswith("-"):
            one = " ".join(part for part in (PREFLIGHT, given, one) if part)
        printed.append(one.replace(WITH_CONTEXT, f" {given}" if given else ""))
    return OR.join(printed)


def _kebab(name: str) -> str:
    """An API or parameter name as the AWS CLI spells it: DescribeClusterVersions ->
    describe-cluster-versions, IncludeAll -> include-all (what botocore's xform_name(name, "-"), which
    the CLI names commands and options with, gives for names without acronyms; a test compares)."""
    return _FIRST.sub("-", name).lower()


def _value_words(value: Any) -> list[str]:
    if isinstance(value, Mapping):  # a structure in the CLI's shorthand: Name=a,Values=b,c
        return [word(",".join(f"{k}={','.join(map(str, v)) if isinstance(v, (list, tuple)) else v}" for k, v in value.items()))]
    if isinstance(value, (list, tuple)):
        return [w for item in value for w in _value_words(item)]
    return [word(value)]


def cli_command(service: str, api_name: str, region: str, parameters: Mapping[str, Any], query: str = "") -> str:
    """The AWS CLI command that makes the same call (``aws <service> <operation> --region R
    --param value ...``): pasting it shows the whole answer or error. S3's API commands are
    ``aws s3api``; a boolean parameter is ``--name`` / ``--no-name`` (AWS CLI user guide,
    "Using boolean parameters"); lists are space-separated; structures use the shorthand syntax."""
    words = ["aws", "s3api" if service == "s3" else service, _kebab(api_name), *(["--region", word(region)] if region else [])]
    for name, value in parameters.items():
        if name.lower().endswith("token"):  # a pagination token: the CLI pages by itself
            continue
        flag = _kebab(name[0].upper() + name[1:])
        if isinstance(value, bool):
            words.append(f"--{flag}" if value else f"--no-{flag}")
        else:
            words += [f"--{flag}", *_value_words(value)]
    if query:
        words += ["--query", word(query)]
    return " ".join(words)
