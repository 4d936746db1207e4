"""Speculative decoding per model (#28): ``vllm_server_models[].speculative`` -> ``--speculative-config``.

Exports:
  speculative_config(spec, vllm_version, served_name, target_tp=None, draft_tp=None) -> dict | None
      the JSON vLLM takes (``SpeculativeConfig``), checked against the release; None when off
  speculative_args(spec, vllm_version, served_name, target_tp=None, draft_tp=None) -> list[str]
      ``["--speculative-config", "<json>"]`` or []
  METHODS
      method -> (first release, first release without it or None)

The setting: ``method`` (ngram, eagle, eagle3, mtp, draft_model), ``num_speculative_tokens``, ``model`` (the
draft model or EAGLE head folder, for eagle/eagle3/draft_model), ``prompt_lookup_max`` / ``prompt_lookup_min``
(ngram), ``draft_tensor_parallel_size`` (draft_model). Sources per release (vllm/config.py, from 0.10
vllm/config/speculative.py, ``SpeculativeConfig``):
* ``--speculative-config`` (JSON) replaced the separate ``--speculative-model`` / ``--num-speculative-tokens``
  flags in 0.8 (the 0.8.x serve help has it; 0.32.0's, captured in tests/data/vllm-release, too).
* ngram and eagle: 0.8.0 on (V0 had both; V1 ran ngram from 0.8 and EAGLE from 0.8.x).
* eagle3: vllm#16937 ("EAGLE-3 support", V1), claimed from 0.9.0, the first release after it seen to have it.
* mtp: the generic name for a checkpoint's own MTP layers (MTPModelTypes in speculative.py); earlier releases
  took per-family names (deepseek_mtp). Claimed from 0.12.0 only.
* draft_model: V0 only through 0.10.x (V1 fell back to V0 for it); V0 went in 0.11.0 and V1 refused a draft
  model ("Speculative decoding with draft model is not supported yet", vllm#31883 on 0.13.0) until vllm#24322
  (``DraftModelProposer``) in 0.14.0.
* Draft TP: V0's ``SpeculativeConfig._verify_and_get_draft_tp`` accepts 1 or the target's TP; V1's draft model
  (vllm#24322) runs in the target's workers and takes only the target's TP.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ..fleet_planner.errors import PlanInputError
from ..fleet_planner.versions import Version, parse_version
from .deploy import ServingError

METHODS: dict[str, tuple[Version, Version | None]] = {
    "ngram": ((0, 8, 0), None),
    "eagle": ((0, 8, 0), None),
    "eagle3": ((0, 9, 0), None),
    "mtp": ((0, 12, 0), None),
    "draft_model": ((0, 8, 0), (0, 11, 0)),
}
# draft models came back on V1 (vllm#24322)
DRAFT_MODEL_V1_SINCE: Version = (0, 14, 0)
NEEDS_MODEL = frozenset({"eagle", "eagle3", "draft_model"})
_KEYS = frozenset(
    {
        "method",
        "num_speculative_tokens",
        "model",
        "prompt_lookup_max",
        "prompt_lookup_min",
        "draft_tensor_parallel_size",
    }
)


def _text(version: Version) -> str:
    return ".".join(str(p) for p in version)


def method_available(method: str, version: Version) -> bool:
    if method == "draft_model" and version >= DRAFT_MODEL_V1_SINCE:
        return True
    span = METHODS.get(method)
    return span is not None and span[0] <= version and (span[1] is None or version < span[1])


def _positive(spec: Mapping[str, Any], key: str, var: str, required: bool = False) -> int | None:
    v = spec.get(key)
    if v is None:
        if required:
            raise ServingError(f"{var}.{key} is required (a whole number >= 1)")
        return None
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise ServingError(f"{var}.{key} must be a whole number >= 1, got {v!r}")
    return v


def speculative_config(
    spec: Any,
    vllm_version: str,
    served_name: str,
    target_tp: int | None = None,
    draft_tp: int | None = None,
) -> dict[str, Any] | None:
    """The ``--speculative-config`` JSON of one model; raises ServingError for what vLLM would refuse."""
    var = f"vllm_server_models[{served_name}].speculative"
    if spec in (None, False, {}):
        return None
    if not isinstance(spec, Mapping):
        raise ServingError(f"{var} must be a mapping (method, num_speculative_tokens, ...), got {spec!r}")
    unknown = sorted(set(spec) - _KEYS)
    if unknown:
        raise ServingError(f"{var}: unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(_KEYS))}")
    try:
        version = parse_version(vllm_version)
    except PlanInputError as exc:
        raise ServingError(str(exc)) from None
    method = str(spec.get("method") or ("draft_model" if spec.get("model") else ""))
    if method not in METHODS:
        raise ServingError(f"{var}.method must be one of {', '.join(METHODS)}, got {spec.get('method')!r}")
    if not method_available(method, version):
        have = [m for m in METHODS if method_available(m, version)]
        why = (
            "vLLM 0.11.0-0.13.x run no draft model (V0 removed, V1's came in 0.14.0, vllm#24322)"
            if method == "draft_model"
            else f"vLLM {_text(version)} has no method {method!r} (from {_text(METHODS[method][0])})"
        )
        raise ServingError(f"{var}.method: {why}; it has: {', '.join(have)}")
    out: dict[str, Any] = {
        "method": method,
        "num_speculative_tokens": _positive(spec, "num_speculative_tokens", var, required=True),
    }
    if method in NEEDS_MODEL:
        if not spec.get("model"):
            raise ServingError(
                f"{var}.model is required for method {method}: the draft model or EAGLE head folder"
            )
        out["model"] = str(spec["model"])
    elif spec.get("model"):
        raise ServingError(
            f"{var}.model is only for eagle, eagle3 and draft_model (method {method} needs none)"
        )
    if method == "ngram":
        high = _positive(spec, "prompt_lookup_max", var)
        low = _positive(spec, "prompt_lookup_min", var)
        if high is not None and low is not None and low > high:
            raise ServingError(f"{var}: prompt_lookup_min ({low}) is above prompt_lookup_max ({high})")
        out.update(
            {k: v for k, v in (("prompt_lookup_max", high), ("prompt_lookup_min", low)) if v is not None}
        )
    elif "prompt_lookup_max" in spec or "prompt_lookup_min" in spec:
        raise ServingError(f"{var}: prompt_lookup_max / prompt_lookup_min are for method ngram only")
    draft = _positive(spec, "draft_tensor_parallel_size", var) or draft_tp
    if draft is not None:
        if method != "draft_model":
            raise ServingError(f"{var}.draft_tensor_parallel_size is for method draft_model only")
        target = target_tp or 1
        allowed = {target} if version >= DRAFT_MODEL_V1_SINCE else {1, target}
        if draft not in allowed:
            rule = "the target's" if version >= DRAFT_MODEL_V1_SINCE else "1 or the target's"
            raise ServingError(
                f"{var}.draft_tensor_parallel_size {draft}: vLLM {_text(version)} takes {rule} "
                f"tensor parallel size ({target}) for a draft model"
            )
        out["draft_tensor_parallel_size"] = draft
    return out


def speculative_args(
    spec: Any,
    vllm_version: str,
    served_name: str,
    target_tp: int | None = None,
    draft_tp: int | None = None,
) -> list[str]:
    config = speculative_config(spec, vllm_version, served_name, target_tp, draft_tp)
    if config is None:
        return []
    return ["--speculative-config", json.dumps(config, sort_keys=True, separators=(",", ":"))]
