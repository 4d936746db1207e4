"""Operations filters: thin shims over plugin_utils/fleet_ops (documented in the sidecar YAML files).

vllm_fleet_plan_entries(models, gpu_groups, hostvars, settings)  (group, model) pairs and metadata sources
vllm_fleet_plan_follow_refs(entries, answers)          entries pointed at the revision a branch resolved to
vllm_fleet_plan_attach(entries, files, facts, deployed, source)  entries with metadata, facts and deployments
vllm_fleet_plan_report(entries)                        plans for (group, model) entries, plan vs actual
vllm_fleet_plan_table(report)                          the plan report as text tables
vllm_fleet_doctor_targets(host_vars)                   what to probe on a host, and its record skeleton
vllm_fleet_doctor_hub_requests(records, endpoint)      the Hugging Face access checks to make
vllm_fleet_doctor(records, settings, hub)              doctor results for the host records
vllm_fleet_doctor_hub(checks, offline, declared)       results of the Hugging Face access probes
vllm_fleet_doctor_table(results)                       the doctor results as a table with fixes
vllm_fleet_doctor_summary(results)                     counts per status and ok
vllm_fleet_bench_progress(step, index, total, mode, elapsed, limit)  one progress line per sweep step
vllm_fleet_bench_knee(steps, factor)                   the knee of the steps recorded so far
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible.errors import AnsibleFilterError
from ansible_collections.vllm_fleet.vllm_fleet.plugins.module_utils import nvidia_host
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils import fleet_planner
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_ops import (
    bench,
    doctor,
    plan_report,
)


def _plan(
    config: Mapping[str, Any],
    gpu: Mapping[str, Any],
    options: Mapping[str, Any],
    index: Any,
    weights_bytes: Any,
) -> dict[str, Any]:
    return fleet_planner.plan(
        config,
        gpu,
        safetensors_index=index,
        weights_bytes=int(weights_bytes) if weights_bytes else None,
        options=options,
    )


def _gpu_spec(facts: Mapping[str, Any], nodes: int, shared: bool) -> dict[str, Any]:
    return fleet_planner.gpu_spec_from_facts(facts, nodes=nodes, shared=shared)


def _doctor_planner(
    config: Mapping[str, Any],
    facts: Mapping[str, Any],
    options: Mapping[str, Any],
    inputs: Mapping[str, Any],
) -> Mapping[str, Any]:
    gpu = fleet_planner.gpu_spec_from_facts(
        facts, nodes=int(inputs.get("nodes") or 1), gpus=inputs.get("gpus")
    )
    return _plan(config, gpu, options, inputs.get("safetensors_index"), inputs.get("weights_bytes"))


def vllm_fleet_plan_entries(
    models: Any, gpu_groups: Any, hostvars: Any, settings: Any = None
) -> list[dict[str, Any]]:
    """The (group, model) pairs to plan; see vllm_fleet_plan_entries.yml."""
    if models is not None and not isinstance(models, list):
        raise AnsibleFilterError(f"vllm_fleet_plan_entries: fleet_plan_models must be a list, got {models!r}")
    try:
        return plan_report.normalize_entries(
            models or [], dict(gpu_groups or {}), hostvars, dict(settings or {})
        )
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError(f"vllm_fleet_plan_entries: {exc}") from exc


def vllm_fleet_plan_follow_refs(entries: Any, answers: Any) -> list[dict[str, Any]]:
    """Entries pointed at resolved revisions; see vllm_fleet_plan_follow_refs.yml."""
    try:
        return plan_report.follow_refs(list(entries or []), list(answers or []))
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError(f"vllm_fleet_plan_follow_refs: {exc}") from exc


def vllm_fleet_plan_attach(
    entries: Any, files: Any, facts: Any, deployed: Any, source: Any = "live"
) -> list[dict[str, Any]]:
    """Entries with their metadata, GPU facts and deployments; see vllm_fleet_plan_attach.yml."""
    try:
        return plan_report.attach_inputs(
            list(entries), dict(files or {}), dict(facts or {}), dict(deployed or {}), str(source)
        )
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError(f"vllm_fleet_plan_attach: {exc}") from exc


def vllm_fleet_plan_report(entries: Any) -> dict[str, Any]:
    """Plans for the (group, model) entries; see vllm_fleet_plan_report.yml."""
    if not isinstance(entries, list):
        raise AnsibleFilterError(
            f"vllm_fleet_plan_report: expected a list of entries, got {type(entries).__name__}"
        )
    return plan_report.build_report(entries, _plan, _gpu_spec)


def vllm_fleet_plan_table(report: Any) -> str:
    """The plan report as text; see vllm_fleet_plan_table.yml."""
    try:
        return plan_report.render(report)
    except (KeyError, TypeError) as exc:
        raise AnsibleFilterError(f"vllm_fleet_plan_table: not a plan report ({exc})") from exc


def vllm_fleet_doctor(records: Any, settings: Any = None, hub: Any = None) -> list[dict[str, Any]]:
    """Doctor results; see vllm_fleet_doctor.yml."""
    if not isinstance(records, list):
        raise AnsibleFilterError(
            f"vllm_fleet_doctor: expected a list of host records, got {type(records).__name__}"
        )
    try:
        return doctor.evaluate(
            records, settings or {}, list(hub or []), _doctor_planner, nvidia_host.cuda_check
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise AnsibleFilterError(f"vllm_fleet_doctor: {exc}") from exc


def vllm_fleet_doctor_targets(host_vars: Any) -> dict[str, Any]:
    """What to probe on a host; see vllm_fleet_doctor_targets.yml."""
    try:
        return doctor.targets(dict(host_vars))
    except (KeyError, TypeError, ValueError) as exc:
        raise AnsibleFilterError(f"vllm_fleet_doctor_targets: {exc}") from exc


def vllm_fleet_doctor_hub_requests(records: Any, endpoint: Any = "") -> list[dict[str, Any]]:
    """The hub access checks to make; see vllm_fleet_doctor_hub_requests.yml."""
    return doctor.hub_requests(list(records or []), str(endpoint or ""))


def vllm_fleet_doctor_hub(checks: Any, offline: Any = False, declared: Any = 0) -> list[dict[str, Any]]:
    """Hugging Face access results; see vllm_fleet_doctor_hub.yml."""
    return doctor.hub_results(list(checks or []), bool(offline), int(declared or 0))


def vllm_fleet_doctor_table(results: Any) -> str:
    """Doctor results as a table; see vllm_fleet_doctor_table.yml."""
    try:
        return doctor.render(list(results))
    except (KeyError, TypeError) as exc:
        raise AnsibleFilterError(f"vllm_fleet_doctor_table: not doctor results ({exc})") from exc


def vllm_fleet_doctor_summary(results: Any) -> dict[str, Any]:
    """Counts per status; see vllm_fleet_doctor_summary.yml."""
    return doctor.summary(list(results or []))


def vllm_fleet_bench_progress(step: Any, index: Any, total: Any, mode: Any, elapsed: Any, limit: Any) -> str:
    """One line for a finished sweep step; see vllm_fleet_bench_progress.yml."""
    try:
        summary = bench.summarize_step(step)
        return bench.progress_line(summary, int(index), int(total), str(mode), float(elapsed), float(limit))
    except (bench.BenchError, TypeError, ValueError) as exc:
        raise AnsibleFilterError(f"vllm_fleet_bench_progress: {exc}") from exc


def vllm_fleet_bench_knee(steps: Any, factor: Any) -> dict[str, Any]:
    """The knee of the recorded steps; see vllm_fleet_bench_knee.yml."""
    try:
        summaries = sorted((bench.summarize_step(s) for s in steps or []), key=lambda s: s["load"])
        return bench.find_knee(summaries, float(factor))
    except (bench.BenchError, TypeError, ValueError) as exc:
        raise AnsibleFilterError(f"vllm_fleet_bench_knee: {exc}") from exc


class FilterModule:
    """vllm-fleet operations reports."""

    def filters(self) -> dict[str, Any]:
        return {
            "vllm_fleet_plan_entries": vllm_fleet_plan_entries,
            "vllm_fleet_plan_follow_refs": vllm_fleet_plan_follow_refs,
            "vllm_fleet_plan_attach": vllm_fleet_plan_attach,
            "vllm_fleet_plan_report": vllm_fleet_plan_report,
            "vllm_fleet_plan_table": vllm_fleet_plan_table,
            "vllm_fleet_doctor_targets": vllm_fleet_doctor_targets,
            "vllm_fleet_doctor_hub_requests": vllm_fleet_doctor_hub_requests,
            "vllm_fleet_doctor": vllm_fleet_doctor,
            "vllm_fleet_doctor_hub": vllm_fleet_doctor_hub,
            "vllm_fleet_doctor_table": vllm_fleet_doctor_table,
            "vllm_fleet_doctor_summary": vllm_fleet_doctor_summary,
            "vllm_fleet_bench_progress": vllm_fleet_bench_progress,
            "vllm_fleet_bench_knee": vllm_fleet_bench_knee,
        }
