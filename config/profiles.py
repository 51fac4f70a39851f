"""Profiles: one setting (``env.profile``) that stands for a documented set of settings.

A profile's values are defaults, not overrides: a key given explicitly (cdk.json or ``-c``) wins.
So ``-c env.profile=rehearsal -c serving.draft_model=Qwen/Qwen3-1.7B`` is the rehearsal with the
reference's draft. Pure data and one pure function (tests/test_rehearsal.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

PROFILE_KEY = "env.profile"
REHEARSAL = "rehearsal"

# The rehearsal: the same stacks, serving stack, two services, benchmark Job, Lambda, dashboard and
# report as the reference run, on trn2.3xlarge nodes (1 Trainium2 chip: TP 4 at LNC 2 is one
# device, the most a 1-chip node can give a service). The two services cannot share one chip (each
# takes its whole device), so the node group runs two nodes, one service each; the sizes of the
# service pods follow from what one trn2.3xlarge offers next to its daemons and the model-cache Job
# (config/capacity.py: 11.9 vCPUs and ~119 GiB allocatable, 8 vCPUs and 32 GiB budgeted besides).
# Qwen3-8B with Qwen3-0.6B: one tokenizer family; ~16.4 GB + ~1.2 GB of BF16 weights and well
# under 1 GB of KV cache (1024 tokens x 4 sequences) in the chip's 96 GiB.
PROFILES: dict[str, dict[str, str]] = {
    REHEARSAL: {
        "neuron_nodes.instance_type": "trn2.3xlarge",
        "neuron_nodes.desired_size": "2",
        "neuron_nodes.max_size": "2",
        "neuron_nodes.root_volume_gib": "200",
        "serving.target_model": "Qwen/Qwen3-8B",
        "serving.draft_model": "Qwen/Qwen3-0.6B",
        "serving.tensor_parallel_size": "4",
        "serving.cpu_per_service": "3",
        "serving.memory_gib_per_service": "64",
        "serving.shm_gib": "16",
        "serving.startup_timeout_minutes": "120",
        "benchmark.suite_file": "builtin:rehearsal",
        "benchmark.output_tokens": "200",
        "benchmark.requests_per_test_case": "4",
        "results.dashboard_name": "SpecDecode-Rehearsal",
        # Plan estimates (preflight's run estimate, the sweep plan): unmeasured guesses for an 8B
        # model at TP 4 (the reference's 120 is for the 32B model), and the short suite's minutes.
        "sweep.compile_minutes_per_variant": "30",
        "sweep.measure_minutes_per_point": "5",
    },
}


def expand(context: Mapping[str, Any]) -> dict[str, Any]:
    """``context`` with the named profile's values under it; unchanged without a known profile
    (an unknown name is reported by the env rules)."""
    name = context.get(PROFILE_KEY)
    values = PROFILES.get(name.strip() if isinstance(name, str) else "", {})
    return {**values, **context}
