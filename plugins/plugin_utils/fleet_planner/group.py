"""A serving group: N hosts with G GPUs of one type each, planned as one vLLM instance.

vLLM spans nodes with pipeline parallelism (one stage per node, tensor parallelism within it): the NCCL
all-reduce of tensor parallelism on every layer would cross the slower inter-node link otherwise. So a
group of N hosts is planned with ``pipeline_parallel_size`` N unless the options say otherwise, and a
split must give every member the same number of GPUs (vLLM's launcher runs world_size / nnodes ranks
on each node).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .errors import PlanInputError
from .gpu import gpu_spec_from_facts
from .planner import plan

# Largest group the refusal's "needs N hosts" search looks at.
_MAX_GROUP_HOSTS = 16


def _label(spec: Mapping[str, Any]) -> str:
    return f"{spec['count']}x {spec['name']} ({spec['memory_mib']} MiB)"


def group_gpu_spec(
    group: str,
    facts_by_host: Sequence[tuple[str, Mapping[str, Any]]],
    gpus: Any = None,
    shared: bool = False,
) -> dict[str, Any]:
    """The planner GPU dict of a serving group: one member's GPUs, ``nodes`` = the number of members.

    ``facts_by_host``: ``(host, nvidia_gpu facts)`` in rank order. Every member must have the same GPU
    model, count and compute capability as rank 0; the first that differs is named in the error.
    """
    if not facts_by_host:
        raise PlanInputError(f"serving group {group}: it has no hosts. Fix: put the hosts in group {group}.")
    specs: list[tuple[str, dict[str, Any]]] = []
    for host, facts in facts_by_host:
        try:
            specs.append((host, gpu_spec_from_facts(facts, nodes=1, shared=shared, gpus=gpus)))
        except PlanInputError as exc:
            raise PlanInputError(f"serving group {group}: host {host}: {exc}") from None
    lead_host, lead = specs[0]
    for host, spec in specs[1:]:
        same = (spec["name"], spec["count"], spec["compute_capability"]) == (
            lead["name"],
            lead["count"],
            lead["compute_capability"],
        )
        if not same:
            raise PlanInputError(
                f"serving group {group}: host {host} has {_label(spec)} but {lead_host} (rank 0) has "
                f"{_label(lead)}; one replica runs the same split on every member. Fix: move {host} out of "
                f"group {group}, or give it the same GPUs."
            )
    memory = min(spec["memory_mib"] for _host, spec in specs)  # the tightest member bounds every stage
    return {**lead, "memory_mib": memory, "nodes": len(specs)}


def group_options(options: Mapping[str, Any] | None, nodes: int) -> dict[str, Any]:
    """The plan options of a group: one pipeline stage per node unless the options set the split."""
    out = dict(options or {})
    if nodes > 1 and out.get("pipeline_parallel_size") in (None, ""):
        out["pipeline_parallel_size"] = nodes
    return out


def split_problems(group: str, tp: int, pp: int, nodes: int, gpus_per_node: int) -> list[str]:
    """Why vLLM's multi-node launcher cannot run TP x PP on ``nodes`` members; [] when it can."""
    world = tp * pp
    if world % nodes:
        return [
            f"serving group {group}: tensor_parallel_size {tp} x pipeline_parallel_size {pp} = {world} GPUs "
            f"cannot be split evenly over its {nodes} hosts. Fix: set pipeline_parallel_size {nodes} "
            f"(one stage per host) or remove hosts from group {group}."
        ]
    if world // nodes > gpus_per_node:
        return [
            f"serving group {group}: {world // nodes} GPUs per host needed but each has {gpus_per_node}. "
            f"Fix: lower tensor_parallel_size."
        ]
    return []


def hosts_needed(
    model_config: Mapping[str, Any],
    gpu: Mapping[str, Any],
    options: Mapping[str, Any] | None = None,
    **plan_inputs: Any,
) -> int | None:
    """The fewest members (one pipeline stage each) of such hosts that hold the model; None past 16."""
    for n in range(int(gpu.get("nodes") or 1) + 1, _MAX_GROUP_HOSTS + 1):
        opts = {**dict(options or {}), "pipeline_parallel_size": n}
        if plan(model_config, {**gpu, "nodes": n}, options=opts, **plan_inputs)["feasible"]:
            return n
    return None


def plan_group(
    group: str,
    model_config: Mapping[str, Any],
    gpu: Mapping[str, Any],
    options: Mapping[str, Any] | None = None,
    **plan_inputs: Any,
) -> dict[str, Any]:
    """The plan of one replica on a serving group (``gpu``: :func:`group_gpu_spec`'s dict).

    The planner's result, plus ``nodes`` and ``gpus_per_node`` (what each member runs); a group too
    small for the model is refused with the number of such hosts that would hold it.
    """
    nodes = int(gpu.get("nodes") or 1)
    opts = group_options(options, nodes)
    result = plan(model_config, gpu, options=opts, **plan_inputs)
    tp, pp = int(result["tensor_parallel_size"]), int(result["pipeline_parallel_size"])
    result["nodes"] = nodes
    result["gpus_per_node"] = tp * pp // nodes if (tp * pp) % nodes == 0 else 0
    problems = split_problems(group, tp, pp, nodes, int(gpu["count"]))
    if problems:
        result.update(feasible=False, vllm_args=[])
        result["errors"] = [*result["errors"], *problems]
        return result
    if not result["feasible"] and "pipeline_parallel_size" not in dict(options or {}):
        need = hosts_needed(model_config, gpu, options, **plan_inputs)
        more = (
            f"a group of {need} such hosts holds it (pipeline_parallel_size {need})"
            if need
            else f"no group of up to {_MAX_GROUP_HOSTS} such hosts holds it at these settings"
        )
        result["errors"] = [
            *result["errors"],
            f"serving group {group}: {nodes} host(s) of {gpu['count']}x {gpu['name']} cannot hold "
            f"{result['model']}; {more}. Fix: add hosts to group {group}, or quantize the weights.",
        ]
    return result
