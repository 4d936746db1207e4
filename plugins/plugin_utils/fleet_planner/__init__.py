"""vLLM launch planner: choose TP/PP, gpu_memory_utilization, max_model_len, max_num_seqs and
max_num_batched_tokens for a model on given GPUs, and predict per-GPU memory the way vLLM accounts it.

Standard library only; no Ansible imports. Public entry point: `plan()`; its options are the table in
`options.py`, and `merge_plan_options()` combines the fleet's option layers.

The names below are imported from their submodules when first read: a filter that needs only `versions`
or `errors` does not load the whole planner.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy_exports import lazy_exports

if TYPE_CHECKING:
    from .config import ModelArch, resolve, resolve_cached, text_config_of
    from .errors import PlanInputError
    from .gpu import GpuSpec, gpu_spec_from_facts
    from .options import OPTION_KEYS, OPTIONS, PlanOption, merge_plan_options
    from .planner import plan, tp_candidates, tp_problems
    from .versions import (
        DEFAULT_VLLM_VERSION,
        parse_version,
        resolve_version_text,
        version_from_image,
        version_info,
    )

__getattr__, __dir__ = lazy_exports(
    globals(),
    {
        "config": ("ModelArch", "resolve", "resolve_cached", "text_config_of"),
        "errors": ("PlanInputError",),
        "gpu": ("GpuSpec", "gpu_spec_from_facts"),
        "options": ("OPTION_KEYS", "OPTIONS", "PlanOption", "merge_plan_options"),
        "planner": ("plan", "tp_candidates", "tp_problems"),
        "versions": (
            "DEFAULT_VLLM_VERSION",
            "parse_version",
            "resolve_version_text",
            "version_from_image",
            "version_info",
        ),
    },
)

__all__ = [
    "DEFAULT_VLLM_VERSION",
    "GpuSpec",
    "gpu_spec_from_facts",
    "ModelArch",
    "OPTION_KEYS",
    "OPTIONS",
    "PlanOption",
    "PlanInputError",
    "merge_plan_options",
    "parse_version",
    "plan",
    "resolve",
    "resolve_cached",
    "resolve_version_text",
    "text_config_of",
    "tp_candidates",
    "tp_problems",
    "version_from_image",
    "version_info",
]
