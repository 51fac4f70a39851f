"""Reading a JSON file a person named (a suite, the deployment's settings), with one line that says
what is wrong with it. Standard library only: the CDK app's config checks read suites too."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any


class JsonFileError(ValueError):
    """Why a named JSON file cannot be used; the message reads after the file's name."""


def read_json_file(path: str | Path) -> Any:
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise JsonFileError("does not exist") from None
    except IsADirectoryError:
        raise JsonFileError("is a directory; expected a JSON file") from None
    except UnicodeDecodeError:
        raise JsonFileError("is not UTF-8 text; expected a JSON file") from None
    except json.JSONDecodeError as error:
        raise JsonFileError(f"is not valid JSON ({error})") from None
    except RecursionError:  # json's decoder recurses once per nested array or object
        raise JsonFileError("is nested too deeply to be read (thousands of arrays or objects inside each other)") from None
    except OSError as error:  # unreadable: permissions, a device, ...
        raise JsonFileError(f"cannot be read: {error.strerror or error}") from None


def dumps(data: Any, **options: Any) -> str:
    """Every JSON the project writes goes through here: strict (``allow_nan=False``), so no bare
    NaN or Infinity, which standard JSON readers reject, ever reaches a file, an object or an API.
    A non-finite number raises ValueError naming where it is: such a value is a bug upstream (flags
    and settings refuse them at parse), never something to store as if it were a figure."""
    try:
        return json.dumps(data, allow_nan=False, **options)
    except ValueError as error:
        if "out of range float" not in str(error).lower():
            raise
        raise ValueError(f"not written: {_non_finite_path(data) or 'a value'} is not a finite number (NaN or infinite)") from None


def _non_finite_path(data: Any, path: str = "") -> str:
    if isinstance(data, float) and not math.isfinite(data):
        return path or "the value"
    if isinstance(data, dict):
        items: Any = data.items()
    elif isinstance(data, (list, tuple)):
        items = enumerate(data)
    else:
        return ""
    for key, value in items:
        found = _non_finite_path(value, f"{path}.{key}" if isinstance(key, str) else f"{path}[{key}]")
        if found:
            return found.lstrip(".")
    return ""
