"""Dataset-backed prompts (issue 13): a suite may name public dataset files, pinned to a revision and
a sha256, and draw a seeded sample of prompts per test case from them.

A source is one file: on the Hugging Face hub (``hub``: a dataset repo id), in a public GitHub
repository (``github``: owner/name), or at ``url`` (http(s), a local path, or ``package:PATH`` inside
specbench, which is how the offline fixtures ship). The file's bytes are checked against ``sha256``
before anything is parsed, then cached by that digest (a directory, or the data bucket's datasets/
prefix in the cluster), so reruns read the same bytes. Every failure is one DatasetError naming the
source and the field, raised before any request is sent.

Item fields: ``id_field`` names the item; its prompt is one of ``text_field`` (a string: one user
message), ``messages_field`` (OpenAI chat messages, for multi-turn conversations) or ``turns_field``
(a list of user turns, as Spec-Bench/MT-bench store them: the first turn is sent, since later turns
need the model's own earlier answer).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import pkgutil
import random
import re
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

HUB_ENDPOINT = "https://huggingface.co"  # huggingface_hub reads HF_ENDPOINT the same way (constants.py)
GITHUB_RAW = "https://raw.githubusercontent.com"
FORMATS = ("jsonl", "json")
ROLES = ("system", "user", "assistant")
FETCH_TIMEOUT_S = 60.0
MAX_BYTES = 64 * 1024 * 1024  # a prompt file larger than this is not what a suite should name
_HEX40 = re.compile(r"^[0-9a-f]{40}\Z", re.ASCII)
_HEX64 = re.compile(r"^[0-9a-f]{64}\Z", re.ASCII)
SOURCE_FIELDS = (
    "hub",
    "github",
    "url",
    "path",
    "revision",
    "sha256",
    "licence",
    "format",
    "id_field",
    "text_field",
    "messages_field",
    "turns_field",
    "category_field",
)


class DatasetError(ValueError):
    """A dataset source that cannot be used; the message names the source, the field, what is allowed."""


@dataclass(frozen=True)
class DatasetSource:
    name: str
    revision: str  # commit of the repository (40 hex); "" only for url sources
    sha256: str
    licence: str
    id_field: str
    hub: str = ""
    github: str = ""
    url: str = ""
    path: str = ""
    format: str = "jsonl"
    text_field: str = ""
    messages_field: str = ""
    turns_field: str = ""
    category_field: str = ""  # what a test case's ``categories`` select on

    def location(self, hub_endpoint: str = HUB_ENDPOINT, github_raw: str = GITHUB_RAW) -> str:
        """Where the file is fetched from: revision-pinned URLs, never a branch."""
        if self.hub:
            # huggingface_hub's hf_hub_url (constants.HUGGINGFACE_CO_URL_TEMPLATE, "{endpoint}/{repo_id}/resolve/
            # {revision}/{filename}", a dataset's repo_id prefixed "datasets/"); HF_ENDPOINT overrides the endpoint.
            return f"{hub_endpoint.rstrip('/')}/datasets/{self.hub}/resolve/{self.revision}/{self.path}"
        if self.github:
            return f"{github_raw.rstrip('/')}/{self.github}/{self.revision}/{self.path}"
        return self.url

    def definition(self) -> dict[str, str]:
        """The source as a suite file gives it (what run.json records): its set fields, format included."""
        return {name: getattr(self, name) for name in SOURCE_FIELDS if getattr(self, name)}


@dataclass(frozen=True)
class PromptItem:
    id: str
    messages: tuple[Mapping[str, str], ...]  # chat messages, the last a user message
    category: str = ""

    @property
    def text(self) -> str:
        return "\n".join(m["content"] for m in self.messages)


def parse_source(name: str, data: Any, where: str) -> DatasetSource:
    """A DatasetSource from a suite's ``datasets`` entry, or DatasetError naming the field."""
    at = f"{where}.datasets.{name}"
    if not isinstance(data, dict):
        raise DatasetError(f"{at}: expected an object with {', '.join(SOURCE_FIELDS)}")
    unknown = sorted(set(data) - set(SOURCE_FIELDS))
    if unknown:
        raise DatasetError(f"{at}: unknown field {', '.join(unknown)}; allowed: {', '.join(SOURCE_FIELDS)}")
    for key, value in data.items():
        if not isinstance(value, str):
            raise DatasetError(f"{at}.{key}: must be a string, got {value!r}")
    kinds = [key for key in ("hub", "github", "url") if data.get(key)]
    if len(kinds) != 1:
        raise DatasetError(f"{at}: name exactly one of hub (a Hugging Face dataset id), github (owner/name) or url; got {kinds or 'none'}")
    if kinds[0] in ("hub", "github"):
        if not re.match(r"^[A-Za-z0-9][\w.-]*/[\w.-]+\Z", data[kinds[0]], re.ASCII):
            raise DatasetError(f"{at}.{kinds[0]}: {data[kinds[0]]!r} must be OWNER/NAME")
        if not _HEX40.match(data.get("revision", "")):
            raise DatasetError(f"{at}.revision: {data.get('revision')!r} must be a full 40-hex commit (a pinned revision, not a branch)")
        if not data.get("path"):
            raise DatasetError(f"{at}.path: the file inside the repository is required")
    if not _HEX64.match(data.get("sha256", "")):
        raise DatasetError(f"{at}.sha256: {data.get('sha256')!r} must be the file's 64-hex sha256")
    if not data.get("licence"):
        raise DatasetError(f"{at}.licence: required (the dataset's licence, e.g. Apache-2.0, MIT)")
    if not data.get("id_field"):
        raise DatasetError(f"{at}.id_field: required (the field that names an item)")
    prompt_fields = [key for key in ("text_field", "messages_field", "turns_field") if data.get(key)]
    if len(prompt_fields) != 1:
        raise DatasetError(f"{at}: name exactly one of text_field, messages_field, turns_field; got {prompt_fields or 'none'}")
    fmt = data.get("format", "jsonl")
    if fmt not in FORMATS:
        raise DatasetError(f"{at}.format: {fmt!r} is not allowed; allowed: {', '.join(FORMATS)} (a .gz path is gunzipped first)")
    values = {k: v for k, v in data.items() if k != "format"}
    return DatasetSource(name=name, **{"revision": "", **values}, format=fmt)


# --- fetching ------------------------------------------------------------------------------------


class Cache(Protocol):
    location: str

    def get(self, sha256: str) -> bytes | None: ...

    def put(self, sha256: str, data: bytes) -> None: ...


class DirCache:
    """Files named by their sha256 in a directory."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.location = str(self.root)

    def get(self, sha256: str) -> bytes | None:
        path = self.root / sha256
        return path.read_bytes() if path.is_file() else None

    def put(self, sha256: str, data: bytes) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        temporary = self.root / f"{sha256}.partial"
        temporary.write_bytes(data)
        temporary.replace(self.root / sha256)


class S3Cache:
    """Objects named by their sha256 under an S3 prefix (the data bucket's datasets/ in the cluster)."""

    def __init__(self, bucket: str, prefix: str, client: Any) -> None:
        self.bucket, self.prefix, self.client = bucket, prefix, client
        self.location = f"s3://{bucket}/{prefix}"

    def get(self, sha256: str) -> bytes | None:
        from botocore.exceptions import ClientError

        try:
            return self.client.get_object(Bucket=self.bucket, Key=self.prefix + sha256)["Body"].read()
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                return None
            raise DatasetError(f"dataset cache {self.location}: {error}") from None

    def put(self, sha256: str, data: bytes) -> None:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            self.client.put_object(Bucket=self.bucket, Key=self.prefix + sha256, Body=data)
        except (BotoCoreError, ClientError) as error:
            raise DatasetError(f"dataset cache {self.location}: cannot store {sha256}: {error}") from None


def open_cache(location: str, region: str | None = None) -> Cache | None:
    """``s3://BUCKET/PREFIX/`` or a directory; None for ""."""
    if not location:
        return None
    if location.startswith("s3://"):
        import boto3

        bucket, _, prefix = location[5:].partition("/")
        if not bucket:
            raise DatasetError(f"--dataset-cache {location!r}: expected s3://BUCKET/PREFIX/")
        return S3Cache(bucket, prefix if not prefix or prefix.endswith("/") else prefix + "/", boto3.client("s3", region_name=region))
    return DirCache(location)


def _download(location: str, base_dir: Path | None) -> bytes:
    if location.startswith("package:"):
        data = pkgutil.get_data("specbench", location[len("package:") :])
        if data is None:
            raise FileNotFoundError(location)
        return data
    if location.startswith(("http://", "https://")):
        request = urllib.request.Request(location, headers={"User-Agent": "specbench"})
        with urllib.request.urlopen(request, timeout=FETCH_TIMEOUT_S) as response:  # noqa: S310 - http(s) only, checked above
            data = response.read(MAX_BYTES + 1)
        if len(data) > MAX_BYTES:
            raise ValueError(f"larger than {MAX_BYTES} bytes")
        return data
    path = Path(location)
    if not path.is_absolute() and base_dir is not None:
        path = base_dir / path
    return path.read_bytes()


def fetch(source: DatasetSource, cache: Cache | None = None, base_dir: Path | None = None, hub_endpoint: str | None = None) -> bytes:
    """The source file's bytes, checked against its sha256; from the cache when it has them."""
    if cache is not None and (cached := cache.get(source.sha256)) is not None:
        if hashlib.sha256(cached).hexdigest() == source.sha256:
            return cached
    location = source.location(hub_endpoint or os.environ.get("HF_ENDPOINT") or HUB_ENDPOINT)
    try:
        data = _download(location, base_dir)
    except (OSError, ValueError, urllib.error.URLError) as error:
        raise DatasetError(f"dataset {source.name}: cannot fetch {location}: {type(error).__name__}: {error}") from None
    digest = hashlib.sha256(data).hexdigest()
    if digest != source.sha256:
        raise DatasetError(f"dataset {source.name}: {location} has sha256 {digest}, the suite pins {source.sha256}")
    if cache is not None:
        try:
            cache.put(source.sha256, data)
        except OSError as error:
            raise DatasetError(f"dataset cache {cache.location}: cannot store {source.sha256}: {error}") from None
    return data


# --- parsing and sampling ------------------------------------------------------------------------


def parse_items(source: DatasetSource, data: bytes) -> list[PromptItem]:
    """Every item of the file as a prompt; DatasetError naming the first item with a missing field."""
    if source.path.endswith(".gz") or source.url.endswith(".gz"):
        try:
            data = gzip.decompress(data)
        except OSError as error:
            raise DatasetError(f"dataset {source.name}: not gzip data: {error}") from None
    try:
        text = data.decode("utf-8")
        # JSON Lines ends a line at "\n" only: str.splitlines() also breaks at U+2028, U+0085 and
        # \x1c-\x1e, which JSON lets a string hold raw (scraped prompts do), and would cut a record.
        rows = [json.loads(line) for line in text.split("\n") if line.strip()] if source.format == "jsonl" else json.loads(text)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise DatasetError(f"dataset {source.name}: not {source.format}: {error}") from None
    if not isinstance(rows, list):
        raise DatasetError(f"dataset {source.name}: expected a list of objects")
    return [_item(source, index, row) for index, row in enumerate(rows)]


def _item(source: DatasetSource, index: int, row: Any) -> PromptItem:
    where = f"dataset {source.name} item {index}"
    if not isinstance(row, dict):
        raise DatasetError(f"{where}: expected an object")
    if source.id_field not in row:
        raise DatasetError(f"{where}: missing id_field {source.id_field!r}")
    category = str(row.get(source.category_field, "")) if source.category_field else ""
    if source.text_field:
        value = row.get(source.text_field)
        if not isinstance(value, str) or not value.strip():
            raise DatasetError(f"{where}: text_field {source.text_field!r} must be a non-empty string")
        messages: tuple[dict[str, str], ...] = ({"role": "user", "content": value},)
    elif source.turns_field:
        turns = row.get(source.turns_field)
        if not isinstance(turns, list) or not turns or not isinstance(turns[0], str) or not turns[0].strip():
            raise DatasetError(f"{where}: turns_field {source.turns_field!r} must be a non-empty list of strings")
        messages = ({"role": "user", "content": turns[0]},)
    else:
        messages = _messages(row.get(source.messages_field), f"{where}: messages_field {source.messages_field!r}")
    return PromptItem(str(row[source.id_field]), messages, category)


def _messages(value: Any, where: str) -> tuple[dict[str, str], ...]:
    if not isinstance(value, list) or not value:
        raise DatasetError(f"{where} must be a non-empty list of {{role, content}} messages")
    messages = []
    for message in value:
        ok = isinstance(message, dict) and message.get("role") in ROLES and isinstance(message.get("content"), str)
        if not ok:
            raise DatasetError(f"{where}: each message needs role ({', '.join(ROLES)}) and string content; got {message!r}")
        messages.append({"role": message["role"], "content": message["content"]})
    if messages[-1]["role"] != "user":
        raise DatasetError(f"{where}: the last message must be the user's (the request asks for the next assistant turn)")
    return tuple(messages)


def sample(items: Sequence[PromptItem], categories: Sequence[str], size: int, seed: int, case: str) -> list[PromptItem]:
    """``size`` items of the given categories (all when none given), drawn without replacement with a
    generator seeded by the suite's seed and the test case's name: the same suite, the same ids."""
    pool = [item for item in items if not categories or item.category in categories]
    if not pool:
        raise DatasetError(f"test case {case}: no item of categories {list(categories)} in the dataset")
    rng = random.Random(f"{seed}\0{case}")
    return rng.sample(pool, min(size, len(pool)))


def load_sources(
    sources: Mapping[str, DatasetSource], cache: Cache | None = None, base_dir: Path | None = None, hub_endpoint: str | None = None
) -> dict[str, list[PromptItem]]:
    """Every source a suite names, fetched, checked and parsed once: source name -> items."""
    return {name: parse_items(source, fetch(source, cache, base_dir, hub_endpoint)) for name, source in sources.items()}
