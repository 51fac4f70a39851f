"""Reading a JSON file a person named (a suite, the deployment's settings), with one line that says
what is wrong with it. Standard library only: the CDK app's config checks read suites too."""

from __future__ import annotations

import json
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
    except OSError as error:  # unreadable: permissions, a device, ...
        raise JsonFileError(f"cannot be read: {error.strerror or error}") from None
