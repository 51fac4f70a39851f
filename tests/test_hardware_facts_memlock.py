"""The hardware-facts Job records the probe container's locked-memory limit (RLIMIT_MEMLOCK, what
`ulimit -l` shows), which older Neuron runtimes needed raised; recorded, not judged."""

from __future__ import annotations

import resource

from specbench.hardware import facts as facts_script

EXPECT = {"devices_per_node": 16, "lnc": 2, "requested": 8}


def _shown(value: int) -> int | str:
    return "unlimited" if value == resource.RLIM_INFINITY else value


def test_the_probe_records_this_processs_own_memlock_limit():
    soft, hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    facts = facts_script.collect("node-a", "server-container", 8)
    assert facts["container"]["memlock"] == {"soft": _shown(soft), "hard": _shown(hard)}
    assert "memlock" not in facts["errors"]


def test_an_unlimited_limit_is_written_as_unlimited_and_a_finite_one_in_bytes(monkeypatch):
    monkeypatch.setattr(facts_script.resource, "getrlimit", lambda _: (65536, resource.RLIM_INFINITY))
    assert facts_script.collect("node-a", "sidecar", 8)["container"]["memlock"] == {"soft": 65536, "hard": "unlimited"}


def test_an_unreadable_limit_is_unknown_not_a_contradiction(monkeypatch):
    def refuse(_):
        raise OSError(1, "Operation not permitted")

    monkeypatch.setattr(facts_script.resource, "getrlimit", refuse)
    facts = facts_script.summary(facts_script.collect("node-a", "server-container", 8), **EXPECT)
    assert facts["container"]["memlock"] is None
    assert "memlock: getrlimit(RLIMIT_MEMLOCK): [Errno 1] Operation not permitted" in facts["unknown"]
    assert not any("memlock" in p for p in facts["problems"])
