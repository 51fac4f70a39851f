"""Where a run's results go: a directory offline, the S3 results prefix in the cluster.

What "stored" means (issue 22):
- Whole files (run.json, a test case's final records, acceptance) replace the old one atomically:
  in a directory, written to a temporary file in the same folder, fsync'd, renamed over the old one,
  and the folder fsync'd (POSIX rename is atomic within a file system); on S3 a PUT replaces an
  object whole (readers see the old object or the new one, never half).
- Records are journalled as each request completes (``RunStore.journal``). In a directory each
  record is one line appended to ``records/<case>.jsonl`` and flushed to the kernel before the
  engine moves on (a ``kill -9`` of the process loses nothing written), then fsync'd by a background
  thread (a crash of the machine loses at most the last lines; fsync blocks for milliseconds and must
  not stall the event loop that stamps chunks). S3 objects cannot be appended: the journal keeps the
  case's lines and PUTs the whole ``records/<case>.jsonl`` again from a background thread after each
  completed request, coalesced (one PUT in flight; records that complete meanwhile go with the
  next). A killed run on S3 keeps every request whose PUT had finished: at most the requests of the
  last PUT's round trip are lost. No part objects: readers list no extra keys, and the Job's role
  needs no DeleteObject. At the test case's end the runner replaces the journal with the case's
  records in order (one atomic write), and at the run's end run.json says how it ended.
- A run in progress holds a lock (directory: ``flock`` on ``<run>/.lock``, released by the kernel
  however the process ends; S3: run.json's ``heartbeat``, refreshed while the run lives). A reader
  finding run.json "running" with the lock free, or the heartbeat stale, reads the run as
  "interrupted" (``effective_status``).
"""

from __future__ import annotations

import os
import queue
import tempfile
import threading
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlparse

LOCK_FILE = ".lock"
# run.json's heartbeat is refreshed this often while a run lives; older than STALE_AFTER_S and the
# run is read as interrupted (three missed beats: a busy machine may delay one, not three).
HEARTBEAT_S = 60.0
STALE_AFTER_S = 3 * HEARTBEAT_S


class StoreError(RuntimeError):
    """A results location that cannot be written; the message names the location and the cause."""


class ResultsStore(Protocol):
    location: str

    def write_text(self, key: str, text: str) -> None: ...

    def read_text(self, key: str) -> str: ...

    def keys(self, prefix: str = "") -> list[str]: ...


class Journal(Protocol):
    def append(self, line: str) -> None: ...

    def close(self) -> None: ...


def _fsync_directory(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # a platform without directory file descriptors
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


class LocalStore:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.location = str(root)

    def path(self, key: str) -> Path:
        """The file of ``key``, refused when it would lie outside the store's root (``..``, absolute
        keys): names are checked where they enter (specbench/names.py); this is the last guard."""
        root = os.path.abspath(self.root)
        path = os.path.abspath(os.path.join(root, key))
        if os.path.commonpath([root, path]) != root or path == root:
            raise StoreError(f"cannot write {key!r}: the key leaves {self.root}")
        return Path(path)

    def write_text(self, key: str, text: str) -> None:
        path = self.path(key)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            # A temporary file of its own in the same folder (rename is atomic only within a file
            # system), fsync'd before the rename and the folder after it: readers and a crash see the
            # old file or the new one, never half of one.
            fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".partial", dir=path.parent)
            try:
                with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:  # the text as it is, like S3
                    handle.write(text)
                    handle.flush()
                    os.fsync(handle.fileno())
                os.replace(temporary, path)
            except BaseException:
                Path(temporary).unlink(missing_ok=True)
                raise
            _fsync_directory(path.parent)
        except OSError as error:
            raise StoreError(f"cannot write {path}: {error.strerror or error}") from error

    def read_text(self, key: str) -> str:
        # The file's bytes decoded, as S3Store decodes an object's: never Python's universal
        # newlines, which read a stray carriage return as the end of a line (a records file would
        # count one line more on disk than in S3, and a damaged record would read as two).
        return self.path(key).read_bytes().decode("utf-8")

    def keys(self, prefix: str = "") -> list[str]:
        base = self.root / prefix
        if not base.exists():
            return []
        files = [base] if base.is_file() else base.rglob("*")
        return sorted(
            str(p.relative_to(self.root)) for p in files if p.is_file() and not p.name.endswith(".partial") and p.name != LOCK_FILE
        )

    def journal(self, key: str) -> Journal:
        return _FileJournal(self.path(key))

    def lock(self, key: str) -> Any:
        return _FileLock(self.path(key))

    def writer_alive(self, key: str) -> bool | None:
        """Whether a process holds the lock file ``key``: None when there is none (an older run, or
        one written elsewhere), else True or False. Probed with a non-blocking flock."""
        try:
            import fcntl
        except ImportError:  # not POSIX
            return None
        path = self.path(key)
        try:
            fd = os.open(path, os.O_RDWR)
        except OSError:
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return True
        finally:
            os.close(fd)  # closing drops a lock this probe took
        return False


class _FileJournal:
    """Lines appended to one file: written and flushed to the kernel at once (a killed process
    loses none), fsync'd by one background thread (coalesced, off the event loop)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._file = open(path, "a", encoding="utf-8", newline="")  # noqa: SIM115 - closed in close()
        except OSError as error:
            raise StoreError(f"cannot write {path}: {error.strerror or error}") from error
        self._dirty = threading.Event()
        self._write_lock = threading.Lock()  # an engine may hand records over from its threads
        self._closed = False
        self._error: OSError | None = None
        self._thread = threading.Thread(target=self._sync_loop, name="journal-fsync", daemon=True)
        self._thread.start()
        _fsync_directory(path.parent)  # the new file's name is durable too

    def append(self, line: str) -> None:
        try:
            with self._write_lock:
                self._file.write(line)
                self._file.flush()
        except OSError as error:
            raise StoreError(f"cannot write {self.path}: {error.strerror or error}") from error
        self._dirty.set()

    def _sync_loop(self) -> None:
        while True:
            self._dirty.wait()
            self._dirty.clear()
            try:
                os.fsync(self._file.fileno())
            except (OSError, ValueError) as error:  # ValueError: closed under us
                self._error = error if isinstance(error, OSError) else None
            if self._closed:
                return

    def close(self) -> None:
        self._closed = True
        self._dirty.set()
        self._thread.join()
        try:
            self._file.flush()
            os.fsync(self._file.fileno())
        except OSError:
            pass
        self._file.close()


class _FileLock:
    """An exclusive flock held for a run's life; the kernel drops it when the process ends, killed or not."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    def acquire(self) -> bool:
        """True when taken; False when another live process holds it."""
        try:
            import fcntl
        except ImportError:
            return True
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as error:
            raise StoreError(f"cannot write {self.path}: {error.strerror or error}") from error
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(self._fd)
            self._fd = None
            return False
        return True

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
            self.path.unlink(missing_ok=True)


class _NoLock:
    def acquire(self) -> bool:
        return True

    def release(self) -> None: ...


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
        return sorted(self.versions(prefix))

    def versions(self, prefix: str = "") -> dict[str, str]:
        """keys(prefix), each with its object's ETag as the listing gives it (ListObjectsV2's
        ``Contents[].ETag``): a PUT of other bytes gives another ETag."""
        found = {}
        for page in self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=self.prefix + prefix):
            found.update((item["Key"][len(self.prefix) :], item["ETag"]) for item in page.get("Contents", []))
        return found

    def journal(self, key: str) -> Journal:
        return _ObjectJournal(self, key)

    def lock(self, key: str) -> Any:
        return _NoLock()  # S3 has no lock a killed process drops: run.json's heartbeat stands in

    def writer_alive(self, key: str) -> bool | None:
        return None


class _ObjectJournal:
    """S3 has no append: the whole object is PUT again after each completed request, by one
    background thread, coalesced (lines that arrive during a PUT go with the next one)."""

    def __init__(self, store: S3Store, key: str) -> None:
        self.store, self.key = store, key
        self._lines: list[str] = []
        self._lock = threading.Lock()
        self._wake: queue.Queue[bool] = queue.Queue()
        self._error: StoreError | None = None
        self._thread = threading.Thread(target=self._upload_loop, name="journal-put", daemon=True)
        self._thread.start()

    def append(self, line: str) -> None:
        with self._lock:
            self._lines.append(line)
        self._wake.put(True)

    def _upload_loop(self) -> None:
        while True:
            more = self._wake.get()
            while not self._wake.empty():  # coalesce: one PUT for every line that arrived meanwhile
                more = self._wake.get() and more
            with self._lock:
                text = "".join(self._lines)
            try:
                if text:
                    self.store.write_text(self.key, text)
            except StoreError as error:
                self._error = error  # the runner's final write of the case says so, or succeeds
            if not more:
                return

    def close(self) -> None:
        self._wake.put(False)
        self._thread.join()


class PollingReader:
    """An S3Store read again and again by one poller (the sweep controller, each minute, every
    point's files): a listing brings each key's ETag (``S3Store.versions``), and a key read before at
    the ETag its last listing gave is not fetched again. So a read right after a listing returns what
    the store held then, as a plain read would: other bytes have another ETag and are fetched anew,
    and a key never listed is fetched every time. The sweep's Jobs never delete an object, and a key
    deleted and put again is listed with its new ETag. Not for a LocalStore: a file read costs what
    its stat does, and a file's times cannot tell two writes within one clock tick apart."""

    def __init__(self, store: S3Store) -> None:
        self.store, self.location = store, store.location
        self._listed: dict[str, str] = {}  # key -> its ETag in the last listing that named it
        self._read: dict[str, tuple[str, str]] = {}  # key -> (the ETag listed when it was read, its text)

    def keys(self, prefix: str = "") -> list[str]:
        listed = self.store.versions(prefix)
        self._listed.update(listed)
        return sorted(listed)

    def read_text(self, key: str) -> str:
        version, cached = self._listed.get(key), self._read.get(key)
        if version is not None and cached is not None and cached[0] == version:
            return cached[1]
        text = self.store.read_text(key)
        if version is not None:
            self._read[key] = (version, text)
        return text

    def write_text(self, key: str, text: str) -> None:
        self._read.pop(key, None)
        self.store.write_text(key, text)

    def writer_alive(self, key: str) -> bool | None:
        return self.store.writer_alive(key)


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

    def journal(self, key: str) -> Journal:
        """Lines appended to ``key`` as they come (see the module's docstring); close() when done."""
        opener = getattr(self.store, "journal", None)
        self.written += 1
        return opener(f"{self.run_id}/{key}") if opener else _RewriteJournal(self, key)

    def lock(self) -> Any:
        opener = getattr(self.store, "lock", None)
        return opener(f"{self.run_id}/{LOCK_FILE}") if opener else _NoLock()

    def writer_alive(self) -> bool | None:
        probe = getattr(self.store, "writer_alive", None)
        return probe(f"{self.run_id}/{LOCK_FILE}") if probe else None


class _RewriteJournal:
    """Any other store: the whole file rewritten after each line."""

    def __init__(self, run: RunStore, key: str) -> None:
        self.run, self.key, self.lines = run, key, []

    def append(self, line: str) -> None:
        self.lines.append(line)
        self.run.store.write_text(f"{self.run.run_id}/{self.key}", "".join(self.lines))

    def close(self) -> None: ...


def effective_status(run: dict[str, Any], store: Any, now: datetime | None = None) -> str:
    """run.json's status as a reader should take it: "running" only while its writer lives.

    A directory's run is "interrupted" when nobody holds its lock file; any run (S3 too) when its
    heartbeat is older than STALE_AFTER_S. A run.json without a heartbeat (older runs) keeps its word."""
    status = str(run.get("status", ""))
    if status != "running":
        return status
    probe = getattr(store, "writer_alive", None)
    alive = probe() if probe is not None else None
    if alive is False:
        return "interrupted"
    if alive is None and run.get("heartbeat"):
        try:
            beat = datetime.fromisoformat(str(run["heartbeat"]))
        except ValueError:
            return status
        if beat.tzinfo is None:
            beat = beat.replace(tzinfo=timezone.utc)
        if (now or datetime.now(timezone.utc)) - beat > timedelta(seconds=STALE_AFTER_S):
            return "interrupted"
    return status
