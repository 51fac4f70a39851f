"""The sweep controller's reads of S3 (specbench/results/store.py PollingReader): each poll lists
the sweep's objects with their ETags and fetches only what is new or changed since the last; what it
returns is always what the store holds at the listed ETag. On moto's S3 in-process."""

from __future__ import annotations

from typing import Any

import pytest

from specbench.outputs import sweep_controller
from specbench.results.store import LocalStore, PollingReader, S3Store
from tests import moto_aws

BUCKET, REGION = "specdecode-results", "us-east-2"


class CountingClient:
    """The S3 client, with its GetObject calls counted by key."""

    def __init__(self, client: Any) -> None:
        self.client, self.gets = client, []

    def get_object(self, **kwargs: Any) -> Any:
        self.gets.append(kwargs["Key"])
        return self.client.get_object(**kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)


@pytest.fixture
def s3(monkeypatch):
    moto_aws.offline_environment(monkeypatch)
    with moto_aws.mocked():
        yield CountingClient(moto_aws.bucket(BUCKET, REGION))


def _poll(reader: PollingReader, prefix: str) -> dict[str, str]:
    """What the controller does each step: list, then read every listed key."""
    return {key: reader.read_text(key) for key in reader.keys(prefix)}


def test_a_poll_fetches_only_what_is_new_or_changed_since_the_last(s3):
    store = S3Store(BUCKET, "results/", s3)
    for key in ("sweeps/s/p1/run.json", "sweeps/s/p1/records/a.jsonl", "sweeps/s/p2/run.json"):
        store.write_text(key, f"{key} v1")
    reader = PollingReader(store)
    assert _poll(reader, "sweeps/s/") == {k: f"{k} v1" for k in store.keys("sweeps/s/")}
    assert len(s3.gets) == 3
    s3.gets.clear()
    assert _poll(reader, "sweeps/s/") == {k: f"{k} v1" for k in store.keys("sweeps/s/")}
    assert s3.gets == []  # nothing changed: the listing alone
    # A pod appends a record (its journal PUTs the whole object again) and a new point lands.
    store.write_text("sweeps/s/p1/records/a.jsonl", "sweeps/s/p1/records/a.jsonl v2")
    store.write_text("sweeps/s/p3/run.json", "p3")
    seen = _poll(reader, "sweeps/s/")
    assert seen["sweeps/s/p1/records/a.jsonl"].endswith("v2") and seen["sweeps/s/p3/run.json"] == "p3"
    assert sorted(s3.gets) == ["results/sweeps/s/p1/records/a.jsonl", "results/sweeps/s/p3/run.json"]


def test_the_same_bytes_put_again_are_not_fetched_and_other_bytes_of_the_same_size_are(s3):
    store = S3Store(BUCKET, "", s3)
    store.write_text("k", "aaaa")
    reader = PollingReader(store)
    _poll(reader, "")
    store.write_text("k", "aaaa")  # a pod storing the same measurement again (a restarted controller's stage)
    s3.gets.clear()
    assert _poll(reader, "") == {"k": "aaaa"} and s3.gets == []
    store.write_text("k", "bbbb")
    assert _poll(reader, "") == {"k": "bbbb"} and s3.gets == ["k"]


def test_an_object_deleted_then_put_again_and_a_key_never_listed_are_fetched_anew(s3):
    store = S3Store(BUCKET, "", s3)
    store.write_text("a", "1")
    store.write_text("b", "2")
    reader = PollingReader(store)
    _poll(reader, "")
    s3.client.delete_object(Bucket=BUCKET, Key="a")
    assert _poll(reader, "") == {"b": "2"}
    store.write_text("a", "3")  # back, with other bytes
    s3.gets.clear()
    assert _poll(reader, "") == {"a": "3", "b": "2"} and s3.gets == ["a"]
    fresh = PollingReader(store)
    s3.gets.clear()
    assert fresh.read_text("b") == "2" and fresh.read_text("b") == "2" and s3.gets == ["b", "b"]  # never listed: no version to trust


def test_a_write_through_the_reader_is_read_back_as_written(s3):
    store = S3Store(BUCKET, "", s3)
    store.write_text("doc", "old")
    reader = PollingReader(store)
    _poll(reader, "")
    reader.write_text("doc", "new")
    assert reader.read_text("doc") == "new"
    assert reader.location == store.location and reader.writer_alive("doc") is None  # the rest is the store's


def test_the_controller_polls_s3_through_the_reader_and_a_directory_directly(s3, tmp_path):
    """run() wraps an S3Store; a LocalStore is read directly (a file read costs what its stat does)."""
    wrapped = []

    def step(api, store, *args):
        wrapped.append(type(store))
        return "every decision is made", sweep_controller.Outcome(sweep_controller.DONE, "done")

    for store in (S3Store(BUCKET, "", s3), LocalStore(tmp_path)):
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(sweep_controller, "step", step)
            sweep_controller.run(None, store, "s", None, log=lambda line: None)
    assert wrapped == [PollingReader, LocalStore]
