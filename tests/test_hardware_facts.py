"""The hardware-facts check (specbench/hardware/facts.py): the pure check on sample outputs,
the collector against real files standing in for /sys, /dev and neuron-ls, the gate's exit codes,
and the Job and gate as the sweep chart renders them."""

from __future__ import annotations

import json
import stat
import sys

import pytest
from netpol import Pod, allowed
from pss import violations

from charts import benchmark_spec, hardware_facts, serving_plan
from charts.code import RUN_MODULE, ZIP
from charts.network import network_policies
from charts.sweep import sweep_objects, sweep_spec
from config import load_config
from conftest import BUCKET
from specbench.hardware import facts as facts_script

# `neuron-ls --json-output` as a public Neuron plugin's tests keep it verbatim (trn1.2xlarge, tools
# 2.28.23.0): an array of devices; connected_to is null on a one-device instance.
TRN1_2XLARGE = [
    {
        "neuron_device": 0,
        "bdf": "0000:00:1e.0",
        "cpu_affinity": "0-7",
        "numa_node": "-1",
        "connected_to": None,
        "nc_count": 2,
        "memory_size": 34359738368,
        "neuroncore_ids": [0, 1],
        "neuron_processes": [],
    }
]
# The shape on a trn2.48xlarge as the probe sees 8 of its 16 devices (peers as in the Neuron docs'
# trn2 table: 4 NeuronLink peers per device).
TRN2_PROBE = [
    {"neuron_device": i, "bdf": f"cc:{i:02x}.0", "connected_to": [(i + 1) % 16, (i + 3) % 16, (i + 4) % 16, (i + 12) % 16], "nc_count": 4}
    for i in range(8)
]
HEADER = "instance-type: trn2.48xlarge\ninstance-id: i-aabbccdd123456789\nlogical-neuroncore-config: 2\n+----+\n"
EXPECT = {"devices_per_node": 16, "lnc": 2, "requested": 8}


def good_facts(**change) -> dict:
    facts = {
        "node": "ip-10-0-2-1.ec2.internal",
        "layout": "server-container",
        "requested_devices": 8,
        "node_devices": 16,
        "neuron_ls": TRN2_PROBE,
        "neuron_ls_header": {"instance-type": "trn2.48xlarge", "logical-neuroncore-config": "2"},
        "driver_version": "2.24.7.0",
        "runtime_version": "2.28.23.0",
        "tools_version": "2.26.14.0",
        "container": {"uid": 0, "cap_eff": "0000000000000000", "seccomp": "2"},
        "dev_neuron": {"visible": [f"/dev/neuron{i}" for i in range(8)], "openable": [f"/dev/neuron{i}" for i in range(8)], "refused": {}},
        "errors": {},
    }
    facts.update(change)
    return facts


def test_facts_as_assumed_pass():
    assert facts_script.problems(good_facts(), **EXPECT) == []
    assert facts_script.unknowns(good_facts()) == []


@pytest.mark.parametrize(
    "change, line",
    [
        ({"node_devices": 4}, "devices: the node has 4 Neuron devices, the project assumes 16"),
        (
            {"neuron_ls_header": {"logical-neuroncore-config": "1"}},
            "lnc: neuron-ls reports logical-neuroncore-config 1, the project assumes 2",
        ),
        (
            {"dev_neuron": {"visible": [], "openable": [], "refused": {}}, "layout": "sidecar"},
            "visibility: a container asking for 8 devices as the sidecar layout does sees 0 /dev/neuron* (every capability "
            "dropped, RuntimeDefault seccomp)",
        ),
        (
            {
                "dev_neuron": {
                    "visible": ["/dev/neuron0"] * 8,
                    "openable": ["/dev/neuron0"] * 7,
                    "refused": {"/dev/neuron7": "Permission denied"},
                }
            },
            "visibility: the container sees 8 /dev/neuron* but cannot open 1: /dev/neuron7 (Permission denied)",
        ),
        (
            {"container": {"uid": 0, "cap_eff": "00000000a80425fb", "seccomp": "2"}},
            "container: the probe ran with capabilities 00000000a80425fb, not with every capability dropped",
        ),
        (
            {"container": {"uid": 0, "cap_eff": "0000000000000000", "seccomp": "0"}},
            "container: the probe ran in seccomp mode 0, not the RuntimeDefault filter (2)",
        ),
        (
            {"neuron_ls": [{**TRN2_PROBE[0], "connected_to": None}, *TRN2_PROBE[1:]]},
            "topology: neuron-ls shows devices 0 with no NeuronLink peer",
        ),
    ],
    ids=["device-count", "lnc", "invisible", "not-openable", "capabilities", "seccomp", "topology"],
)
def test_each_contradicting_fact_gives_one_line_naming_it(change, line):
    assert facts_script.problems(good_facts(**change), **EXPECT) == [line]


def test_a_fact_that_could_not_be_read_is_reported_not_judged():
    facts = good_facts(node_devices=None, neuron_ls_header={}, driver_version=None, errors={"node_devices": "absent"})
    assert facts_script.problems(facts, **EXPECT) == []
    assert facts_script.unknowns(facts) == [
        "node_devices: absent",
        "lnc: neuron-ls printed no logical-neuroncore-config line",
        "driver_version: not readable in the container",
    ]


def test_the_documented_json_shape_and_the_announced_replacement_both_parse():
    assert facts_script._device_list(TRN1_2XLARGE) == TRN1_2XLARGE
    assert facts_script._device_list({"neuron_devices": TRN1_2XLARGE, "instance": {}}) == TRN1_2XLARGE
    one = facts_script.summary(good_facts(neuron_ls=TRN1_2XLARGE), **{**EXPECT, "requested": 1})
    assert one["topology"] == {"0": None}  # one device: no peer, and nothing to judge


@pytest.fixture
def node(tmp_path, monkeypatch):
    """Real files for what the probe reads: the node's sysfs, the container's /dev, neuron-ls."""
    sysfs, dev, bin_dir = tmp_path / "sys", tmp_path / "dev", tmp_path / "bin"
    for d in (sysfs, dev, bin_dir):
        d.mkdir()
    for i in range(16):
        (sysfs / f"neuron{i}").mkdir()
    for i in range(8):
        (dev / f"neuron{i}").write_bytes(b"")
    (dev / "neuron_other").write_bytes(b"")  # not a device node name
    (tmp_path / "version").write_text("2.24.7.0\n")
    neuron_ls = bin_dir / "neuron-ls"
    neuron_ls.write_text(
        f"#!{sys.executable}\nimport sys\nprint({json.dumps(json.dumps(TRN2_PROBE))} if '--json-output' in sys.argv else {HEADER!r})\n"
    )
    neuron_ls.chmod(neuron_ls.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setattr(facts_script, "SYSFS_DEVICES", str(sysfs))
    monkeypatch.setattr(facts_script, "DEV", str(dev))
    monkeypatch.setattr(facts_script, "DRIVER_VERSION", str(tmp_path / "version"))
    monkeypatch.setattr(facts_script, "NEURON_LS", (str(neuron_ls),))
    return tmp_path


def test_the_collector_reads_every_fact_from_real_files(node):
    facts = facts_script.collect("node-a", "server-container", 8)
    assert facts["node_devices"] == 16 and facts["neuron_ls"] == TRN2_PROBE
    assert facts["neuron_ls_header"] == {
        "instance-type": "trn2.48xlarge",
        "instance-id": "i-aabbccdd123456789",
        "logical-neuroncore-config": "2",
    }
    assert facts["driver_version"] == "2.24.7.0"
    assert facts["dev_neuron"]["visible"] == [str(node / "dev" / f"neuron{i}") for i in range(8)]
    assert facts["dev_neuron"]["openable"] == facts["dev_neuron"]["visible"]


def test_a_device_the_container_cannot_open_is_counted(node):
    # A node that cannot be opened read-write, even by root: a directory in its place.
    (node / "dev" / "neuron3").unlink()
    (node / "dev" / "neuron3").mkdir()
    facts = facts_script.collect("node-a", "server-container", 8)
    assert len(facts["dev_neuron"]["visible"]) == 8 and len(facts["dev_neuron"]["openable"]) == 7
    assert facts["dev_neuron"]["refused"] == {str(node / "dev" / "neuron3"): "Is a directory"}
    visibility = [p for p in facts_script.problems(facts, **EXPECT) if p.startswith("visibility: ")]
    assert visibility == [f"visibility: the container sees 8 /dev/neuron* but cannot open 1: {node}/dev/neuron3 (Is a directory)"]


def test_without_neuron_ls_the_fact_is_unknown(node, monkeypatch):
    monkeypatch.setattr(facts_script, "NEURON_LS", (str(node / "missing"),))
    facts = facts_script.collect("node-a", "server-container", 8)
    assert facts["neuron_ls"] is None and facts["errors"]["neuron_ls"].startswith("neuron-ls --output-format json: exit -1")


def test_the_probe_reports_this_machines_own_capabilities_and_seccomp(node):
    """Here the tests run with capabilities and without a seccomp filter: the probe must say so."""
    status = dict(line.split(":\t", 1) for line in open("/proc/self/status").read().splitlines() if ":\t" in line)
    facts = facts_script.summary(facts_script.collect("node-a", "server-container", 8), **EXPECT)
    assert facts["container"]["cap_eff"] == status["CapEff"].strip() and facts["container"]["seccomp"] == status["Seccomp"].strip()
    flagged = [p for p in facts["problems"] if p.startswith("container: ")]
    assert len(flagged) == (status["CapEff"].strip() != "0000000000000000") + (status["Seccomp"].strip() != "2")


def test_collect_writes_the_facts_then_the_gate_passes_or_stops_the_sweep(node, tmp_path, capsys, monkeypatch):
    # The restricted container's /proc/self/status: no capability, seccomp filter mode.
    (tmp_path / "status").write_text("Name:\tpython3\nCapEff:\t0000000000000000\nSeccomp:\t2\n")
    monkeypatch.setattr(facts_script, "PROC_STATUS", str(tmp_path / "status"))
    out = tmp_path / "facts.json"
    argv = ["--devices-per-node", "16", "--lnc", "2", "--requested", "8"]
    assert facts_script.main(["collect", *argv, "--node", "node-a", "--layout", "server-container", "--out", str(out)]) == 0
    written = json.loads(out.read_text())
    assert written["problems"] == [] and written["expected"] == {"devices_per_node": 16, "lnc": 2, "requested_devices": 8}
    assert capsys.readouterr().out.splitlines()[-1].startswith("hardware facts of node-a: as assumed; unknown: ")
    gate = tmp_path / "gate"
    gate.mkdir()
    assert facts_script.main(["check", *argv, str(gate)]) == facts_script.NO_FACTS
    (gate / "node-a.json").write_text(out.read_text())
    assert facts_script.main(["check", *argv, str(gate)]) == 0
    # The gate judges afresh: a node whose facts contradict the assumptions stops the sweep, one line each.
    (gate / "node-b.json").write_text(json.dumps(good_facts(node="node-b", node_devices=8)))
    capsys.readouterr()
    assert facts_script.main(["check", *argv, str(gate)]) == facts_script.MISMATCH
    assert capsys.readouterr().err == "hardware facts of node-b: devices: the node has 8 Neuron devices, the project assumes 16\n"


def test_the_dashboard_text_names_each_node_and_its_verdict():
    from specbench.outputs.dashboard import hardware_facts_markdown

    text = hardware_facts_markdown([facts_script.summary(good_facts(node_devices=8), **EXPECT), {"node": "node-z", "error": "not JSON"}])
    lines = text.splitlines()
    assert lines[0] == "### Hardware facts (first start)"
    assert lines[1].startswith("- `ip-10-0-2-1.ec2.internal` (**contradicts the project's assumptions: sweeps stop**): 8 devices, LNC 2")
    assert lines[2] == "  - devices: the node has 8 Neuron devices, the project assumes 16" and lines[-1] == "- node-z: not JSON"


# --- the Job and the gate as rendered --------------------------------------------------------------

TWO_NODES = {"neuron_nodes.desired_size": 2, "neuron_nodes.max_size": 2}


@pytest.fixture(scope="module", params=["server-container", "sidecar"])
def rendered(request):
    config = load_config(
        {**TWO_NODES, "sweep.variants": "q17-k5:Qwen/Qwen3-1.7B:5", "sweep.start_on_deploy": "true", "sweep.pod_layout": request.param}, {}
    )
    plan = serving_plan(config, BUCKET)
    objects = sweep_objects(sweep_spec(config, plan, benchmark_spec(config, plan)))
    facts = next(o for o in objects if o["metadata"]["name"].startswith("hardware-facts-"))
    sweep = [o for o in objects if o["kind"] == "Job"][-1]
    return request.param, facts, sweep


def test_the_exit_codes_agree():
    """The FailJob rules name the module's own codes (charts/hardware_facts.py imports them)."""
    assert (hardware_facts.MISMATCH, hardware_facts.NO_FACTS) == (facts_script.MISMATCH, facts_script.NO_FACTS) == (4, 5)


def test_the_probe_asks_for_devices_as_the_sweep_layout_does(rendered):
    layout, facts, sweep = rendered
    pod, sweep_pod = facts["spec"]["template"]["spec"], sweep["spec"]["template"]["spec"]
    (probe,) = [c for c in [*pod.get("initContainers", []), *pod["containers"]] if c["name"] == "probe"]
    (server,) = [c for c in [*sweep_pod["initContainers"], *sweep_pod["containers"]] if c["name"] == "vllm"]
    assert probe["resources"]["limits"]["aws.amazon.com/neuron"] == server["resources"]["limits"]["aws.amazon.com/neuron"] == "8"
    assert probe["securityContext"] == server["securityContext"] and probe["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    for key in ("affinity", "tolerations", "schedulerName", "serviceAccountName"):
        assert pod[key] == sweep_pod[key]
    command = probe["command"]
    assert command[command.index("--layout") + 1] == layout
    assert command[command.index("--requested") + 1] == "8" and command[command.index("--lnc") + 1] == "2"
    if layout == "sidecar":
        assert probe in pod["initContainers"] and probe["restartPolicy"] == "Always" and "--then-wait" in command
        assert [c["name"] for c in pod["containers"]] == ["upload"]
    else:
        assert [c["name"] for c in pod["containers"]] == ["probe", "upload"]
        assert [c["name"] for c in pod["initContainers"]] == ["fetch-code"]
    (upload,) = [c for c in pod["containers"] if c["name"] == "upload"]
    assert f'"s3://{BUCKET}/results/hardware-facts/$NODE_NAME.json"' in upload["command"][2]
    assert violations(pod, "baseline") == []
    assert violations({**pod, "initContainers": [], "containers": [upload], "volumes": pod["volumes"]}, "restricted") == []


def test_a_contradicting_fact_fails_the_sweep_job_at_once(rendered):
    _, _, sweep = rendered
    pod = sweep["spec"]["template"]["spec"]
    names = [c["name"] for c in pod["initContainers"]]
    assert names[:4] == ["fetch-code", "wait-for-model-cache", "fetch-hardware-facts", "check-hardware-facts"]
    check = pod["initContainers"][3]
    # The module of the zip the pod's first init container checked (charts/code.py).
    assert check["command"][:6] == ["python", "-c", RUN_MODULE, ZIP, "specbench.hardware.facts", "check"]
    assert check["command"][-1] == "/gate" and {"name": "specbench-code", "mountPath": "/code", "readOnly": True} in check["volumeMounts"]
    assert sweep["spec"]["podFailurePolicy"] == {
        "rules": [
            {"action": "FailJob", "onExitCodes": {"containerName": n, "operator": "In", "values": [4, 5]}}
            for n in ("fetch-hardware-facts", "check-hardware-facts")
        ]
    }
    gate_only = {**pod, "initContainers": pod["initContainers"][2:4], "containers": [], "volumes": pod["volumes"]}
    assert violations(gate_only, "restricted") == []


def test_the_facts_pod_reaches_s3_and_not_instance_metadata(rendered):
    _, facts, _ = rendered
    labels = facts["spec"]["template"]["metadata"]["labels"]
    pod = Pod("facts", "specdecode", labels, ip="10.0.2.60")
    policies = list(network_policies("specdecode", 8000))
    assert allowed(policies, pod, "Egress", "52.219.100.1", 443)
    assert not allowed(policies, pod, "Egress", "169.254.169.254", 80)
