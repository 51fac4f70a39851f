"""The Kubernetes Pod Security Standards (baseline and restricted) as data, checked against pod specs.

Source: https://kubernetes.io/docs/concepts/security/pod-security-standards/ (the tables of the
"Baseline" and "Restricted" profiles, as of v1.35). Each rule names the doc's control, the fields it
reads and the values it allows; ``violations(pod)`` returns the controls a pod breaks at a level.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

LEVELS = ("privileged", "baseline", "restricted")

# Baseline "Capabilities": adding anything beyond these is forbidden.
BASELINE_CAPABILITIES = {
    "AUDIT_WRITE",
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "MKNOD",
    "NET_BIND_SERVICE",
    "SETFCAP",
    "SETGID",
    "SETPCAP",
    "SETUID",
    "SYS_CHROOT",
}
# Baseline "Sysctls": the safe set.
SAFE_SYSCTLS = {
    "kernel.shm_rmid_forced",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.tcp_syncookies",
    "net.ipv4.ping_group_range",
    "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
}
SELINUX_TYPES = {"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"}
# Restricted "Volume Types".
RESTRICTED_VOLUMES = {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim", "projected", "secret", "image"}


def containers(pod: dict) -> Iterator[dict]:
    """Every container the standards apply to: containers, initContainers, ephemeralContainers."""
    for key in ("containers", "initContainers", "ephemeralContainers"):
        yield from pod.get(key, [])


def _security(obj: dict) -> dict:
    return obj.get("securityContext") or {}


def _handlers(container: dict) -> Iterator[dict]:
    for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
        if probe in container:
            yield container[probe]
    yield from (container.get("lifecycle") or {}).values()


@dataclass(frozen=True)
class Rule:
    level: str  # the lowest level that enforces it
    control: str  # the doc's name of the control
    broken: Callable[[dict], bool]  # pod spec -> breaks it


def _any_container(test: Callable[[dict], bool]) -> Callable[[dict], bool]:
    return lambda pod: any(test(c) for c in containers(pod))


def _pod_or_containers(field: str, allowed: Callable[[Any], bool]) -> Callable[[dict], bool]:
    """The field, set at pod level or on a container, must be allowed wherever it is set."""

    def broken(pod: dict) -> bool:
        values = [_security(pod).get(field)] + [_security(c).get(field) for c in containers(pod)]
        return any(v is not None and not allowed(v) for v in values)

    return broken


def _required_everywhere(field: str, ok: Callable[[Any], bool]) -> Callable[[dict], bool]:
    """Set to an allowed value on every container, or at pod level and not overridden."""

    def broken(pod: dict) -> bool:
        pod_value = _security(pod).get(field)
        for c in containers(pod):
            value = _security(c).get(field, pod_value)
            if value is None or not ok(value):
                return True
        return False

    return broken


RULES: tuple[Rule, ...] = (
    # --- baseline ---
    Rule(
        "baseline",
        "HostProcess",
        _pod_or_containers("windowsOptions", lambda w: not w.get("hostProcess")),
    ),
    Rule("baseline", "Host Namespaces", lambda pod: any(pod.get(k) for k in ("hostNetwork", "hostPID", "hostIPC"))),
    Rule("baseline", "Privileged Containers", _any_container(lambda c: bool(_security(c).get("privileged")))),
    Rule(
        "baseline",
        "Capabilities",
        _any_container(lambda c: bool(set((_security(c).get("capabilities") or {}).get("add", [])) - BASELINE_CAPABILITIES)),
    ),
    Rule("baseline", "HostPath Volumes", lambda pod: any("hostPath" in v for v in pod.get("volumes", []))),
    Rule("baseline", "Host Ports", _any_container(lambda c: any(p.get("hostPort", 0) for p in c.get("ports", [])))),
    Rule(
        "baseline",
        "Host Probes / Lifecycle Hooks",
        _any_container(lambda c: any((h.get(kind) or {}).get("host") for h in _handlers(c) for kind in ("httpGet", "tcpSocket"))),
    ),
    Rule("baseline", "AppArmor", _pod_or_containers("appArmorProfile", lambda p: p.get("type") in ("RuntimeDefault", "Localhost"))),
    Rule(
        "baseline",
        "SELinux",
        _pod_or_containers("seLinuxOptions", lambda o: o.get("type", "") in SELINUX_TYPES and not o.get("user") and not o.get("role")),
    ),
    Rule("baseline", "/proc Mount Type", _any_container(lambda c: _security(c).get("procMount", "Default") != "Default")),
    Rule("baseline", "Seccomp", _pod_or_containers("seccompProfile", lambda p: p.get("type") in ("RuntimeDefault", "Localhost"))),
    Rule("baseline", "Sysctls", lambda pod: any(s["name"] not in SAFE_SYSCTLS for s in _security(pod).get("sysctls", []))),
    # --- restricted ---
    Rule("restricted", "Volume Types", lambda pod: any(not (set(v) - {"name"}) <= RESTRICTED_VOLUMES for v in pod.get("volumes", []))),
    Rule("restricted", "Privilege Escalation", _any_container(lambda c: _security(c).get("allowPrivilegeEscalation") is not False)),
    Rule("restricted", "Running as Non-root", _required_everywhere("runAsNonRoot", lambda v: v is True)),
    Rule("restricted", "Running as Non-root user", _pod_or_containers("runAsUser", lambda uid: uid != 0)),
    Rule(
        "restricted",
        "Seccomp (required)",
        _required_everywhere("seccompProfile", lambda p: p.get("type") in ("RuntimeDefault", "Localhost")),
    ),
    Rule(
        "restricted",
        "Capabilities (drop ALL)",
        _any_container(
            lambda c: (
                "ALL" not in (_security(c).get("capabilities") or {}).get("drop", [])
                or bool(set((_security(c).get("capabilities") or {}).get("add", [])) - {"NET_BIND_SERVICE"})
            )
        ),
    ),
)


def violations(pod: dict, level: str) -> list[str]:
    """The controls of ``level`` (and the levels below it) that the pod spec breaks."""
    rank = LEVELS.index(level)
    return [r.control for r in RULES if LEVELS.index(r.level) <= rank and r.broken(pod)]


def highest_level(pod: dict) -> str:
    return next(level for level in reversed(LEVELS) if not violations(pod, level))
