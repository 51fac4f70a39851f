"""``specbench predict --rank``: the candidates (instance type, LNC, TP, speculation) for the configured
target, refused where they cannot work, the others ranked by cost per million output tokens at each
load with the TP range of the profile's overheads, the SLOs and the Pareto front; ``--out DIR`` adds
the chart and the JSON. This module reads the configuration (config/catalog.py, serving_stacks.py,
prices.py) into what the pure modules take (specbench/analysis/candidates.py, tp_range.py, ranking.py;
specbench/outputs/ranking.py). commands/predict.py parses the flags and calls ``run``."""

from __future__ import annotations

import argparse
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from specbench.analysis import candidates as cand
from specbench.analysis import provenance, tp_range
from specbench.analysis import serving_model as sm
from specbench.analysis.ranking import Price, Slo, rank
from specbench.flags import ascii_float
from specbench.names import echo

# --- flag types (one line naming the flag, exit 2: specbench/flags.py) ------------------------------


def _list(text: str, parse, allowed: str) -> list:  # type: ignore[no-untyped-def]
    parts = [p.strip() for p in text.split(",")]
    if not text.strip() or any(not p for p in parts):
        raise argparse.ArgumentTypeError(f"{echo(text)}: expected {allowed}, comma-separated")
    try:
        return [parse(p) for p in parts]
    except (ValueError, argparse.ArgumentTypeError):
        raise argparse.ArgumentTypeError(f"{echo(text)}: expected {allowed}, comma-separated") from None


def _whole(low: int, high: int):  # type: ignore[no-untyped-def]
    def parse(p: str) -> int:
        if not p.isascii() or not p.isdigit() or not low <= int(p) <= high:
            raise ValueError(p)
        return int(p)

    return parse


def tp_list(text: str) -> list[int]:
    return _list(text, _whole(1, 256), "whole numbers 1-256 (logical NeuronCores per server)")


def lnc_list(text: str) -> list[int]:
    return _list(text, _whole(1, 2), "1 or 2 (physical cores per logical core)")


def k_list(text: str) -> list[int]:
    return _list(text, _whole(1, 64), "whole numbers 1-64 (speculative tokens; the baseline is always ranked too)")


def instance_list(text: str) -> list[str]:
    return _list(text, str, "instance types (e.g. trn2.48xlarge,trn2.3xlarge)")


def beta_range(text: str) -> tuple[float, float]:
    """``--tp-beta LO,HI`` (or one value, a fitted beta): the exponent of the overheads' TP dependence."""
    allowed = "BETA or LO,HI with -1 <= LO <= HI <= 2 (the overheads scale as (TP/TP_fit)^beta)"
    parts = text.split(",")
    try:
        values = [ascii_float(p.strip()) for p in parts]
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"{echo(text)}: expected {allowed}") from None
    if len(values) not in (1, 2) or not all(-1 <= v <= 2 for v in values) or values[0] > values[-1]:
        raise argparse.ArgumentTypeError(f"{echo(text)}: expected {allowed}")
    return values[0], values[-1]


def slo_ms(text: str) -> float:
    value = ascii_float(text)
    if not 0 < value <= 600_000:
        raise argparse.ArgumentTypeError(f"{echo(text)}: expected milliseconds > 0 (at most 600000)")
    return value


def reserve_gib(text: str) -> float:
    value = ascii_float(text)
    if not 0 <= value <= 64:
        raise argparse.ArgumentTypeError(
            f"{echo(text)}: expected GiB from 0 to 64 (HBM per rank kept for scratchpad, DMA rings, collectives)"
        )
    return value


DEFAULTS = {"tp_beta": tp_range.ASSUMED_BETA, "hbm_reserve_gib": cand.ASSUMED_SCRATCH_BYTES / cand.GIB}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``predict``'s ranking flags."""
    group = parser.add_argument_group("ranking (--rank)")
    group.add_argument(
        "--rank",
        action="store_true",
        help="rank the candidate deployments (instance type, LNC, TP, speculation) by cost per million output tokens "
        "at each load instead of predicting the configured one (docs/serving-model.md, Ranking)",
    )
    group.add_argument(
        "--rank-instances",
        type=instance_list,
        default=None,
        metavar="TYPES",
        help="instance types to rank (default: every type with chip figures in the serving model and a catalog entry)",
    )
    group.add_argument(
        "--rank-lnc", type=lnc_list, default=None, metavar="LNCS", help="LNC settings (default: neuron_nodes.logical_nc_config)"
    )
    group.add_argument(
        "--rank-tp", type=tp_list, default=None, metavar="TPS", help="TPs (default: every TP the Neuron scheduler allocates)"
    )
    group.add_argument(
        "--rank-k", type=k_list, default=None, metavar="KS", help="speculation lengths (default: serving.num_speculative_tokens)"
    )
    group.add_argument(
        "--rank-price",
        action="append",
        default=[],
        metavar="TYPE=USD",
        help="USD per node-hour of an instance type (default: the catalog's entry for the region and capacity mode, "
        "else the configured node's price scaled per chip)",
    )
    group.add_argument("--slo-tpot-ms", type=slo_ms, default=None, help="TPOT limit per request, ms (default: sweep.slo_tpot_ms)")
    group.add_argument("--slo-ttft-ms", type=slo_ms, default=None, help="TTFT limit per request, ms (default: sweep.slo_ttft_ms)")
    group.add_argument(
        "--tp-beta",
        type=beta_range,
        default=DEFAULTS["tp_beta"],
        metavar="LO,HI",
        help="the overheads' dependence on TP: x (TP/TP_fit)^beta for beta in [LO, HI] (default 0,1; one value: a fitted beta)",
    )
    group.add_argument(
        "--hbm-reserve-gib",
        type=reserve_gib,
        default=DEFAULTS["hbm_reserve_gib"],
        help="HBM per rank assumed for scratchpad, DMA rings and collectives, GiB (default 2; the runtime's micro-code is added)",
    )
    group.add_argument(
        "--out", default="", metavar="DIR", help="with --rank: also write DIR/pareto.png (the cost-latency chart) and DIR/ranking.json"
    )


# --- the configuration, read into the pure modules' inputs -----------------------------------------


def node_rules(instance_types: Sequence[str]) -> list[cand.NodeRules]:
    """NodeRules per instance type from config/catalog.py and config/serving_stacks.py; ValueError
    naming --rank-instances for a type the catalog or the serving model does not know."""
    from config import catalog, serving_stacks

    found = []
    for name in instance_types:
        instance = catalog.TRAINIUM_INSTANCES.get(name)
        if instance is None or name not in sm.HARDWARE:
            known = ", ".join(default_instances())
            raise ValueError(f"--rank-instances: {name!r} is not an instance type with chip figures and a catalog entry; allowed: {known}")
        stacks = tuple(s.id for s in serving_stacks.STACKS.values() if s.runs_on(name))
        found.append(cand.NodeRules(name, instance.lnc_options, instance.schedulable_device_counts, stacks))
    return found


def default_instances() -> list[str]:
    from config import catalog

    return [name for name in sm.HARDWARE if name in catalog.TRAINIUM_INSTANCES]


def parse_prices(items: Sequence[str], instance_types: Sequence[str]) -> dict[str, float]:
    """``--rank-price TYPE=USD``: a price within the type's plausible range (specbench/analysis/prices.py)."""
    from specbench.analysis import prices

    found = {}
    for item in items:
        name, sep, value = item.partition("=")
        try:
            usd = ascii_float(value.strip()) if sep else math.nan
        except argparse.ArgumentTypeError:
            usd = math.nan
        if not sep or name not in instance_types:
            raise ValueError(f"--rank-price {echo(item)}: expected TYPE=USD with TYPE one of {', '.join(instance_types)}")
        problem = prices.price_problem(usd, name)
        if problem or usd <= 0:
            raise ValueError(f"--rank-price {echo(item)}: {problem or 'is 0'}; allowed: a positive price, {prices.price_allowed(name)}")
        found[name] = usd
    return found


def rank_prices(
    config: Any, instance_types: Sequence[str], given: Mapping[str, float], configured: tuple[float | None, str]
) -> dict[str, Price]:
    """Per instance type: --rank-price, else (the configured type) the price predict uses, else the
    catalog's entry for the region and capacity mode, else the configured price scaled per chip
    ("a chip-hour costs about the same across Trainium2 sizes", REFERENCE.md section 7: an assumption,
    said so), else no price."""
    from config.prices import catalog_entry
    from specbench.analysis.prices import CHIPS

    nodes, region = config.neuron_nodes, config.env.region
    own, own_source = configured
    found = {}
    for name in instance_types:
        entry = catalog_entry(name, region, nodes.capacity_mode)
        if name in given:
            found[name] = Price(given[name], "--rank-price")
        elif name == nodes.instance_type:
            found[name] = Price(own, own_source)
        elif entry is not None:
            found[name] = Price(entry.per_hour, entry.describe(None))
        elif own is not None and name in CHIPS and nodes.instance_type in CHIPS:
            per_chip = own / CHIPS[nodes.instance_type]
            found[name] = Price(
                round(per_chip * CHIPS[name], 4),
                f"assumed: {nodes.instance_type}'s ${own:.2f} scaled per chip (${per_chip:.3f}/chip-hour; no catalog entry for "
                f"{name} in {region}, {nodes.capacity_mode}; set --rank-price {name}=USD)",
            )
        else:
            found[name] = Price(None, f"no price for {name} in {region} ({nodes.capacity_mode}); set --rank-price {name}=USD")
    return found


def fitted_deployment(base: sm.Deployment | None, calibration: provenance.Calibration) -> tuple[sm.Deployment | None, str]:
    """The deployment the profile was fitted on (a speculative one where measured) and a note when that
    is not one TP."""
    measured = list(calibration.deployments)
    if base is not None:
        chosen = base
    elif measured:
        chosen = next((d for d in measured if d.method), measured[0])
    else:
        return None, ""
    tps = sorted(Counter(d.tensor_parallel_size for d in measured))
    if len(tps) > 1:
        listed = ", ".join(map(str, tps))
        return chosen, f"the profile was fitted over TP {listed} as one: its overheads are taken as at TP {chosen.tensor_parallel_size}"
    return chosen, ""


RANK_FLAGS = ("rank_instances", "rank_lnc", "rank_tp", "rank_k", "rank_price", "slo_tpot_ms", "slo_ttft_ms", "out")


def misplaced(args: argparse.Namespace) -> str:
    """The first ranking flag given without --rank ("" when none is)."""
    if args.rank:
        return ""
    given = [name for name in RANK_FLAGS if getattr(args, name) not in (None, [], "")]
    given += [name for name in ("tp_beta", "hbm_reserve_gib") if getattr(args, name) != DEFAULTS[name]]
    return given[0] if given else ""


def run(
    args: argparse.Namespace,
    config: Any,
    deployment: sm.Deployment,
    profile: sm.Profile,
    calibration: provenance.Calibration,
    base: sm.Deployment | None,
    acceptance: Mapping[str, tuple[float, str]],
    workload: sm.Workload,
    price: float | None,
    price_source: str,
) -> list[str]:
    """The ranking's lines (and --out's files); ValueError (one line, naming the flag) on bad input."""
    from config import serving_stacks
    from specbench.jsonfile import dumps
    from specbench.outputs import ranking as out

    instances = args.rank_instances or default_instances()
    rules = node_rules(instances)
    if not deployment.method:
        raise ValueError("--rank: the deployment does not speculate (set serving.speculation_method and serving.num_speculative_tokens)")
    ks = args.rank_k or [deployment.k]
    speculations = [cand.Speculation(), *(cand.Speculation(deployment.method, deployment.draft, k) for k in dict.fromkeys(ks))]
    stack_methods = {s.id: s.method_ids for s in serving_stacks.STACKS.values()}
    reserve = cand.Reserve(scratch=round(args.hbm_reserve_gib * cand.GIB))
    space = cand.candidate_space(
        deployment.target,
        speculations,
        rules,
        stack_methods,
        deployment.max_num_seqs,
        config.serving.max_model_len,
        lncs=args.rank_lnc or [deployment.lnc],
        tps=args.rank_tp,
        reserve=reserve,
        preferred_stacks=(config.serving.stack,),
    )
    fitted_on, tp_note = fitted_deployment(base, calibration)
    fitted_tp = fitted_on.tensor_parallel_size if fitted_on is not None else deployment.tensor_parallel_size
    lo, hi = args.tp_beta
    source = tp_range.ASSUMED_SOURCE if (lo, hi) == tp_range.ASSUMED_BETA else f"--tp-beta {lo:g},{hi:g}"
    basis = tp_range.Basis(profile, tp_range.TPScaling(fitted_tp, lo, hi, source), calibration, fitted_on, acceptance, workload)
    loads = args.loads or list(config.sweep.concurrencies)
    figures = [f for c in space.candidates for f in tp_range.predicted_figures(c, basis, loads)]
    prices = rank_prices(config, instances, parse_prices(args.rank_price, instances), (price, price_source))
    tpot = (args.slo_tpot_ms if args.slo_tpot_ms is not None else config.sweep.slo_tpot_ms) / 1e3
    ttft = (args.slo_ttft_ms if args.slo_ttft_ms is not None else config.sweep.slo_ttft_ms) / 1e3
    slo = Slo(tpot, ttft)
    by_type = {r.instance_type: r for r in rules}
    shared = tp_range.shared_assumptions(basis) + [reserve.describe(lnc) for lnc in dict.fromkeys(args.rank_lnc or [deployment.lnc])]
    shared += [tp_note] if tp_note else []
    shared += [] if fitted_on is not None else [f"the profile records no deployment: taken as fitted at the configured TP {fitted_tp}"]
    report = out.RankReport(
        deployment.target,
        deployment.max_num_seqs,
        config.serving.max_model_len,
        (workload.prompt_tokens, workload.output_tokens),
        slo,
        rank(figures, prices, slo),
        space.refused,
        prices,
        [(c, cand.rank_memory(c, by_type[c.deployment.node_type], reserve)) for c in space.candidates],
        shared,
    )
    lines = out.render(report)
    if args.json:  # predict's --json: with --rank, the ranking's document
        try:
            Path(args.json).write_text(dumps(out.json_document(report), indent=2) + "\n", encoding="utf-8")
        except OSError as error:
            raise ValueError(f"--json {args.json}: cannot write ({error.strerror or error})") from None
        lines.append(f"written: {args.json}")
    if args.out:
        directory = Path(args.out)
        try:
            directory.mkdir(parents=True, exist_ok=True)
            (directory / "ranking.json").write_text(dumps(out.json_document(report), indent=2) + "\n", encoding="utf-8")
        except OSError as error:
            raise ValueError(f"--out {args.out}: cannot write ({error.strerror or error})") from None
        from specbench.outputs.ranking_chart import write_pareto_chart

        chart = write_pareto_chart(report.rankings, slo, directory)
        lines += [f"written: {directory / 'ranking.json'}"] + ([f"written: {chart}"] if chart else ["no chart: no candidate has a price"])
    return lines
