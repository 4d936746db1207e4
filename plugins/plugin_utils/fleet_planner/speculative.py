"""Speculative decoding in the plan (#28): what the drafter adds to each GPU, as vLLM allocates it.

Exports:
  parse_speculative(options, key) -> dict | None
      the ``speculative`` option: vLLM's --speculative-config (a mapping or its JSON)
  draft_cost(spec, target, draft, tp, kv_bytes, kv_dtype, d, version) -> DraftCost
      weights and KV bytes per token the drafter adds on one GPU, and why
  apply_draft(result, cost) -> dict
      the plan with the drafter: its weights taken from the KV budget, its layers in every KV block
  verify_shape(spec, target) -> (int, int)
      the drafts each request verifies and the method's extra draft slots, for the warm-up's verify step

What vLLM allocates (V1, vllm/v1/spec_decode/ and GPUModelRunner.load_model / get_kv_cache_spec):
* ngram (and suffix): proposes from the prompt, with no weights and no KV layers: on the CPU (numba) before
  0.34, on the GPU in 0.34's model runner (Triton kernels over max_num_seqs x blocks of scratch,
  vllm/v1/worker/gpu/spec_decode/ngram/speculator.py, a few MiB).
* every method, 0.34: the extensible KV cache keeps free the warm-up's transient peak, and the warm-up
  (warmup_kernels, vllm/v1/worker/gpu/warmup.py) verifies K drafts for up to max_num_seqs requests: the
  rejection sampler's max_num_seqs x (1 + K) rows of logits and their fp32 chunk (sampler.spec_warmup_bytes,
  counted in the activation peak, so in ``kv_cache_tokens_without_draft`` too). Measured on an H100 with
  0.34.0 (Llama-3.2-3B, ngram, 3 tokens, tests/gpu/results/h100-0.34.0-features): the peak rose from 1.03 to
  2.04 GiB (the step's bf16 logits 0.98, fp32 chunk 1.0 GiB).
* eagle / eagle3: the head's decoder layer(s) (``num_hidden_layers`` of its config, usually 1) and its
  ``fc`` (2 x hidden for EAGLE, 3 x hidden for EAGLE-3) are loaded with the model before the profile, so
  the profile counts them as weights; EAGLE heads share the target's embedding and (EAGLE-1) LM head,
  EAGLE-3 brings its own LM head over ``draft_vocab_size``. Each head layer is an attention layer of the
  runner's static forward context, so it has a KV-cache spec and takes a page in every block.
* mtp: the checkpoint's own ``num_nextn_predict_layers`` MTP modules (vLLM skips them otherwise): a decoder
  layer, ``eh_proj`` and norms each, with the shared embedding and head; one KV layer each.
* draft_model: a whole second model in the same workers (V1 from 0.14, vllm#24322; V0 before 0.11), its
  layers interleaved with the target's in the KV cache; sharded over ``draft_tensor_parallel_size``.
The drafter's CUDA graphs are not counted (a few MiB to a few hundred for a draft model): the KV figures
here are an upper bound by that much.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .config import ModelArch
from .errors import PlanInputError
from .kv import attention_token_bytes
from .quant import resolve_quant
from .weights import layer_bytes, stage_bytes

SPEC_METHODS = ("ngram", "eagle", "eagle3", "mtp", "draft_model", "suffix")


def parse_speculative(options: Mapping[str, Any], key: str) -> dict[str, Any] | None:
    v = options.get(key)
    if v in (None, "", {}):
        return None
    if isinstance(v, str):
        try:
            v = json.loads(v)
        except ValueError:
            v = None
    method = v.get("method") if isinstance(v, Mapping) else None
    if not isinstance(v, Mapping) or (method or "draft_model") not in SPEC_METHODS:
        raise PlanInputError(
            f"{key}: expected vLLM's --speculative-config as a mapping with method one of "
            f"{', '.join(SPEC_METHODS)}, got {options.get(key)!r}. "
            f'Fix: e.g. {key} {{"method": "ngram", "num_speculative_tokens": 4}}.'
        )
    return dict(v)


@dataclass(frozen=True, slots=True)
class DraftCost:
    method: str
    layers: int  # drafter layers with a KV page in every block
    weights_bytes: int  # per GPU
    kv_bytes_per_token: int  # per GPU, added to the target's
    why: str


def _head_layers(draft: ModelArch, q: Any, d: int, tp: int) -> float:
    return sum(layer_bytes(draft, q, d, tp, i) for i in range(draft.num_layers))


def draft_cost(
    spec: Mapping[str, Any],
    target: ModelArch,
    draft: ModelArch | None,
    tp: int,
    kv_bytes: int,
    kv_dtype: str,
    d: int,
) -> DraftCost:
    """What the drafter of ``spec`` adds per GPU of a ``tp``-way target (raises PlanInputError without the
    draft's config where its size depends on it)."""
    method = str(spec.get("method") or "draft_model")
    if method in ("ngram", "suffix"):
        return DraftCost(method, 0, 0, 0, f"{method}: proposed from the prompt, no drafter weights or KV")
    if method == "mtp":
        layers = target.mtp_layers
        if not layers:
            raise PlanInputError(
                "speculative: method mtp needs MTP layers in the model's config (num_nextn_predict_layers); "
                f"{target.name} has none. Fix: use eagle3 with a head, ngram, or a draft model."
            )
        q = resolve_quant(target.quant_config, None)
        last = target.num_layers - 1
        h = target.hidden_size
        per = layer_bytes(target, q, d, tp, last) + 2 * h * h * d / tp + 3 * h * d
        return DraftCost(
            method,
            layers,
            int(layers * per),
            layers * attention_token_bytes(target, tp, kv_bytes, kv_dtype),
            f"mtp: {layers} MTP module(s) of the checkpoint loaded as the drafter, one KV layer each",
        )
    if draft is None:
        raise PlanInputError(
            f"speculative: method {method} needs the draft's config.json (option speculative_draft_config). "
            "Fix: give the config.json of the EAGLE head or draft model."
        )
    q = resolve_quant(draft.quant_config, None)
    if method in ("eagle", "eagle3"):
        h = draft.hidden_size
        fc = (3 if method == "eagle3" else 2) * h * h * d / tp
        w = _head_layers(draft, q, d, tp) + fc
        raw = draft.raw_text if isinstance(draft.raw_text, Mapping) else {}
        vocab = raw.get("draft_vocab_size")
        if method == "eagle3" and isinstance(vocab, int) and vocab > 0:
            w += vocab * h * d / tp  # its own LM head over the draft vocabulary
        return DraftCost(
            method,
            draft.num_layers,
            int(w),
            draft.num_layers * attention_token_bytes(draft, tp, kv_bytes, kv_dtype),
            f"{method} head: {draft.num_layers} decoder layer(s) and fc loaded with the model (counted as "
            "weights by the profile), one KV page per layer in every block; embedding shared with the target",
        )
    draft_tp = int(spec.get("draft_tensor_parallel_size") or tp)
    w = stage_bytes(draft, q, d, draft_tp, 1, towers=False)[0]
    return DraftCost(
        "draft_model",
        draft.attention_layers,
        int(w),
        draft.attention_layers * attention_token_bytes(draft, draft_tp, kv_bytes, kv_dtype),
        f"draft model {draft.name}: {draft.num_layers} layers on TP {draft_tp}, its KV layers interleaved "
        "with the target's in every block",
    )


def verify_shape(spec: Mapping[str, Any] | None, target: ModelArch) -> tuple[int, int]:
    """(num_speculative_tokens, max_num_new_slots_for_drafting) of ``spec``; (0, 0) without one.

    vLLM takes num_speculative_tokens from the config, or for mtp from the checkpoint's n_predict
    (num_nextn_predict_layers); only the draft model's autoregressive input keeps one more slot per request
    (``max_num_new_slots_for_drafting``, vllm/v1/worker/gpu/spec_decode/standalone_ar/config.py, 0.34).
    """
    if not spec:
        return 0, 0
    method = str(spec.get("method") or "draft_model")
    try:
        k = int(spec.get("num_speculative_tokens") or 0)
    except (TypeError, ValueError):
        k = 0
    if k <= 0:
        k = target.mtp_layers if method == "mtp" else 0
    return k, 1 if method == "draft_model" else 0


def apply_draft(result: dict[str, Any], cost: DraftCost, spec: Mapping[str, Any]) -> dict[str, Any]:
    """The plan with the drafter's cost: its weights leave the KV budget, its layers share each block."""
    per_gpu = dict(result.get("per_gpu") or {})
    before_tokens = int(result.get("kv_cache_tokens") or 0)
    kv_before = int(per_gpu.get("kv_cache_bytes") or 0)
    per_token = int(result.get("kv_bytes_per_token") or 0)
    kv_after = max(0, kv_before - cost.weights_bytes)
    per_token_after = per_token + cost.kv_bytes_per_token
    tokens = int(kv_after // per_token_after) if per_token_after else before_tokens
    if cost.weights_bytes or cost.kv_bytes_per_token:
        per_gpu["weights_bytes"] = int(per_gpu.get("weights_bytes") or 0) + cost.weights_bytes
        per_gpu["kv_cache_bytes"] = kv_after
        scale = tokens / before_tokens if before_tokens else 0.0
        result["max_concurrency"] = round(float(result.get("max_concurrency") or 0) * scale, 2)
        result["kv_cache_tokens"] = tokens
        result["kv_bytes_per_token"] = per_token_after
        result["available_kv_cache_bytes"] = max(
            0, int(result.get("available_kv_cache_bytes") or 0) - cost.weights_bytes
        )
        result["per_gpu"] = per_gpu
    result["speculative"] = {
        "method": cost.method,
        "num_speculative_tokens": spec.get("num_speculative_tokens"),
        "draft_layers": cost.layers,
        "draft_weights_bytes_per_gpu": cost.weights_bytes,
        "draft_kv_bytes_per_token": cost.kv_bytes_per_token,
        "kv_cache_tokens_without_draft": before_tokens,
        "kv_cache_tokens": tokens,
        "why": cost.why,
    }
    need = int(result.get("max_model_len") or 0)
    if result.get("feasible") and per_token_after and tokens < need:
        result["feasible"] = False
        result.setdefault("errors", []).append(
            f"speculative: with the {cost.method} drafter ({cost.weights_bytes / 2**30:.2f} GiB of weights, "
            f"{cost.kv_bytes_per_token} KV bytes per token per GPU) the KV cache holds {tokens} tokens, "
            f"fewer than max_model_len {need}. Fix: "
            + (f"set max_model_len <= {tokens}, " if tokens > 0 else "")
            + "raise gpu_memory_utilization or tensor_parallel_size, or use a smaller drafter or ngram."
        )
    return result
