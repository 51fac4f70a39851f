"""Which endpoint of a stored run is the baseline and what each speculative one serves (issue 33).

A run of the long-running services records it in its settings snapshot (``plan.deployment.variants``).
A run without one (``specbench run --endpoint ... --endpoint ...`` from a laptop) records what its flags
said (``plan.roles``: ``--role``, and the first ``--endpoint`` as the baseline) and what each endpoint's
``/metrics`` reported around every test case (``acceptance/<case>.json``): spec-decode counters with
per-position figures mean speculation with k positions. vLLM V1 creates that counter with one series per
position 0..k-1 (vllm/v1/spec_decode/metrics.py ``SpecDecodingStats.new``: ``[0] * num_spec_tokens``),
and the emulator does the same. Absence proves nothing (Neuron's 0.9.1 image reports no spec-decode
metrics at all, REFERENCE.md section 5), so an endpoint nothing names is unknown, never a baseline.
Pure functions over run.json's dict; ``RolesUnknown`` says in one line what to pass.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

BASELINE = "baseline"
METHODS = ("draft", "eagle3")
FLAG_HELP = "NAME=baseline, or NAME=METHOD:MODEL:K with METHOD draft or eagle3 (MODEL may be empty: unknown)"


class RolesUnknown(ValueError):
    """A run whose endpoints' roles cannot be told: the message names the endpoint and what to pass."""


@dataclass(frozen=True)
class Role:
    speculative: bool
    method: str = ""  # draft | eagle3 ("" for a baseline)
    draft_model: str = ""  # "" when not known
    k: int = 0
    source: str = ""  # where it was read: the settings snapshot, --role, the first --endpoint, /metrics

    def same_as(self, other: Role) -> bool:
        """The same service, where both say it (an unknown draft or method agrees with any)."""
        if self.speculative != other.speculative:
            return False
        if not self.speculative:
            return True
        known = lambda a, b: not a or not b or a == b  # noqa: E731
        return self.k == other.k and known(self.draft_model, other.draft_model) and known(self.method, other.method)

    def describe(self) -> str:
        if not self.speculative:
            return "baseline"
        return f"{self.method or 'speculative'} {self.draft_model or '(draft unknown)'} k={self.k}"

    def to_dict(self) -> dict[str, Any]:
        if not self.speculative:
            return {"role": BASELINE, "source": self.source}
        return {"role": "speculative", "method": self.method, "draft_model": self.draft_model, "k": self.k, "source": self.source}


def parse_role(text: str, flag: str = "--role") -> tuple[str, Role]:
    """``NAME=baseline`` or ``NAME=METHOD:MODEL:K``; ValueError naming the flag and the allowed forms."""
    name, sep, spec = text.partition("=")
    bad = ValueError(f"{flag} {text!r}: expected {FLAG_HELP}")
    if not sep or not name:
        raise bad
    if spec == BASELINE:
        return name, Role(False, source=flag)
    parts = spec.split(":")
    if len(parts) != 3 or parts[0] not in METHODS or not parts[2].isdigit() or int(parts[2]) < 1:
        raise bad
    return name, Role(True, parts[0], parts[1], int(parts[2]), flag)


def parse_roles(items: Iterable[str], flag: str = "--role") -> dict[str, Role]:
    roles: dict[str, Role] = {}
    for item in items:
        name, role = parse_role(item, flag)
        if name in roles and not roles[name].same_as(role):
            raise ValueError(f"{flag} {name}: given twice with different roles")
        roles[name] = role
    return roles


def _method(label: Any) -> str:
    return "eagle3" if label == "eagle3" else "draft"


def snapshot_roles(run: Mapping[str, Any]) -> dict[str, Role]:
    """What the settings snapshot says: a variant with a draft model speculates with its k."""
    deployment = (run.get("plan") or {}).get("deployment") or {}
    found = {}
    for v in deployment.get("variants") or []:
        if not isinstance(v, Mapping) or not v.get("name"):
            continue
        if v.get("draft_model") and v.get("num_speculative_tokens"):
            role = Role(True, str(v.get("method") or ""), str(v["draft_model"]), int(v["num_speculative_tokens"]), SNAPSHOT)
        else:
            role = Role(False, source=SNAPSHOT)
        found[str(v["name"])] = role
    return found


SNAPSHOT = "the settings snapshot"


def describe_roles(found: Mapping[str, Role]) -> str:
    """Each endpoint's role with where it was read; a run without a settings snapshot says so (its
    roles are what its flags and /metrics said, its deployment unrecorded), never silently."""
    text = "; ".join(f"{n} {r.describe()} ({r.source})" for n, r in found.items())
    if found and not any(r.source == SNAPSHOT for r in found.values()):
        text += (
            " [no settings snapshot in run.json: roles from the run's flags and /metrics; its deployment settings"
            " (TP, max_num_seqs, draft) are not recorded, local settings are assumed where needed]"
        )
    return text


def recorded_roles(run: Mapping[str, Any]) -> dict[str, Role]:
    """What ``specbench run`` recorded from its flags (``plan.roles``)."""
    found = {}
    for name, r in ((run.get("plan") or {}).get("roles") or {}).items():
        if not isinstance(r, Mapping):
            continue
        if r.get("role") == BASELINE:
            found[str(name)] = Role(False, source=str(r.get("source") or "run --role"))
        elif isinstance(r.get("k"), int) and r["k"] >= 1:
            found[str(name)] = Role(
                True, _method(r.get("method")), str(r.get("draft_model") or ""), r["k"], str(r.get("source") or "run --role")
            )
    return found


def metrics_roles(acceptance: Mapping[str, Any]) -> dict[str, Role]:
    """Endpoints whose /metrics reported per-position spec-decode figures: speculative, k = the positions.
    ``acceptance``: test case -> endpoint -> figures (runfiles.load_run's ``acceptance``)."""
    ks: dict[str, set[int]] = {}
    for by_endpoint in acceptance.values():
        if not isinstance(by_endpoint, Mapping):
            continue
        for name, figures in by_endpoint.items():
            positions = figures.get("per_position") if isinstance(figures, Mapping) else None
            if isinstance(positions, list) and positions:
                ks.setdefault(str(name), set()).add(len(positions))
    return {name: Role(True, "", "", max(found), "/metrics (spec-decode counters per position)") for name, found in ks.items()}


def endpoint_names(run: Mapping[str, Any], names: Iterable[str] = ()) -> list[str]:
    listed = [str(e.get("name")) for e in (run.get("plan") or {}).get("endpoints") or [] if isinstance(e, Mapping) and e.get("name")]
    return list(dict.fromkeys([*listed, *names]))


FIRST_ENDPOINT = "the first --endpoint"


def run_roles(
    run: Mapping[str, Any],
    acceptance: Mapping[str, Any],
    names: Iterable[str] = (),
    given: Mapping[str, Role] | None = None,
    flag: str = "--role",
) -> dict[str, Role]:
    """Every endpoint's role from the settings snapshot, ``given`` (the analysis command's ``--role``)
    and what the run recorded from its own ``--role``; /metrics adds k where they leave it out. Only
    when none of those names an endpoint is the first ``--endpoint`` of the run taken as the baseline
    (``run``'s documented rule), and not if its /metrics say it speculates. Two that disagree are
    refused (a recorded setting is never overridden); an endpoint nothing names raises RolesUnknown."""
    given = dict(given or {})
    snapshot, recorded, measured = snapshot_roles(run), recorded_roles(run), metrics_roles(acceptance)
    everyone = endpoint_names(run, names)
    for name in given:
        if name not in everyone:
            raise RolesUnknown(f"{flag} {name}: no such endpoint in this run ({', '.join(everyone) or 'none recorded'})")
    listed = endpoint_names(run)
    roles: dict[str, Role] = {}
    for name in everyone:
        hard = [r for r in (snapshot.get(name), given.get(name), recorded.get(name)) if r is not None and r.source != FIRST_ENDPOINT]
        seen = measured.get(name)
        if not hard and seen is None and listed and name == listed[0]:
            hard = [Role(False, source=FIRST_ENDPOINT)]
        claims = hard + ([seen] if seen is not None else [])
        if not claims:
            raise RolesUnknown(
                f"endpoint {name}: what it serves is not recorded (no settings snapshot, no --role, no spec-decode counters on its "
                f"/metrics): pass {flag} {name}=baseline or {flag} {name}=draft:MODEL:K"
            )
        first = claims[0]
        for other in claims[1:]:
            # /metrics says whether an endpoint speculates; its k only where nothing else gives one.
            agree = first.speculative == other.speculative if other is seen else first.same_as(other)
            if not agree:
                raise RolesUnknown(
                    f"endpoint {name}: {first.source} says {first.describe()} but {other.source} says {other.describe()}; "
                    + (
                        f"a recorded setting is not overridden: drop {flag} {name}"
                        if flag in (first.source, other.source)
                        else f"pass {flag} {name}=... to say which"
                    )
                )
        # The first claim wins; a later one only fills in a draft or method the first left unknown.
        draft = next((c.draft_model for c in claims if c.draft_model), "")
        method = next((c.method for c in claims if c.method), "") if first.speculative else ""
        roles[name] = Role(first.speculative, method, draft, first.k, first.source)
    return roles


def flag_roles(names: list[str], given: Mapping[str, Role], settings: Mapping[str, Any]) -> tuple[dict[str, Any], str]:
    """What ``specbench run`` records in run.json's ``plan.roles`` from its ``--role`` flags, and the
    endpoint its summary compares against. The first ``--endpoint`` is the baseline unless a ``--role``
    or the settings snapshot names another; a ``--role`` the snapshot contradicts is refused."""
    unknown = [name for name in given if name not in names]
    if unknown:
        raise ValueError(f"--role {unknown[0]}: no such --endpoint ({', '.join(names)})")
    snapshot = snapshot_roles({"plan": {"deployment": settings}})
    for name, role in given.items():
        if name in snapshot and not snapshot[name].same_as(role):
            raise ValueError(
                f"--role {name}: says {role.describe()} but --settings says {snapshot[name].describe()}; "
                "the recorded settings win: drop --role"
            )
    named = {**{n: r for n, r in snapshot.items() if n in names}, **given}
    baselines = [name for name in names if name in named and not named[name].speculative]
    if len([n for n in baselines if n in given]) > 1:
        raise ValueError(f"--role: one baseline at most (given: {', '.join(n for n in baselines if n in given)})")
    baseline = next((n for n in baselines if n in given), baselines[0] if baselines else names[0])
    recorded = {name: role.to_dict() for name, role in given.items()}
    if baseline not in named:  # the first --endpoint, as the summary has always taken it
        recorded[baseline] = Role(False, source=FIRST_ENDPOINT).to_dict()
    return recorded, baseline
