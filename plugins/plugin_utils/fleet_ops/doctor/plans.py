"""The plan (TP/PP) of a served model: recorded at deployment, from its overrides, or planned now."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ...fleet_serving import lora
from ...fleet_serving.images import image_version
from ...fleet_serving.model_features import model_features
from ...fleet_serving.unit import unit_options

# Planner hook: (config, gpu_facts, options, inputs) -> plan dict, ``inputs`` the serve stage's other planner
# inputs (``safetensors_index``, ``weights_bytes``, ``gpus``: the model's GPU indexes, ``nodes``). Injected so
# this module stays pure.
Planner = Callable[
    [Mapping[str, Any], Mapping[str, Any], Mapping[str, Any], Mapping[str, Any]], Mapping[str, Any]
]


def _probed(rec: Mapping[str, Any], model: Mapping[str, Any]) -> Mapping[str, Any]:
    return ((rec.get("probe") or {}).get("model_dirs") or {}).get(model.get("name")) or {}


def _members(rec: Mapping[str, Any]) -> int:
    return len((rec.get("serving_group") or {}).get("members") or [])


def planner_options(rec: Mapping[str, Any], model: Mapping[str, Any]) -> dict[str, Any]:
    """The options the planner gets for one served model of a host record: the serve stage's merge
    (fleet_serving/unit.py) over what the probe read on the host (config.json for the task and speculation,
    the adapters' adapter_config.json, the drafter's config.json) and the host's serving group.
    Raises ValueError (ServingError) where the serve stage would refuse the model."""
    release = image_version(model, rec.get("image"), rec.get("vllm_version"))
    info = _probed(rec, model)
    features = None
    if info.get("config"):
        features = model_features(
            info["config"], None, model, release["vllm_version"], str(model.get("name"))
        )
    sized = None
    configs = info.get("adapter_configs") or {}
    if configs and all(configs.values()):
        where = f"vllm_server_models[{model.get('name')}].adapters"
        ranks = [lora.rank_of(config, f"{where}[{name}]") for name, config in configs.items()]
        sized = {"options": lora.sizing(ranks, lora.runtime_updating(release["vllm_version"]))}
    return unit_options(
        model, release, rec.get("plan_options"), features, sized, info.get("draft_config"), _members(rec)
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
    info = _probed(rec, model)
    config, gpu = info.get("config"), rec.get("gpu")
    if planner is None or not config or not (gpu or {}).get("present"):
        overrides = model.get("overrides") or {}
        given = {
            k: int(overrides[k])
            for k in ("tensor_parallel_size", "pipeline_parallel_size")
            if overrides.get(k)
        }
        return (given, "overrides") if given else (None, "")
    try:
        options = planner_options(rec, model)
        inputs = {
            "safetensors_index": info.get("index"),
            "weights_bytes": info.get("weights_bytes") or None,
            "gpus": model.get("gpus") or None,
            "nodes": _members(rec) or 1,
        }
        return planner(config, gpu, options, inputs), "planned now"
    except ValueError as exc:
        return {"error": str(exc)}, "planner refused the input"
