"""The plan (TP/PP) of a served model: recorded at deployment, from its overrides, or planned now."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ...vllm_planner.options import merge_plan_options

# Planner hook: (config, gpu_facts, options) -> plan dict. Injected so this module stays pure.
Planner = Callable[[Mapping[str, Any], Mapping[str, Any], Mapping[str, Any]], Mapping[str, Any]]


def planner_options(rec: Mapping[str, Any], model: Mapping[str, Any]) -> dict[str, Any]:
    """The options the planner gets for one served model of a host record.

    The one place the doctor merges planner options: the host's ``plan_options`` (its group's
    options), then the model's ``overrides``, then the host's ``vllm_version`` unless the options
    already name one, then the model's name unless given.
    """
    return merge_plan_options(
        rec.get("vllm_version"), rec.get("plan_options"), model.get("overrides"), model.get("name")
    )


def plan_for(
    rec: Mapping[str, Any], model: Mapping[str, Any], planner: Planner | None
) -> tuple[Mapping[str, Any] | None, str]:
    """The plan of one served model and where it comes from.

    The plan recorded at deployment, else the planner's answer for the model's config.json on
    this host's GPUs, else the TP/PP sizes its overrides give; ``(None, "")`` when none is known.
    """
    deployed = ((rec.get("deployed") or {}).get("models") or {}).get(model.get("name")) or {}
    recorded = (deployed.get("current") or {}).get("plan")
    if recorded:
        return recorded, "deployed plan"
    info = ((rec.get("probe") or {}).get("model_dirs") or {}).get(model.get("name")) or {}
    config, gpu = info.get("config"), rec.get("gpu")
    if planner is None or not config or not (gpu or {}).get("present"):
        overrides = model.get("overrides") or {}
        given = {
            k: int(overrides[k])
            for k in ("tensor_parallel_size", "pipeline_parallel_size")
            if overrides.get(k)
        }
        return (given, "overrides") if given else (None, "")
    options = planner_options(rec, model)
    try:
        return planner(config, gpu, options), "planned now"
    except ValueError as exc:
        return {"error": str(exc)}, "planner refused the input"
