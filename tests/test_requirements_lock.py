"""The benchmark pod's hash lock (specbench/requirements.lock, ``make lock``) pins exactly what
specbench/requirements.txt pins, each with the sha256 of at least one file, so pip's
``--require-hashes`` install in the pod repeats requirements.txt and refuses a swapped file."""

from __future__ import annotations

import re

import pytest

from conftest import ROOT
from scripts.lock_requirements import normalize, pins, render

REQUIREMENTS = ROOT / "specbench" / "requirements.txt"
LOCK = ROOT / "specbench" / "requirements.lock"
SHA256 = re.compile(r"--hash=sha256:([0-9a-f]{64})")


def locked(text: str) -> dict[str, tuple[str, str, tuple[str, ...]]]:
    """{name: (version, marker, hashes)} of a lock in pip's requirements format."""
    entries: dict[str, tuple[str, str, tuple[str, ...]]] = {}
    for block in re.split(r"\n(?=[A-Za-z])", "\n".join(line for line in text.splitlines() if not line.startswith("#"))):
        if not block.strip():
            continue
        head = block.split("\\")[0].strip()
        requirement, _, marker = head.partition(";")
        name, version = requirement.strip().split("==")
        entries[normalize(name)] = (version, marker.strip(), tuple(SHA256.findall(block)))
    return entries


def test_lock_pins_exactly_the_requirements_with_hashes():
    wanted = pins(REQUIREMENTS.read_text())
    lock = locked(LOCK.read_text())
    assert {name: (v, m) for name, (v, m, _) in lock.items()} == wanted
    for name, (_, _, hashes) in lock.items():
        assert hashes and len(set(hashes)) == len(hashes), name
    # Compiled packages carry a file per architecture (x86_64 and arm64 system nodes).
    assert len(lock["aiohttp"][2]) == 2 and len(lock["boto3"][2]) == 1


def test_a_changed_pin_is_noticed():
    text = REQUIREMENTS.read_text().replace("aiohttp==3.14.5", "aiohttp==3.14.4")
    assert pins(text) != {name: (v, m) for name, (v, m, _) in locked(LOCK.read_text()).items()}


def test_render_round_trips():
    wanted = {"aiohttp": ("3.14.5", ""), "async-timeout": ("5.0.1", 'python_version < "3.11"')}
    text = render(wanted, {"aiohttp": {"a" * 64, "b" * 64}, "async-timeout": {"c" * 64}})
    assert locked(text) == {
        "aiohttp": ("3.14.5", "", ("a" * 64, "b" * 64)),
        "async-timeout": ("5.0.1", 'python_version < "3.11"', ("c" * 64,)),
    }


def test_a_loose_requirement_is_refused():
    with pytest.raises(SystemExit, match="is not an exact pin"):
        pins("aiohttp>=3\n")
