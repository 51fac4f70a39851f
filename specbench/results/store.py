"""Where a run's results go: a directory offline, the S3 results prefix in the cluster.

Objects are written whole (S3 has no append), one per finished test case, so a run that crashes
keeps every test case it completed; nothing is published before it is stored here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlparse


class StoreError(RuntimeError):
    """A results location that cannot be written; the message names the location and the cause."""


class ResultsStore(Protocol):
    location: str

    def write_text(self, key: str, text: str) -> None: ...

    def read_text(self, key: str) -> str: ...

    def keys(self, prefix: str = "") -> list[str]: ...


class LocalStore:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.location = str(root)

    def write_text(self, key: str, text: str) -> None:
        path = self.root / key
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            temporary = path.with_name(path.name + ".partial")
            temporary.write_text(text, encoding="utf-8")
            temporary.replace(path)  # readers never see half a file
        except OSError as error:
            raise StoreError(f"cannot write {path}: {error.strerror or error}") from error

    def read_text(self, key: str) -> str:
        return (self.root / key).read_text(encoding="utf-8")

    def keys(self, prefix: str = "") -> list[str]:
        base = self.root / prefix
        if not base.exists():
            return []
        files = [base] if base.is_file() else base.rglob("*")
        return sorted(str(p.relative_to(self.root)) for p in files if p.is_file() and not p.name.endswith(".partial"))


class S3Store:
    def __init__(self, bucket: str, prefix: str, client: Any) -> None:
        self.bucket, self.prefix, self.client = bucket, prefix, client
        self.location = f"s3://{bucket}/{prefix}"

    def write_text(self, key: str, text: str) -> None:
        from botocore.exceptions import BotoCoreError, ClientError

        content_type = "application/json" if key.endswith(".json") else "application/x-ndjson" if key.endswith(".jsonl") else "text/plain"
        try:
            self.client.put_object(Bucket=self.bucket, Key=self.prefix + key, Body=text.encode("utf-8"), ContentType=content_type)
        except (BotoCoreError, ClientError) as error:
            raise StoreError(f"cannot write s3://{self.bucket}/{self.prefix}{key}: {error}") from error

    def read_text(self, key: str) -> str:
        return self.client.get_object(Bucket=self.bucket, Key=self.prefix + key)["Body"].read().decode("utf-8")

    def keys(self, prefix: str = "") -> list[str]:
        found = []
        for page in self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=self.prefix + prefix):
            found.extend(item["Key"][len(self.prefix) :] for item in page.get("Contents", []))
        return sorted(found)


def open_store(location: str, region: str | None = None, s3_client: Any = None) -> ResultsStore:
    """``s3://bucket/prefix/`` or a directory path. The prefix always ends with '/'."""
    if location.startswith("s3://"):
        parsed = urlparse(location)
        if not parsed.netloc:
            raise ValueError(f"results location {location!r}: expected s3://BUCKET/PREFIX/")
        prefix = parsed.path.lstrip("/")
        if prefix and not prefix.endswith("/"):
            prefix += "/"
        if s3_client is None:
            import boto3

            s3_client = boto3.client("s3", region_name=region)
        return S3Store(parsed.netloc, prefix, s3_client)
    if "://" in location:
        raise ValueError(f"results location {location!r}: allowed are a directory path or s3://BUCKET/PREFIX/")
    return LocalStore(Path(location))


class RunStore:
    """One run's folder inside a store: ``<run_id>/...``."""

    def __init__(self, store: ResultsStore, run_id: str) -> None:
        self.store, self.run_id = store, run_id
        self.location = f"{store.location.rstrip('/')}/{run_id}"
        self.written = 0  # files stored so far: tells "nothing was stored" from "kept what completed"

    def write(self, key: str, text: str) -> None:
        self.store.write_text(f"{self.run_id}/{key}", text)
        self.written += 1

    def read(self, key: str) -> str:
        return self.store.read_text(f"{self.run_id}/{key}")

    def keys(self, prefix: str = "") -> list[str]:
        return [key[len(self.run_id) + 1 :] for key in self.store.keys(f"{self.run_id}/{prefix}")]
