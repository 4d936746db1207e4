"""The plan of each (GPU group, model) of fleet_plan_models that can be planned on the control node alone:
its config.json is a file here and the group's GPU facts are in the fact cache. Everything else is planned by
playbooks/plan.yml (which reads GPU facts and model metadata from the hosts), and by the serve stage before it
touches a host."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_ops import plan_report
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_planner import (
    gpu_spec_from_facts,
    plan,
)

from .problems import Problem, has_unresolved


def _plan(
    config: Mapping[str, Any], gpu: Mapping[str, Any], options: Mapping[str, Any], index: Any, weights: Any
) -> dict[str, Any]:
    return plan(
        config, gpu, safetensors_index=index, weights_bytes=int(weights) if weights else None, options=options
    )


def _gpu_spec(facts: Mapping[str, Any], nodes: int, shared: bool) -> dict[str, Any]:
    return gpu_spec_from_facts(facts, nodes=nodes, shared=shared)


def _read(path: str | None) -> str:
    if not path:
        return ""
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except OSError:
        return ""


def gpu_groups(groups: Mapping[str, Sequence[str]]) -> dict[str, list[str]]:
    """The groups planned: non-empty groups whose hosts all are GPU nodes (as plan.yml finds them)."""
    gpu = set(groups.get("gpu_nodes") or [])
    return {
        name: list(members)
        for name, members in groups.items()
        if name not in ("all", "ungrouped", "gpu_nodes") and members and set(members) <= gpu
    }


def check_plans(
    plan_models: Any,
    groups: Mapping[str, Sequence[str]],
    hosts: Mapping[str, Mapping[str, Any]],
    gpu_facts: Mapping[str, Any],
    config_dir: str,
    vllm_version: Any,
    host: str = "",
) -> tuple[list[Problem], int]:
    """Problems of the infeasible plans, and how many (group, model) pairs were planned here."""
    if not isinstance(plan_models, list) or has_unresolved(plan_models) or not isinstance(vllm_version, str):
        return [], 0
    # only entries with a config.json here; the others (and vllm_server_models) need the hosts
    kept = [
        (i, m)
        for i, m in enumerate(plan_models)
        if isinstance(m, Mapping) and isinstance(m.get("config"), str)
    ]
    if not kept:
        return [], 0
    plain = {h: {k: v for k, v in values.items() if not has_unresolved(v)} for h, values in hosts.items()}
    try:
        entries = plan_report.normalize_entries(
            [m for _i, m in kept],
            gpu_groups(groups),
            plain,
            {"config_dir": config_dir, "vllm_version": vllm_version},
        )
    except (TypeError, ValueError, AttributeError, KeyError):
        return [], 0  # a malformed entry or option: told by the argument_specs check
    chosen = [
        (kept[pos][0], entry)
        for pos, entry in enumerate(entries)
        if not entry["error"]
        and entry["config_path"]
        and os.path.isfile(entry["config_path"])
        and any((gpu_facts.get(h) or {}).get("present") for h in entry["hosts"])
    ]
    files = {
        str(pos): {
            "config": _read(entry["config_path"]),
            "index": _read(entry["index_path"]),
            "hf_quant_config": _read(
                os.path.join(os.path.dirname(entry["config_path"]), "hf_quant_config.json")
            ),
        }
        for pos, (_index, entry) in enumerate(chosen)
    }
    inputs = plan_report.attach_inputs([e for _i, e in chosen], files, dict(gpu_facts), {}, "cache")
    report = plan_report.build_report(inputs, _plan, _gpu_spec)
    problems: list[Problem] = []
    for (index, entry), planned in zip(chosen, report["entries"], strict=True):
        if planned.get("plan") is None and planned.get("error"):
            # config and GPU facts are here, so what is left is the entry itself (max_num_seqs: sixteen):
            # plan.yml would print an ERROR row for it
            what, _sep, fix = str(planned["error"]).partition(" Fix: ")
            problems.append(
                Problem(
                    f"fleet_plan_models[{index}]",
                    f"{entry['name']} on {entry['group']} cannot be planned: {what.rstrip('.')}",
                    fix.rstrip(".") or "correct its options (roles/fleet_plan/meta/argument_specs.yml)",
                    host,
                )
            )
            continue
        result = planned.get("plan") or {}
        if planned.get("plan") is not None and not result.get("feasible"):
            gpu = planned.get("gpu") or {}
            on = f"{gpu.get('count', '?')}x {gpu.get('name', 'GPU')}"
            text = " ".join(str(e) for e in result.get("errors") or ["no plan fits"])
            what, _sep, fix = text.partition(" Fix: ")  # the planner's errors end with their own fix
            problems.append(
                Problem(
                    f"fleet_plan_models[{index}]",
                    f"{entry['name']} on {entry['group']} ({on}, cached GPU facts) is INFEASIBLE: "
                    + what.rstrip("."),
                    fix
                    or "change the model, the GPUs or the options; playbooks/plan.yml prints the whole plan",
                    host,
                )
            )
    return problems, len(chosen)
