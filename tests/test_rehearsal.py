"""The rehearsal profile (issue 36): trn2.3xlarge in the catalog, `env.profile=rehearsal` expanding to
its documented settings under the explicit ones, the fit rules on a one-chip node, and every output
of a rehearsal run saying so."""

from __future__ import annotations

import json

import pytest

from config import ConfigError, capacity, catalog, load_config, profiles
from specbench.analysis import aggregate
from specbench.outputs import dashboard, report
from specbench.results import runfiles
from specbench.results.store import LocalStore, RunStore
from tests import runs

REHEARSAL = {"env.profile": "rehearsal"}


def problems(context: dict) -> list[str]:
    with pytest.raises(ConfigError) as err:
        load_config(context, {})
    return str(err.value).splitlines()


def test_trn2_3xlarge_is_one_chip_of_four_logical_cores_at_lnc_2():
    one = catalog.TRAINIUM_INSTANCES["trn2.3xlarge"]
    assert (one.neuron_devices, one.physical_cores_per_device, one.vcpus, one.memory_gib) == (1, 8, 12, 128)
    assert one.logical_cores(2) == 4 and one.logical_cores(1) == 8
    # A one-device node: the scheduler extension can place only that device.
    assert one.schedulable_device_counts == (1,)
    room = capacity.allocatable(one)
    assert (room.cpu_millis, room.neuron_devices) == (11900, 1)


def test_the_profile_expands_to_its_settings_and_explicit_ones_win():
    config = load_config(REHEARSAL, {})
    assert config.env.profile == "rehearsal"
    assert config.neuron_nodes.instance_type == "trn2.3xlarge"
    assert (config.serving.target_model, config.serving.draft_model) == ("Qwen/Qwen3-8B", "Qwen/Qwen3-0.6B")
    assert config.serving.tensor_parallel_size == 4
    assert config.benchmark.suite_file == "builtin:rehearsal"
    assert config.results.dashboard_name == "SpecDecode-Rehearsal"
    # The reference run's settings stay what they are without the profile.
    assert load_config({}, {}).neuron_nodes.instance_type == "trn2.48xlarge"
    explicit = load_config({**REHEARSAL, "serving.draft_model": "Qwen/Qwen3-1.7B", "neuron_nodes.max_size": 3}, {})
    assert explicit.serving.draft_model == "Qwen/Qwen3-1.7B" and explicit.neuron_nodes.max_size == 3
    assert explicit.neuron_nodes.instance_type == "trn2.3xlarge"


def test_every_profile_value_is_a_setting_that_differs_from_the_default():
    """A profile value for a key that is no setting would be dropped silently; one equal to the
    default documents nothing."""
    from config.loader import all_keys

    defaults = load_config({}, {})
    for name, values in profiles.PROFILES.items():
        for key, value in values.items():
            assert key in all_keys(), (name, key)
            section, field = key.split(".")
            assert str(getattr(getattr(defaults, section), field)) != value, (name, key)


def test_an_unknown_profile_is_refused_with_the_allowed_names():
    assert problems({"env.profile": "rehersal"}) == ["config error: env.profile='rehersal': is not a profile; allowed: rehearsal, or empty"]


def test_one_chip_holds_one_service_so_the_two_services_need_two_nodes():
    assert problems({**REHEARSAL, "neuron_nodes.max_size": 1, "neuron_nodes.desired_size": 1}) == [
        "config error: neuron_nodes.max_size=1: fits 1 service(s) (1 per node: 1 devices, 3 vCPU, 64 GiB each), but 2 are "
        "configured; allowed: >= 2 (or smaller services, or fewer variants)"
    ]


def test_tensor_parallelism_beyond_one_chip_is_refused():
    assert problems({**REHEARSAL, "serving.tensor_parallel_size": 8}) == [
        "config error: serving.tensor_parallel_size=8: exceeds the 4 logical NeuronCores of one trn2.3xlarge; allowed: a "
        "multiple of 4 up to 4 on trn2.3xlarge at LNC=2"
    ]


def test_the_reference_pod_sizes_do_not_fit_a_trn2_3xlarge():
    lines = problems({"neuron_nodes.instance_type": "trn2.3xlarge", "serving.tensor_parallel_size": 4})
    assert lines == [
        "config error: serving.cpu_per_service=90: does not fit one trn2.3xlarge next to its daemons and the model-cache Job; allowed: <= 3"
    ]


def test_the_settings_snapshot_records_the_profile():
    from charts import serving_plan
    from charts.spec import settings_snapshot

    config = load_config(REHEARSAL, {})
    snapshot = settings_snapshot(config, serving_plan(config, "bucket"), "rehearsal", ["counting"])
    assert snapshot["profile"] == "rehearsal"
    assert snapshot["serving"]["instance_type"] == "trn2.3xlarge"
    default = load_config({}, {})
    assert "profile" not in settings_snapshot(default, serving_plan(default, "bucket"), "reference", ["counting"])


def rehearsal_summary(tmp_path, profile: str = "rehearsal") -> aggregate.RunSummary:
    store = RunStore(LocalStore(tmp_path), "run-1")
    run = runs.write_run(store)
    deployment = run["plan"]["deployment"]
    deployment["profile"] = profile
    deployment["serving"].update(target_model="Qwen/Qwen3-8B", tensor_parallel_size=4, instance_type="trn2.3xlarge")
    store.write("run.json", json.dumps(run))
    files = runfiles.load_run(store)
    return aggregate.summarize_run(files.run, files.records, files.acceptance, resamples=100)


def test_a_rehearsal_report_and_dashboard_say_rehearsal(tmp_path):
    summary = rehearsal_summary(tmp_path)
    note = "REHEARSAL (Qwen/Qwen3-8B at TP 4 on trn2.3xlarge): this run proves the pipeline end to end"
    markdown = report.render_markdown(summary, {})
    assert markdown.startswith("# REHEARSAL: Speculative decoding benchmark: run run-1")
    assert note in markdown
    html = report.render_html(summary, {})
    assert "<title>REHEARSAL: specbench report" in html and "<h1>REHEARSAL: " in html and note in html
    settings = runs.dashboard_settings(name="SpecDecode-Rehearsal")
    header = dashboard.header_markdown(summary, settings).replace("\\", "")
    assert header.startswith("# REHEARSAL: Speculative decoding on Trainium2: SpecDecode-Rehearsal")
    assert note in header


def test_a_run_of_the_reference_settings_says_nothing_of_a_rehearsal(tmp_path):
    summary = rehearsal_summary(tmp_path, profile="")
    assert "REHEARSAL" not in report.render_markdown(summary, {})
    assert aggregate.rehearsal_note(summary.settings) == ""


# --- the rehearsal's manifests pass the default's chart checks ------------------------------------
# The same test functions as the default's (parity, schemas, Pod Security, NetworkPolicies), called
# on the rehearsal's rendered dist/; node fit is its own (two one-chip nodes, not one node of 16).


@pytest.fixture(scope="module")
def rehearsal_config():
    return load_config(REHEARSAL, {})


@pytest.fixture(scope="module")
def rehearsal_dist(rehearsal_config, tmp_path_factory):
    import yaml

    from charts.dist import write_dist

    files = write_dist(rehearsal_config, "specdecode-data-bucket", tmp_path_factory.mktemp("rehearsal-dist"))
    return {f.name: [o for o in yaml.safe_load_all(f.read_text()) if o] for f in files}


def test_rehearsal_services_keep_parity_and_pass_the_schemas(rehearsal_dist, rehearsal_config):
    import test_serving_charts as charts

    charts.test_baseline_and_speculative_deployments_differ_only_in_speculation(rehearsal_dist, rehearsal_config)
    charts.test_services_differ_only_in_name_and_labels(rehearsal_dist, rehearsal_config)
    spec = charts._find(rehearsal_dist, "Deployment", rehearsal_config.serving.speculative_service)
    args = spec["spec"]["template"]["spec"]["containers"][0]["args"]
    assert json.loads(args[args.index("--speculative-config") + 1])["model"] == "/models/Qwen/Qwen3-0.6B"
    for version in catalog.SUPPORTED_KUBERNETES_VERSIONS:
        charts.test_every_object_passes_strict_schema_validation(rehearsal_dist, version)


def test_rehearsal_pods_meet_pod_security_and_the_network_policies(rehearsal_dist, rehearsal_config):
    import test_network_policies as netpols
    import test_pod_security as pss

    pss.test_namespace_enforces_baseline_and_warns_and_audits_restricted(rehearsal_dist, rehearsal_config)
    pss.test_every_pod_meets_the_level_its_namespace_enforces(rehearsal_dist)
    pss.test_serving_pods_miss_restricted_only_by_running_as_root(rehearsal_dist)
    pods, policies = netpols.pods.__wrapped__(rehearsal_dist), netpols.policies.__wrapped__(rehearsal_dist)
    netpols.test_every_pod_the_charts_render_is_known(pods, rehearsal_config)
    netpols.test_selectors_match_exactly_the_pods_they_mean(pods, policies, rehearsal_config)
    netpols.test_only_the_benchmark_reaches_the_serving_port(pods, policies, rehearsal_config)
    netpols.test_no_pod_of_the_namespace_accepts_unsolicited_traffic(pods, policies)


def test_each_rehearsal_service_with_the_cache_job_fits_one_trn2_3xlarge(rehearsal_dist, rehearsal_config):
    """Summed from the rendered pod specs: a service, the model-cache Job (it may land beside either)
    and the daemons fit one node; the node group holds every service's devices."""
    import test_serving_charts as charts

    from manifests import pod_requests

    instance = catalog.TRAINIUM_INSTANCES[rehearsal_config.neuron_nodes.instance_type]
    room = capacity.allocatable(instance)
    pods = dict(charts._neuron_pods(rehearsal_dist))
    services = [rehearsal_config.serving.baseline_service, rehearsal_config.serving.speculative_service]
    (cache,) = [name for name in pods if name not in services]
    for name in services:
        total = {k: pod_requests(pods[name])[k] + pod_requests(pods[cache]).get(k, 0.0) for k in ("cpu", "memory")}
        devices = pod_requests(pods[name])["aws.amazon.com/neuron"]
        assert devices == 1 == room.neuron_devices
        assert devices * instance.logical_cores_per_device(rehearsal_config.neuron_nodes.logical_nc_config) == 4
        assert total["cpu"] * 1000 + capacity.DAEMONSET_BUDGET.cpu_millis <= room.cpu_millis
        assert total["memory"] + capacity.DAEMONSET_BUDGET.memory_mib * 2**20 <= room.memory_mib * 2**20
    assert rehearsal_config.neuron_nodes.desired_size * room.neuron_devices >= len(services)


# --- the rehearsal's CDK synthesis passes the default's template checks ----------------------------
# `python app.py -c env.profile=rehearsal` (tests/conftest.py, rehearsal_assembly); cfn-lint runs on
# its templates with the default's and the variant's (tests/test_lint.py).


def test_rehearsal_synth_passes_cdk_nag_with_reasoned_acknowledgments(rehearsal_assembly):
    """The fixture's synth exited 0, so cdk-nag (wired in unconditionally, stacks/app.py) found
    nothing the acknowledgments do not cover; no validation plugin reported a failure, and each
    acknowledgment the rehearsal's constructs carry gives its reason."""
    import test_lint as lint

    conclusions = lint.validation_conclusions(rehearsal_assembly)
    assert conclusions and all(conclusion == "success" for conclusion in conclusions.values()), conclusions
    lint.test_every_acknowledgment_gives_a_real_reason(rehearsal_assembly)
    platform = json.loads((rehearsal_assembly.outdir / "SpecDecodePlatform.template.json").read_text())
    launch_templates = [r for r in platform["Resources"].values() if r["Type"] == "AWS::EC2::LaunchTemplate"]
    types = {lt["Properties"]["LaunchTemplateData"].get("InstanceType") for lt in launch_templates}
    assert "trn2.3xlarge" in types, types


def test_preflight_checks_the_rehearsal_instance_and_its_two_nodes():
    """Offerings and quota are checked for the target's instance type and node counts (account.py)."""
    from specbench.preflight import target

    config = load_config(REHEARSAL, {})
    t = target.build_target(config, REHEARSAL, manifest=None)
    assert (t.neuron_type, t.neuron_desired, t.neuron_max) == ("trn2.3xlarge", 2, 2)
    assert t.run_hours == pytest.approx((45 + 30 + 5) / 60)


def test_cfn_lint_skips_its_instance_type_rule_only_for_types_it_does_not_list():
    """cfn-lint's E3628 checks a launch template's instance type against its own per-region lists;
    the skip (stacks/neuron_nodes.py) must go as soon as cfn-lint lists the type."""
    from pathlib import Path

    import cfnlint

    from stacks.neuron_nodes import CFN_LINT_UNLISTED_TYPES, cfn_lint_metadata

    enum = Path(cfnlint.__file__).parent / "data" / "schemas" / "extensions" / "aws_ec2_instance" / "instancetype_enum.json"
    listed = json.loads(enum.read_text())
    assert "trn2.48xlarge" in json.dumps(listed["us-east-2"])
    for name in CFN_LINT_UNLISTED_TYPES:
        assert name not in json.dumps(listed["us-east-2"]), f"cfn-lint lists {name} now: drop it from CFN_LINT_UNLISTED_TYPES"
    assert cfn_lint_metadata("trn2.48xlarge") is None
    assert cfn_lint_metadata("trn2.3xlarge") == {"config": {"ignore_checks": ["E3628"]}}


def test_a_rehearsal_sweep_plan_says_rehearsal():
    from config.sweep import plan_text

    context = {"sweep.variants": "q06-k5:Qwen/Qwen3-0.6B:5", "neuron_nodes.max_size": 3, "neuron_nodes.desired_size": 3}
    rehearsal = load_config({**REHEARSAL, **context, "serving.cpu_per_service": 2}, {})
    assert plan_text(rehearsal).startswith("REHEARSAL (env.profile=rehearsal)")
    assert "REHEARSAL" not in plan_text(load_config(context, {}))


def test_a_sweep_pod_that_fits_no_node_names_the_pod_size_not_a_node_count():
    """A sweep pod is a service plus a 1-vCPU client: at 3 vCPUs a service leaves it no room on a
    trn2.3xlarge however many nodes run (the rule used to ask for >= 65 nodes, above the ceiling)."""
    context = {**REHEARSAL, "sweep.variants": "q06-k5:Qwen/Qwen3-0.6B:5", "neuron_nodes.max_size": 3, "neuron_nodes.desired_size": 3}
    assert problems(context) == [
        "config error: serving.cpu_per_service=3: does not leave room for a sweep pod (this service and its 1-vCPU, 4-GiB client) "
        "on one trn2.3xlarge beside its daemons and the model-cache Job; allowed: <= 2 for a sweep on trn2.3xlarge"
    ]
