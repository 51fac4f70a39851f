"""The sweep section: its variants parsed, its rules, and its plan from the configuration
(config/validate.py's ``sweep_rules`` runs the rules; this module does not import it).

Off while ``sweep.variants`` is empty. When on, synth checks every field (one line per problem),
computes the plan (specbench/sweep/plan.py) from the Neuron capacity left beside the long-running
services, prints it, and refuses a plan above ``sweep.budget_node_hours``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import replace

from specbench.analysis import candidates as cand
from specbench.analysis import serving_model as sm
from specbench.prompts.suite import MAX_CLASS_WEIGHT, PROMPT_CLASSES, SuiteError, load_suite
from specbench.sweep import staged
from specbench.sweep.plan import Estimates, Packing, Room, SweepPlan, make_plan
from specbench.sweep.points import BASELINE, NAME, SweepVariant, loads, tp_name

from . import capacity, catalog, serving_stacks
from .errors import Problem
from .model import PlatformConfig
from .numbers import parse_float, parse_int
from .variants import service_variants

VARIANT_SHAPE = "NAME:DRAFT_MODEL:K or NAME:DRAFT_MODEL:K:METHOD, e.g. qwen17-k5:Qwen/Qwen3-1.7B:5"
# Native sidecar containers (initContainers with restartPolicy: Always): on by default since
# Kubernetes 1.29, stable in 1.33 (kubernetes.io/docs/concepts/workloads/pods/sidecar-containers/).
SIDECAR_MIN_VERSION = (1, 29)
# sweep.pod_layout: where a sweep pod's vLLM server runs (charts/sweep.py).
SERVER_CONTAINER, SIDECAR = "server-container", "sidecar"
POD_LAYOUTS = (SERVER_CONTAINER, SIDECAR)
# The measuring client beside each vLLM server in a sweep pod (charts/sweep.py).
CLIENT = capacity.Resources(cpu_millis=1000, memory_mib=4 * capacity.MIB_PER_GIB)
# How a sweep starts when sweep.start_on_deploy is false (charts/sweep.py): the Job's name is the sweep id.
SWEEP_START = (
    "start the sweep: kubectl -n <serving.namespace> create job sweep-$(date +%Y%m%d-%H%M) --from=cronjob/specbench-sweep "
    "(results under results/sweeps/<job name>/)"
)
# ... and with sweep.strategy=staged its controller (charts/sweep_control.py), named after the sweep's Job.
CONTROL_START = (
    "start its controller: kubectl -n <serving.namespace> create job <the sweep's job name>-control "
    "--from=cronjob/specbench-sweep-control (with sweep.start_on_deploy, the deploy starts both; docs/sweeps.md)"
)


def start_text(config: PlatformConfig) -> str:
    """What synth prints after the plan: how a sweep (and a staged sweep's controller) is started."""
    return SWEEP_START + (f"\n{CONTROL_START}" if staged_sweep(config) else "")


# Variant names become point ids (``<name>-last-r0p5``), which are run ids and DNS labels (<= 63).
MAX_NAME = 40
NAME_RULE = f"1-{MAX_NAME} lowercase letters, digits or '-', starting with a letter and ending alphanumeric"
MAX_CONCURRENCY = 1024
MAX_REQUEST_RATE = 1000.0


def enabled(config: PlatformConfig) -> bool:
    return bool(config.sweep.variants)


def staged_sweep(config: PlatformConfig) -> bool:
    """A configured sweep with sweep.strategy=staged: its controller is deployed (charts/sweep_control.py)."""
    return enabled(config) and config.sweep.strategy == staged.STAGED


def parse_variant(text: str, default_method: str) -> SweepVariant:
    """``NAME:DRAFT_MODEL:K[:METHOD]`` -> SweepVariant; ValueError says what is wrong with the text."""
    parts = [p.strip() for p in text.split(":")]
    if len(parts) not in (3, 4) or not all(parts):
        raise ValueError("is not NAME:DRAFT_MODEL:K[:METHOD]")
    try:
        k = parse_int(parts[2])
    except ValueError:
        raise ValueError(f"has K={parts[2]!r}, not a whole number") from None
    return SweepVariant(parts[0], parts[1], k, parts[3] if len(parts) == 4 else default_method)


def user_variants(config: PlatformConfig) -> list[SweepVariant]:
    """The variants of ``sweep.variants`` that parse (the others are reported by the rules)."""
    found = []
    for text in config.sweep.variants:
        try:
            found.append(parse_variant(text, config.serving.speculation_method))
        except ValueError:
            continue
    return found


def variant_tps(config: PlatformConfig) -> list[int]:
    """The TPs the variants are measured at, as SweepVariant.tp: 0 for serving.tensor_parallel_size
    (so a sweep without TP variants keeps its names, compile keys and documents)."""
    sizes = config.sweep.tensor_parallel_sizes
    if not sizes:
        return [0]
    serving = config.serving.tensor_parallel_size
    return list(dict.fromkeys(0 if tp == serving else tp for tp in sizes))


def sweep_variants(config: PlatformConfig) -> list[SweepVariant]:
    """The sweep's catalogue besides the services' baseline: the variants at the services' TP, then
    per other TP of ``sweep.tensor_parallel_sizes`` its baseline (``baseline-tp<N>``) and every variant
    (``<name>-tp<N>``): each its own unit, compile and devices."""
    mine = user_variants(config)
    found = list(mine) if 0 in variant_tps(config) else []
    for tp in (t for t in variant_tps(config) if t):
        found += [SweepVariant(tp_name(BASELINE, tp), tp=tp), *(replace(v, name=tp_name(v.name, tp), tp=tp) for v in mine)]
    return found


def method_problems(key: str, variant: SweepVariant, stack_id: str) -> Iterable[Problem]:
    """The one place a variant's method is checked: one the configured serving stack supports
    (config/serving_stacks.py; its k range is checked with the draft in config/validate.py)."""
    stack = serving_stacks.STACKS.get(stack_id)
    if stack is not None and variant.method not in stack.method_ids:
        yield Problem(
            key,
            variant.method,
            f"is not a speculation method of serving stack {stack_id} (variant {variant.name})",
            ", ".join(stack.method_ids),
        )


def variant_problems(config: PlatformConfig) -> Iterable[Problem]:
    """Shape, name, method and duplicates of each variant (draft and k: config/validate.py's
    ``speculation_problems``, as for the services, in ``sweep_rules``)."""
    key = "sweep.variants"
    services = {v.name: v.name for v in service_variants(config.serving)}  # baseline, speculative, extras
    seen: dict[str, str] = {}
    settings: dict[tuple[str, int, str], str] = {}
    for text in config.sweep.variants:
        try:
            variant = parse_variant(text, config.serving.speculation_method)
        except ValueError as err:
            yield Problem(key, text, str(err), VARIANT_SHAPE)
            continue
        if not NAME.match(variant.name) or len(variant.name) > MAX_NAME:
            yield Problem(key, variant.name, "is not a variant name", NAME_RULE)
        elif variant.name.startswith(BASELINE):
            yield Problem(key, variant.name, f"starts with {BASELINE!r}, the name of the sweep's own baseline", "another name")
        elif variant.name in services:
            yield Problem(
                key,
                variant.name,
                f"is the name of the long-running service {services[variant.name]}: its points' results would carry the same Variant",
                "a name no service has",
            )
        elif variant.name in seen:
            yield Problem(key, variant.name, "names two variants", "a distinct name per variant")
        seen[variant.name] = text
        yield from method_problems(key, variant, config.serving.stack)
        same = settings.get(variant.compile_key)
        if same is not None:
            yield Problem(key, text, f"measures the same draft, k and method as {same}", "each combination once")
        settings.setdefault(variant.compile_key, variant.name)


def load_problems(config: PlatformConfig) -> Iterable[Problem]:
    s = config.sweep
    for c in s.concurrencies:
        if not 1 <= c <= MAX_CONCURRENCY:
            yield Problem("sweep.concurrencies", c, "is out of range", f"1 to {MAX_CONCURRENCY}")
    if len(set(s.concurrencies)) != len(s.concurrencies):
        yield Problem("sweep.concurrencies", s.concurrencies, "lists a level twice", "distinct levels")
    for r in s.request_rates:
        if not 0.0 < r <= MAX_REQUEST_RATE:  # also catches nan
            yield Problem("sweep.request_rates", r, "is out of range", f"greater than 0, up to {MAX_REQUEST_RATE:g} requests/s")
    if len(set(s.request_rates)) != len(s.request_rates):
        yield Problem("sweep.request_rates", s.request_rates, "lists a rate twice", "distinct rates")
    # Two rates whose point ids coincide (format(rate, "g") keeps 6 significant digits).
    labels = {format(r, "g") for r in s.request_rates}
    if len(labels) != len(set(s.request_rates)):
        yield Problem("sweep.request_rates", s.request_rates, "has rates equal to 6 significant digits", "rates that differ")
    if s.request_rates and config.benchmark.engine == "llmperf":
        yield Problem(
            "sweep.request_rates",
            s.request_rates,
            "needs open-loop load, which the llmperf engine (benchmark.engine=llmperf) does not drive",
            "empty, or benchmark.engine=native",
            depends_on=("benchmark.engine",),
        )
    if s.variants and not s.concurrencies and not s.request_rates:
        yield Problem("sweep.concurrencies", (), "is empty and so is sweep.request_rates: the sweep has no load level", "1 or more levels")


def number_problems(config: PlatformConfig) -> Iterable[Problem]:
    s = config.sweep
    for field in ("slo_ttft_ms", "slo_tpot_ms", "compile_minutes_per_variant", "measure_minutes_per_point", "budget_node_hours"):
        value = getattr(s, field)
        if not (math.isfinite(value) and value > 0):
            yield Problem(f"sweep.{field}", value, "must be a number greater than 0", "> 0")
    if not (math.isfinite(s.start_minutes_per_variant) and 0 <= s.start_minutes_per_variant):
        yield Problem("sweep.start_minutes_per_variant", s.start_minutes_per_variant, "must be a number of minutes", ">= 0")
    yield from staged_problems(config)


MAX_MARGIN = 0.2


def suite_classes(config: PlatformConfig) -> set[str] | None:
    """The prompt classes of the sweep's suite; None when it does not load (reported by the suite rules)."""
    try:
        suite = load_suite(config.sweep.suite or config.benchmark.suite_file)
    except (SuiteError, OSError, ValueError):
        return None
    return {case.prompt_class for case in suite.test_cases}


def staged_problems(config: PlatformConfig) -> Iterable[Problem]:
    """sweep.strategy, sweep.class_weights and sweep.decision_margin (issue 27)."""
    s = config.sweep
    if s.strategy not in staged.STRATEGIES:
        yield Problem("sweep.strategy", s.strategy, "is not a sweep strategy", ", ".join(staged.STRATEGIES))
    if not (math.isfinite(s.decision_margin) and 0.0 <= s.decision_margin <= MAX_MARGIN):
        yield Problem("sweep.decision_margin", s.decision_margin, "is out of range", f"0 to {MAX_MARGIN:g} (a share of the objective)")
    try:
        weights = staged.parse_weights(s.class_weights)
    except ValueError as error:
        yield Problem("sweep.class_weights", s.class_weights, str(error), "CLASS:WEIGHT items, weights >= 0, e.g. code:3,qa:1")
        return
    odd = [item for item in s.class_weights if weight_problem(item.partition(":")[2])]
    if odd:  # float() took it ("1_0", Unicode digits, "1e308"): a plain number only, small enough to add up
        item = odd[0]
        yield Problem("sweep.class_weights", item, weight_problem(item.partition(":")[2]), WEIGHT_ALLOWED)
        return
    classes = suite_classes(config) if weights else None
    for name in weights:
        if classes is not None and name not in classes:
            yield Problem("sweep.class_weights", name, "is not a prompt class of the sweep's suite", ", ".join(sorted(classes)))
        elif classes is None and name not in PROMPT_CLASSES:
            yield Problem("sweep.class_weights", name, "is not a prompt class", ", ".join(PROMPT_CLASSES))


WEIGHT_ALLOWED = f"CLASS:WEIGHT items, each weight a plain number from 0 to {MAX_CLASS_WEIGHT:g}, e.g. code:3,qa:1"


def weight_problem(text: str) -> str:
    """Why a class weight's text is not a plain number from 0 to MAX_CLASS_WEIGHT ("" when it is)."""
    try:
        weight = parse_float(text)
    except ValueError as error:
        return f"the weight is not a plain number: {error}"
    return "" if 0 <= weight <= MAX_CLASS_WEIGHT else f"the weight is above {MAX_CLASS_WEIGHT:g} (weights are relative)"


def mix_weights(config: PlatformConfig) -> dict[str, float]:
    """The traffic mix of a validated configuration: sweep.class_weights, else the suite's
    ``class_weights``, else every class of the suite at weight 1."""
    if config.sweep.class_weights:
        return staged.parse_weights(config.sweep.class_weights)
    suite = load_suite(config.sweep.suite or config.benchmark.suite_file)
    if suite.class_weights:
        return dict(suite.class_weights)
    return {case.prompt_class: 1.0 for case in suite.test_cases}


def node_rules(config: PlatformConfig) -> cand.NodeRules | None:
    """specbench/analysis/candidates.py's rules of the Neuron node type (None: no chip figures)."""
    name = config.neuron_nodes.instance_type
    instance = catalog.TRAINIUM_INSTANCES.get(name)
    if instance is None or name not in sm.HARDWARE:
        return None
    stacks = tuple(s.id for s in serving_stacks.STACKS.values() if s.runs_on(name))
    return cand.NodeRules(name, instance.lnc_options, instance.schedulable_device_counts, stacks)


def hbm_problems(config: PlatformConfig) -> Iterable[Problem]:
    """Every TP of sweep.tensor_parallel_sizes holds the target's (and each draft's) weights and KV
    cache for serving.max_num_seqs x serving.max_model_len in HBM per rank (candidates.rank_memory,
    the rule ``predict --rank`` applies). Models without recorded geometry (serving_model.MODELS) are
    not checked. The TP rule itself is config/validate.py's ``tensor_parallel_problems``."""
    rules, s, n = node_rules(config), config.serving, config.neuron_nodes
    if rules is None or n.logical_nc_config not in rules.lnc_options:
        return
    per_device = rules.logical_cores_per_device(n.logical_nc_config)
    drafts = [("", "")] + list(dict.fromkeys((v.method, v.draft_model) for v in user_variants(config)))
    for tp in dict.fromkeys(config.sweep.tensor_parallel_sizes):
        if tp < 1 or tp % per_device or tp // per_device > rules.hardware.devices_per_node:
            continue  # not a whole number of devices of a node: the TP rule reports it
        for method, draft in drafts:
            known = s.target_model in sm.MODELS and (method != "draft" or draft in sm.MODELS) and method in sm.METHODS
            if not known:
                continue
            k = 1 if method else 0
            dep = sm.Deployment(s.target_model, method, draft, k, tp, n.logical_nc_config, s.max_num_seqs, rules.instance_type)
            memory = cand.rank_memory(cand.Candidate(dep, s.stack, s.max_model_len), rules)
            if not memory.fits:
                what = f"with {method} {draft}" if method else "without speculation"
                yield Problem(
                    "sweep.tensor_parallel_sizes",
                    tp,
                    f"does not fit {s.target_model} {what} in HBM per rank on {rules.instance_type}: {memory.describe()}",
                    f"a TP whose ranks hold it ({', '.join(map(str, fitting_tps(config, method, draft)))}), "
                    "or a smaller serving.max_num_seqs or serving.max_model_len",
                    depends_on=("serving.max_num_seqs", "serving.max_model_len", "sweep.variants"),
                )
                break


def fitting_tps(config: PlatformConfig, method: str = "", draft: str = "") -> list[int]:
    """The allocatable TPs whose ranks hold the target (and draft) with the configured batch and length."""
    rules, s, n = node_rules(config), config.serving, config.neuron_nodes
    if rules is None:
        return []
    out = []
    for tp in rules.allowed_tp(n.logical_nc_config):
        dep = sm.Deployment(s.target_model, method, draft, 1 if method else 0, tp, n.logical_nc_config, s.max_num_seqs, rules.instance_type)
        if cand.rank_memory(cand.Candidate(dep, s.stack, s.max_model_len), rules).fits:
            out.append(tp)
    return out


def tp_list_problems(config: PlatformConfig) -> Iterable[Problem]:
    sizes = config.sweep.tensor_parallel_sizes
    if len(set(sizes)) != len(sizes):
        yield Problem("sweep.tensor_parallel_sizes", sizes, "lists a TP twice", "distinct sizes")
    if sizes and sizes == (config.serving.tensor_parallel_size,):
        return  # the services' TP alone: the same sweep as without the setting
    if sizes and not config.sweep.variants:
        yield Problem(
            "sweep.tensor_parallel_sizes", sizes, "is set without sweep.variants: there is no sweep", "empty, or set sweep.variants"
        )


def sidecar_problems(config: PlatformConfig) -> Iterable[Problem]:
    if config.sweep.pod_layout not in POD_LAYOUTS:
        yield Problem("sweep.pod_layout", config.sweep.pod_layout, "is not a sweep pod layout", ", ".join(POD_LAYOUTS))
        return
    if config.sweep.pod_layout != SIDECAR:
        return
    major, minor = (int(p) for p in config.cluster.kubernetes_version.split(".")[:2])
    if (major, minor) < SIDECAR_MIN_VERSION:
        yield Problem(
            "cluster.kubernetes_version",
            config.cluster.kubernetes_version,
            "has no native sidecar containers, which the sweep pods use with sweep.pod_layout=sidecar",
            "1.29 or later, or sweep.pod_layout=server-container",
            depends_on=("sweep.variants", "sweep.pod_layout"),
        )


# --- capacity and the plan ---------------------------------------------------------------------------


def slots_per_node(config: PlatformConfig) -> tuple[int, ...] | None:
    """Sweep pods that fit each running Neuron node once the long-running services are placed
    (as many per node as fit, node after node); None when the shape is invalid (reported elsewhere)."""
    n, s = config.neuron_nodes, config.serving
    instance = catalog.TRAINIUM_INSTANCES.get(n.instance_type)
    if instance is None or n.logical_nc_config not in instance.lnc_options:
        return None
    service = capacity.service_request(instance, n.logical_nc_config, s.tensor_parallel_size, s.cpu_per_service, s.memory_gib_per_service)
    point = service + CLIENT
    room = capacity.allocatable(instance)
    fixed = capacity.DAEMONSET_BUDGET + capacity.MODEL_CACHE_JOB
    left = len(service_variants(s))
    slots = []
    for _ in range(n.desired_size):
        placed = max((k for k in range(left + 1) if (service * k + fixed).fits_in(room)), default=0)
        left -= placed
        used = service * placed + fixed
        slots.append(max((k for k in range(instance.neuron_devices + 1) if (used + point * k).fits_in(room)), default=0))
    return tuple(slots)


MAX_NODES = 64  # config/validate.py neuron_node_rules: the node group's ceiling


def sweep_pod_too_big(config: PlatformConfig) -> Problem:
    """No node count helps: one sweep pod (a service and its client) does not fit an otherwise empty
    node beside the daemons and the model-cache Job (trn2.3xlarge at the rehearsal's sizes)."""
    n, s = config.neuron_nodes, config.serving
    instance = catalog.TRAINIUM_INSTANCES[n.instance_type]
    room = capacity.allocatable(instance)
    fixed = capacity.DAEMONSET_BUDGET + capacity.MODEL_CACHE_JOB + CLIENT
    beside = f"does not leave room for a sweep pod (this service and its {CLIENT.cpu_millis // 1000}-vCPU, " + (
        f"{CLIENT.memory_mib // capacity.MIB_PER_GIB}-GiB client) on one {instance.name} beside its daemons and the model-cache Job"
    )
    spare_cpu = (room.cpu_millis - fixed.cpu_millis) // 1000
    if s.cpu_per_service > spare_cpu:
        return Problem("serving.cpu_per_service", s.cpu_per_service, beside, f"<= {spare_cpu} for a sweep on {instance.name}")
    spare_mib = room.memory_mib - fixed.memory_mib
    return Problem(
        "serving.memory_gib_per_service", s.memory_gib_per_service, beside, f"<= {spare_mib // 1024} for a sweep on {instance.name}"
    )


def nodes_for_a_slot(config: PlatformConfig) -> int:
    """The fewest running Neuron nodes that leave one sweep pod room beside the services."""
    for nodes in range(1, MAX_NODES + 1):
        if sum(slots_per_node(replace(config, neuron_nodes=replace(config.neuron_nodes, desired_size=nodes))) or ()) > 0:
            return nodes
    return MAX_NODES + 1  # a sweep pod that fits no node: plan_problems reports sweep_pod_too_big


def unit_request(config: PlatformConfig, tp: int) -> capacity.Resources:
    """One sweep pod at ``tp`` (0: the services'): its server asks for the devices of its TP and, for
    another TP than the services', their CPU and memory scaled by its share of their devices
    (rounded up; memory at least the in-memory /dev/shm plus 16 GiB, the smallest memory a service
    may have), beside its measuring client."""
    n, s = config.neuron_nodes, config.serving
    instance = catalog.TRAINIUM_INSTANCES[n.instance_type]
    service = capacity.service_request(instance, n.logical_nc_config, s.tensor_parallel_size, s.cpu_per_service, s.memory_gib_per_service)
    if tp:
        cpu, memory = scaled_service(config, tp)
        service = capacity.service_request(instance, n.logical_nc_config, tp, cpu, memory)
    return service + CLIENT


MIN_MEMORY_GIB = 16  # config/validate.py: serving.memory_gib_per_service is at least 16


def scaled_service(config: PlatformConfig, tp: int) -> tuple[int, int]:
    """(vCPUs, GiB) of a TP variant's server: the service's scaled by devices (``unit_request``)."""
    n, s = config.neuron_nodes, config.serving
    instance = catalog.TRAINIUM_INSTANCES[n.instance_type]
    per_device = instance.logical_cores_per_device(n.logical_nc_config)
    share = -(-tp // per_device) / max(-(-s.tensor_parallel_size // per_device), 1)
    return max(math.ceil(s.cpu_per_service * share), 1), max(math.ceil(s.memory_gib_per_service * share), s.shm_gib + MIN_MEMORY_GIB)


def free_rooms(config: PlatformConfig) -> tuple[Room, ...]:
    """Each running Neuron node's room for sweep pods once the long-running services are placed (as
    ``slots_per_node`` places them: as many per node as fit, node after node)."""
    n, s = config.neuron_nodes, config.serving
    instance = catalog.TRAINIUM_INSTANCES[n.instance_type]
    service = capacity.service_request(instance, n.logical_nc_config, s.tensor_parallel_size, s.cpu_per_service, s.memory_gib_per_service)
    room = capacity.allocatable(instance)
    fixed = capacity.DAEMONSET_BUDGET + capacity.MODEL_CACHE_JOB
    left, rooms = len(service_variants(s)), []
    for _ in range(n.desired_size):
        placed = max((k for k in range(left + 1) if (service * k + fixed).fits_in(room)), default=0)
        left -= placed
        used = service * placed + fixed
        rooms.append(Room(room.neuron_devices - used.neuron_devices, room.cpu_millis - used.cpu_millis, room.memory_mib - used.memory_mib))
    return tuple(rooms)


def packing(config: PlatformConfig) -> Packing | None:
    """The sweep's capacity for units of several sizes; None without TP variants (``slots`` units a wave)."""
    tps = variant_tps(config)
    if tps == [0]:
        return None
    instance = catalog.TRAINIUM_INSTANCES[config.neuron_nodes.instance_type]

    def room(r: capacity.Resources) -> Room:
        return Room(r.neuron_devices, r.cpu_millis, r.memory_mib)

    demand = tuple((tp, room(unit_request(config, tp))) for tp in sorted({0, *tps}))
    return Packing(free_rooms(config), demand, instance.neuron_devices)


def _plan_inputs(config: PlatformConfig) -> dict:
    s, n = config.sweep, config.neuron_nodes
    instance = catalog.TRAINIUM_INSTANCES[n.instance_type]
    devices = -(-config.serving.tensor_parallel_size // instance.logical_cores_per_device(n.logical_nc_config))
    return {
        "slots_per_node": slots_per_node(config) or (),
        "devices_per_unit": devices,
        "devices_per_node": instance.neuron_devices,
        "estimates": Estimates(s.compile_minutes_per_variant, s.start_minutes_per_variant, s.measure_minutes_per_point),
        "precompiled": precompiled_keys(config),
        "packing": packing(config),
    }


def precompiled_keys(config: PlatformConfig) -> list[tuple[str, int, str]]:
    """The compile keys whose graphs the long-running services put in the bucket."""
    method = config.serving.speculation_method
    return [(v.draft_model, v.num_speculative_tokens, method if v.draft_model else "") for v in service_variants(config.serving)]


def config_of(v: SweepVariant) -> staged.Config:
    return staged.Config(tp=v.tp) if v.is_baseline else staged.Config(v.draft_model, v.k, v.method, v.tp)


def candidates(config: PlatformConfig) -> list[staged.Config]:
    return [config_of(v) for v in sweep_variants(config)]


def stage_one_variants(config: PlatformConfig) -> list[SweepVariant]:
    """The staged sweep's first stage besides the baseline (specbench/sweep/staged.py ``stage_one``),
    in the order stage_one lists it (the Job's units, and their waves, follow it)."""
    chosen = staged.stage_one(candidates(config), [staged.Config(*key) for key in precompiled_keys(config)])
    by_config = {config_of(v): v for v in sweep_variants(config)}
    return [by_config[c] for c in chosen if c in by_config]


def grid_plan(config: PlatformConfig, price_per_node_hour: float | None = None) -> SweepPlan:
    """Every variant at every load (the grid strategy's Job)."""
    s = config.sweep
    return make_plan(
        sweep_variants(config), loads(s.concurrencies, s.request_rates), price_per_node_hour=price_per_node_hour, **_plan_inputs(config)
    )


def plan_slots(config: PlatformConfig) -> int | Packing:
    """What a stage's waves are cut by: the packing of units of several TPs, else the slot count."""
    inputs = _plan_inputs(config)
    return inputs["packing"] or sum(inputs["slots_per_node"])


def sweep_plan(config: PlatformConfig, price_per_node_hour: float | None = None) -> SweepPlan:
    """The plan of the Job synth builds (call only on a validated config with a sweep and a free
    slot): the grid, or with sweep.strategy=staged its first stage; dollars with a price
    (config/cost.py ``node_price``, the setting results.node_price_per_hour: cost imports the loader, which runs these rules,
    so the price comes from the caller)."""
    s = config.sweep
    if s.strategy != staged.STAGED:
        return grid_plan(config, price_per_node_hour)
    return make_plan(
        stage_one_variants(config), loads(s.concurrencies, s.request_rates), price_per_node_hour=price_per_node_hour, **_plan_inputs(config)
    )


def first_job(config: PlatformConfig) -> tuple[str, int, float]:
    """The configured sweep as the dashboard's top row plans it: ("none", 0, 0.0) without one, else
    the strategy and its first Job's points and node-hours (the grid; with staged, stage 1)."""
    if not enabled(config):
        return "none", 0, 0.0
    plan = sweep_plan(config)
    return config.sweep.strategy, plan.points, plan.node_hours


def staged_cost(config: PlatformConfig) -> staged.StagedCost:
    """Node-hours of the staged strategy (stage 1, expected, worst case) beside the grid's."""
    s, inputs = config.sweep, _plan_inputs(config)
    slots = inputs["slots_per_node"]
    nodes = sum(1 for k in slots if k > 0)
    return staged.staged_cost(
        candidates(config),
        len(loads(s.concurrencies, s.request_rates)),
        inputs["packing"] or sum(slots),
        [staged.Config(*key) for key in inputs["precompiled"]],
        inputs["estimates"],
        nodes,
    )


def stage_costing(config: PlatformConfig) -> tuple[Estimates, int, list[staged.Config]]:
    """What ``specbench sweep next`` prices a proposed stage with: the minutes per unit and point,
    the nodes that hold a slot, and the configurations whose graphs the services compiled."""
    inputs = _plan_inputs(config)
    nodes = sum(1 for k in inputs["slots_per_node"] if k > 0)
    return inputs["estimates"], max(nodes, 1), [staged.Config(*key) for key in inputs["precompiled"]]


def plan_text(config: PlatformConfig, price_per_node_hour: float | None = None) -> str:
    """What synth and ``specbench plan`` print: the Job's plan, then both strategies' node-hours."""
    from specbench.sweep.plan import render

    text = render(sweep_plan(config, price_per_node_hour))
    cost = staged_cost(config)

    def money(hours: float) -> str:
        return f" (${hours * price_per_node_hour:,.0f})" if price_per_node_hour else ""

    chosen = ", ".join(v.name if v.is_baseline else f"{v.name} (k = {v.k})" for v in stage_one_variants(config))
    lines = [
        f"strategy {config.sweep.strategy}" + (" (this Job is stage 1)" if config.sweep.strategy == staged.STAGED else ""),
        f"  grid:   {cost.grid:.1f} node-hours{money(cost.grid)}",
        f"  staged: stage 1 {cost.stage_one:.1f} node-hours{money(cost.stage_one)} [baseline, {chosen}, baseline again]; "
        f"expected {cost.expected:.1f}{money(cost.expected)} (stage 1 and one wave); "
        f"worst case {cost.worst:.1f}{money(cost.worst)} (one wave a stage until every variant is measured)",
    ]
    rehearsal = f"REHEARSAL (env.profile={config.env.profile}): a plan for the rehearsal's nodes and models\n" if config.env.profile else ""
    return rehearsal + text + "\n" + "\n".join(lines)


def plan_problems(config: PlatformConfig) -> Iterable[Problem]:
    slots = slots_per_node(config)
    if slots is None:
        return
    inputs = ("neuron_nodes.instance_type", "serving.tensor_parallel_size", "serving.cpu_per_service", "serving.memory_gib_per_service")
    n = config.neuron_nodes
    if sum(slots) < 1 and nodes_for_a_slot(config) > MAX_NODES:
        yield sweep_pod_too_big(config)
        return
    if sum(slots) < 1:
        services = len(service_variants(config.serving))
        yield Problem(
            "neuron_nodes.desired_size",
            n.desired_size,
            f"leaves no room for a sweep pod beside the {services} long-running services ({n.instance_type})",
            f">= {nodes_for_a_slot(config)} (and neuron_nodes.max_size with it)",
            depends_on=inputs,
        )
        return
    pack = packing(config)
    if pack is not None:
        for tp in variant_tps(config):
            if tp and not pack.fits([tp]):
                need = pack.of(tp)
                gib = need.memory_mib // capacity.MIB_PER_GIB
                yield Problem(
                    "sweep.tensor_parallel_sizes",
                    tp,
                    f"makes a sweep pod ({need.devices} devices, {need.cpu_millis / 1000:g} vCPU, {gib} GiB with its client; CPU "
                    "and memory are the service's scaled by devices) that fits no running Neuron node's free room",
                    "a TP whose pod fits a node, more nodes, or a smaller serving.cpu_per_service / serving.memory_gib_per_service",
                    depends_on=inputs,
                )
                return
    plan = sweep_plan(config)
    budget = config.sweep.budget_node_hours
    # The staged strategy's budget is its worst case: every variant measured, one wave a stage.
    needed = staged_cost(config).worst if config.sweep.strategy == staged.STAGED else plan.node_hours
    what = "staged plan's worst case of" if config.sweep.strategy == staged.STAGED else "plan's"
    if needed > budget:
        yield Problem(
            "sweep.budget_node_hours",
            budget,
            f"is below the {what} {needed:.1f} node-hours ({len(plan.waves)} waves of up to {plan.slots} pods on "
            f"{plan.nodes} node(s), {plan.wall_hours:.1f} h; `specbench plan` shows them)",
            f">= {math.ceil(needed)}, or fewer variants or load levels, or more nodes",
            depends_on=("sweep.variants", "sweep.concurrencies", "sweep.request_rates", "neuron_nodes.desired_size", *inputs),
        )
