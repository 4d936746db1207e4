"""The planner options of one served model, merged from every layer in one place.

``vllm_server`` (its preflight), ``playbooks/plan.yml`` (vllm_fleet_ops/plan_report.py) and the doctor
(vllm_fleet_ops/doctor/plans.py) all plan a model with :func:`unit_options`, so what is planned before a
deployment is what the deployment plans. The layers, a later one winning:

1. the release of the image the model runs (:func:`images.image_version`: its own image or version, else
   its GPU group's);
2. the GPU group's ``vllm_server_plan_options``;
3. what the serve stage sizes for it: its LoRA adapters (``max_loras``, ``max_lora_rank``), its task and
   speculation (``model_features``' ``plan_options``: a pooling runner, the speculative config), the
   draft's or EAGLE head's config.json;
4. the model's own ``overrides``;
5. a serving group's pipeline: one stage per member host unless a layer sets the split.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..vllm_planner.options import merge_plan_options
from .deploy import ServingError


def _mapping(value: Any, what: str, name: str) -> Mapping[str, Any]:
    if value in (None, ""):
        return {}
    if not isinstance(value, Mapping):
        raise ServingError(
            f"vllm_server_models[{name}]: {what} must be a mapping, got {type(value).__name__}"
        )
    return value


def unit_options(
    model: Mapping[str, Any],
    release: Mapping[str, Any],
    group_options: Mapping[str, Any] | None = None,
    features: Mapping[str, Any] | None = None,
    lora: Mapping[str, Any] | None = None,
    draft_config: Mapping[str, Any] | None = None,
    group_members: int = 0,
) -> dict[str, Any]:
    """The planner options of ``model`` (a ``vllm_server_models[]`` entry: ``name``, ``overrides``).

    ``release``: ``images.image_version``'s answer for the model (``{image, vllm_version}``);
    ``group_options``: ``vllm_server_plan_options``; ``features``: ``model_features``' answer (its
    ``plan_options``); ``lora``: the model's entry of ``lora.launch`` (its ``options``); ``draft_config``:
    the config.json of ``speculative.model``; ``group_members``: the hosts of its serving group (0 when it
    is in none).
    """
    name = str(model.get("name") or "?")
    sized: dict[str, Any] = {
        **_mapping((lora or {}).get("options"), "its LoRA options", name),
        **_mapping((features or {}).get("plan_options"), "its serve options", name),
    }
    if draft_config:
        sized["speculative_draft_config"] = dict(draft_config)
    own = _mapping(model.get("overrides"), "overrides", name)
    options = merge_plan_options(release.get("vllm_version"), group_options, {**sized, **own}, name)
    if int(group_members or 0) > 0 and "pipeline_parallel_size" not in options:
        options["pipeline_parallel_size"] = int(group_members)
    return options
