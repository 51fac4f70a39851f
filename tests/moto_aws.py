"""moto in-process, set up cheaply: a fresh moto state per test, boto3's service models loaded once
per test process.

moto's ``mock_aws`` replaces boto3's default session with none while it is active ("reset_boto3_session",
on by default: https://github.com/getmoto/moto/blob/master/docs/docs/configuration/index.rst), so every
``boto3.client`` inside it builds a new session, which reads the service's model JSON again (about
70 ms of CPU per client). Here one session serves every test: the state lives in moto's backends,
which ``mock_aws`` resets at each start, not in the clients. A client made from it before a mock
starts is still mocked: moto intercepts through a ``before-send`` handler it adds to botocore's
``BUILTIN_HANDLERS`` when imported, which every client made afterwards carries (moto 5.2.5,
moto/core/models.py, ``botocore_stubber`` and the note under ``patch_client``); this module imports
moto before it makes a session.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from typing import Any
from unittest import mock

import boto3
import moto

FAKE_CREDENTIALS = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}


@functools.cache
def session() -> boto3.session.Session:
    """The test process's one boto3 session, with fake credentials (no real ones can be found).
    Made after ``import moto`` above, so its clients carry moto's handler."""
    return boto3.session.Session(**FAKE_CREDENTIALS)


@functools.cache
def client(service: str, region: str) -> Any:
    """A client shared by the tests that ask for the same one: use it only inside ``mocked()``, and
    register nothing on its events (make your own from ``session()`` for that)."""
    return session().client(service, region_name=region)


@contextlib.contextmanager
def mocked() -> Iterator[None]:
    """A fresh moto state; ``boto3.client`` in the code under test uses the shared session too."""
    with moto.mock_aws(), mock.patch.object(boto3, "DEFAULT_SESSION", session()):
        yield


@functools.cache
def lend_session_to_moto() -> None:
    """moto lists regions with boto3 sessions of its own, and botocore reads a service's whole model
    for that, only to find its endpoint prefix (botocore/session.py, ``get_available_regions``):
    - moto's EC2 module, at import (CloudFormation's and SSM's backends import it too), with three
      new sessions (moto 5.2.5, moto/ec2/models/availability_zones_and_regions.py, the
      ``RegionsAndZonesBackend`` class body): three parses of EC2's model;
    - every backend after, with one session moto caches (moto/core/base_backend.py,
      ``AccountSpecificBackend.get_session``, lru_cache): one more parse per service used.
    Together about 1.1 s of CPU in each test process that uses EC2, with the garbage collector's
    passes over those models. Here ``session()`` stands in for both while they are made: it has the
    models loaded already, and the region lists do not depend on the session. ``boto3.Session`` and
    the modules' own ``Session`` are boto3's again after; whatever moto made already is left as is."""
    from moto.core import base_backend

    real = boto3.Session

    def shared_when_bare(*args: Any, **kwargs: Any) -> Any:
        return real(*args, **kwargs) if args or kwargs else session()

    boto3.Session = base_backend.Session = shared_when_bare  # type: ignore[misc]
    try:
        base_backend.AccountSpecificBackend.get_session()
        from moto.ec2.models import availability_zones_and_regions
    finally:
        boto3.Session = base_backend.Session = real  # type: ignore[misc]
    availability_zones_and_regions.Session = real  # type: ignore[attr-defined]


def bucket(name: str, region: str) -> Any:
    """Inside ``mocked()``: a new bucket ``name`` in ``region``, and the shared S3 client."""
    s3 = client("s3", region)
    s3.create_bucket(Bucket=name, CreateBucketConfiguration={"LocationConstraint": region})
    return s3


def offline_environment(monkeypatch: Any) -> None:
    """What the code under test finds in the environment: fake credentials, no profile and no
    endpoint override from the shell (either would point boto3 past moto)."""
    for key in ("AWS_PROFILE", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(key, raising=False)
    for key, value in FAKE_CREDENTIALS.items():
        monkeypatch.setenv(key.upper(), value)
