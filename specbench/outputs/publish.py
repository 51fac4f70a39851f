"""A stored run read back: its records and acceptance figures, the console summary, and publishing
to CloudWatch from what is stored (so publishing can always be repeated, and nothing published
is missing from S3)."""

from __future__ import annotations

import json
import logging
import statistics
from datetime import datetime, timezone
from typing import Any

from specbench import jsonfile
from specbench.analysis import cost, loads, stream_acceptance
from specbench.outputs import cloudwatch
from specbench.results import runfiles, validity
from specbench.results.records import RequestRecord
from specbench.results.runfiles import load_acceptance, load_records  # noqa: F401 - read through here by callers
from specbench.results.store import RunStore

log = logging.getLogger(__name__)


def reliable_stream_records(records: list[RequestRecord], run: dict[str, Any] | None) -> list[RequestRecord]:
    """The speculative services' records of every test case whose stream passed the self-check against
    the baseline (the run's first endpoint), with k from the deployment snapshot; none without run.json."""
    plan = (run or {}).get("plan") or {}
    endpoints = [e.get("name") for e in plan.get("endpoints") or [] if isinstance(e, dict)]
    if not endpoints:
        return []
    deployment = plan.get("deployment") or {}
    k_of = {v.get("name"): v.get("num_speculative_tokens") for v in deployment.get("variants") or [] if isinstance(v, dict)}
    kept = []
    for test_case in sorted({r.test_case for r in records}):
        mine = [r for r in records if r.test_case == test_case]
        baseline = [r for r in mine if r.variant == endpoints[0]]
        for variant in endpoints[1:]:
            theirs = [r for r in mine if r.variant == variant]
            if theirs and stream_acceptance.self_check(baseline, theirs, k_of.get(variant)).ok:
                kept += theirs
    return kept


def run_datums(
    records: list[RequestRecord], acceptance: dict[str, dict[str, dict[str, Any]]], run: dict[str, Any] | None = None
) -> list[dict[str, Any]]:
    """Every per-request value, plus acceptance per (endpoint, test case) where it was measured: from
    /metrics, and from the stream where it passed its self-check. Impossible records and figures
    (specbench.results.validity) are left out, whoever read them."""
    records, rejected = validity.screen(records, runfiles.max_tokens_of(run or {}))
    if rejected:
        log.warning("%d impossible records not published, first: %s", len(rejected), rejected[0][1])
    acceptance = {
        case: {variant: figures for variant, figures in by_endpoint.items() if not validity.acceptance_problem(figures)}
        for case, by_endpoint in acceptance.items()
    }
    datums = cloudwatch.build_datums(records)
    datums += cloudwatch.build_datums(reliable_stream_records(records, run), metrics=(cloudwatch.STREAM_ACCEPTANCE,))
    first_start: dict[tuple[str, str], float] = {}
    prompt_class: dict[str, str] = {}
    for record in records:
        key = (record.variant, record.test_case)
        first_start[key] = min(first_start.get(key, record.started_at), record.started_at)
        prompt_class[record.test_case] = record.prompt_class
    datums += throughput_datums(records, run)
    for test_case, by_endpoint in sorted(acceptance.items()):
        for variant, figures in sorted(by_endpoint.items()):
            if (variant, test_case) not in first_start:
                continue
            timestamp = datetime.fromtimestamp(first_start[(variant, test_case)], timezone.utc)
            datums.extend(cloudwatch.acceptance_datums(variant, test_case, prompt_class[test_case], figures, timestamp))
    return datums


def throughput_datums(records: list[RequestRecord], run: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Per service, prompt class and load level: output tokens per second per node while busy, and
    the cost of a million at the price the run's settings recorded (specbench/analysis/cost.py)."""
    deployment = ((run or {}).get("plan") or {}).get("deployment") or {}
    price = cost.recorded_price(deployment)
    servers, _ = cost.recorded_servers_per_node(deployment)
    load = ((run or {}).get("plan") or {}).get("load") or {}
    default = "r" + format(load["request_rate"], "g").replace(".", "p") if load.get("request_rate") else f"c{load.get('concurrency', 1)}"
    datums = []
    for variant in sorted({r.variant for r in records}):
        timed = [r for r in records if r.variant == variant and cost.window(r) is not None]
        items = cost.shares(timed)
        groups: dict[tuple[str, str], list[cost.Share]] = {}
        first: dict[tuple[str, str], float] = {}
        for record, share in zip(timed, items, strict=True):
            key = (record.prompt_class, cost.level_label(record, default))
            groups.setdefault(key, []).append(share)
            first[key] = min(first.get(key, record.started_at), record.started_at)
        for key, mine in sorted(groups.items()):
            per_server = cost.tokens_per_second(mine)
            per_node = None if per_server is None else per_server * servers
            when = datetime.fromtimestamp(first[key], timezone.utc)
            datums += cloudwatch.throughput_datums(variant, key[0], per_node, cost.cost_per_million_tokens(price.per_hour, per_node), when)
    return datums


def publish_run(
    store: RunStore, namespace: str, region: str | None, client: Any = None, *, unpublished_only: bool = False
) -> cloudwatch.PublishReport:
    """Publish a stored run (or only what an earlier attempt left in unpublished.json), then store
    the outcome: publish.json, and unpublished.json with every batch that did not go out."""
    if unpublished_only:
        datums = [datum for batch in json.loads(store.read("unpublished.json")) for datum in batch["datums"]]
    else:
        files = runfiles.load_run(store)  # damaged and impossible parts skipped, and logged
        for skipped in files.skipped:
            log.warning("not published: %s", skipped)
        datums = run_datums(files.records, files.acceptance, files.run)
    report = cloudwatch.publish(client or cloudwatch.make_client(region), namespace, datums)
    store.write("publish.json", jsonfile.dumps(report.to_dict(), indent=2, sort_keys=True, default=str))
    store.write("unpublished.json", jsonfile.dumps([batch.to_dict() for batch in report.failed], indent=2, default=str))
    return report


def has_unpublished(store: RunStore) -> bool:
    if "unpublished.json" not in store.keys("unpublished.json"):
        return False
    try:
        return bool(json.loads(store.read("unpublished.json")))
    except (UnicodeDecodeError, ValueError):  # damaged: republish what is stored (publish --all)
        log.warning("%s/unpublished.json is damaged: ignored", store.location)
        return False


def describe_publish(report: cloudwatch.PublishReport, location: str) -> str:
    line = (
        f"CloudWatch {report.namespace}: {report.values_published} values in {report.datums_published} datums, "
        f"{report.calls} calls ({report.retries} retries)"
    )
    if report.ok:
        return line
    return line + (
        f"\nNOT PUBLISHED: {report.datums_failed} datums in {len(report.failed)} batches "
        f"({', '.join(sorted({b.error_code for b in report.failed}))}); kept in {location}/unpublished.json, "
        f"retry with: specbench publish {location}"
    )


# Console summary -------------------------------------------------------------------------------


def _median(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value * 1000:.1f}"


def summary_table(cases: list[Any], baseline: str) -> str:
    """Medians per test case and endpoint, with speedups against the baseline endpoint."""
    header = (
        f"{'test case':<18} {'endpoint':<16} {'ok':>5} {'TTFT ms':>8} {'ITL/chunk ms':>12} {'TPOT ms':>8} "
        f"{'tok/chunk':>9} {'E2E s':>7} {'accept':>7} {'TPOT speedup':>12}"
    )
    lines = [header, "-" * len(header)]
    for case in cases:
        by_variant: dict[str, list[RequestRecord]] = {baseline: []}
        for record in case.records:
            by_variant.setdefault(record.variant, []).append(record)
        base_tpot = _median([r.time_per_output_token_s for r in by_variant.get(baseline, []) if r.ok])
        for variant, records in by_variant.items():
            if not records:
                continue
            good = [r for r in records if r.ok]
            tpot = _median([r.time_per_output_token_s for r in good])
            e2e = _median([r.end_to_end_latency_s for r in good])
            per_chunk = _median([r.tokens_per_chunk for r in good])
            rate = (case.acceptance.get(variant) or {}).get("acceptance_rate")
            speedup = f"{base_tpot / tpot:.2f}x" if base_tpot and tpot and variant != baseline else "-"
            lines.append(
                f"{case.test_case:<18} {variant:<16} {len(good):>2}/{len(records):<2} {_ms(_median([r.ttft_s for r in good])):>8} "
                f"{_ms(_median([r.inter_token_latency_s for r in good])):>12} {_ms(tpot):>8} "
                f"{'-' if per_chunk is None else f'{per_chunk:.2f}':>9} {'-' if e2e is None else f'{e2e:.2f}':>7} "
                f"{'-' if rate is None else f'{rate:.1%}':>7} {speedup:>12}"
            )
        if case.outputs_match is False:
            lines.append(f"{'':<18} note: outputs differ between requests of {case.test_case} (expected identical at temperature 0)")
    return "\n".join(lines)


def cost_table(records: list[RequestRecord], settings: dict[str, Any], baseline: str, default_level: str, resamples: int = 1000) -> str:
    """Per prompt class, load level and endpoint: output tokens per second per node while busy and
    the cost of a million output tokens (95% bootstrap CIs), the saving against the baseline, and
    the price used with where it came from (specbench/analysis/cost.py)."""
    from specbench.analysis.stats import format_interval, seed_for

    price = cost.recorded_price(settings)
    servers, servers_source = cost.recorded_servers_per_node(settings)
    lines = [
        f"cost per million output tokens at {price.describe()}; {servers} servers per node ({servers_source})",
        f"{'prompt class':<15} {'load (per server, per node)':<42} {'endpoint':<16} {'tokens/s per node':<24} {'cost per M tokens':<22} "
        + cost.SAVING_HEADER.lower(),
    ]
    share_of: dict[int, cost.Share] = {}
    for variant in {r.variant for r in records}:
        timed = [r for r in records if r.variant == variant and cost.window(r) is not None]
        share_of.update((id(r), share) for r, share in zip(timed, cost.shares(timed), strict=True))
    groups: dict[tuple[str, str, str], list[cost.Share]] = {}
    for record in records:
        if id(record) in share_of:
            groups.setdefault((record.prompt_class, cost.level_label(record, default_level), record.variant), []).append(
                share_of[id(record)]
            )
    for (prompt_class, level, variant), items in groups.items():
        options = {"seed": seed_for(prompt_class, level, variant, "cost"), "resamples": resamples}
        figures = cost.throughput(variant, level, items, servers, price, **options)
        change = "-"
        if variant != baseline:
            base = groups.get((prompt_class, level, baseline), [])
            change = cost.describe_saving(cost.saving(variant, level, base, items, servers, servers, price, **options), price)
        per_node, load = format_interval(figures.per_node, unit="", digits=1), loads.describe_level(level, servers)
        lines.append(
            f"{prompt_class:<15} {load:<42} {variant:<16} {per_node:<24} {cost.describe_cost(figures.cost_per_million, price):<22} {change}"
        )
    return "\n".join(lines)
