"""Config checks: config.json values vLLM could not load, refused before the planner reads them.

vLLM reads config.json through transformers, which keeps what the JSON says: a count written as a
string reaches vLLM's layers as a string and fails there, so such a field is refused here rather than
replaced by a default. Messages name the field as ``model_config.<path>``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from .errors import PlanInputError

# Counts and sizes the planner reads (config.py), with the aliases vLLM accepts.
_POSITIVE = (
    "hidden_size",
    "d_model",
    "n_embd",
    "num_hidden_layers",
    "n_layer",
    "num_layers",
    "n_layers",
    "num_attention_heads",
    "n_head",
    "n_heads",
    "num_key_value_heads",
    "num_kv_heads",
    "n_head_kv",
    "multi_query_group_num",
    "head_dim",
    "kv_channels",
    "vocab_size",
    "padded_vocab_size",
    "intermediate_size",
    "ffn_hidden_size",
    "moe_intermediate_size",
    "max_position_embeddings",
    "n_positions",
    "max_seq_len",
    "seq_length",
    "max_sequence_length",
    "kv_lora_rank",
    "q_lora_rank",
    "qk_nope_head_dim",
    "qk_rope_head_dim",
    "v_head_dim",
    "attention_chunk_size",
)
_NON_NEGATIVE = (  # 0 is a dense model / no such layers
    "num_experts",
    "n_routed_experts",
    "num_local_experts",
    "num_experts_per_tok",
    "shared_expert_intermediate_size",
    "n_shared_experts",
    "first_k_dense_replace",
    "moe_layer_freq",
    "decoder_sparse_step",
    "num_nextn_predict_layers",
    "max_window_layers",
    "interleave_moe_layer_step",
)
_VISION = (
    "hidden_size",
    "embed_dim",
    "width",
    "depth",
    "num_hidden_layers",
    "num_layers",
    "intermediate_size",
    "num_heads",
    "num_attention_heads",
    "patch_size",
    "temporal_patch_size",
    "in_channels",
    "num_channels",
    "out_hidden_size",
    "projection_dim",
    "spatial_merge_size",
)
_OPTIONAL_WINDOW = ("sliding_window",)  # null or false disable it


def _field(prefix: str, key: str) -> str:
    return f"model_config.{prefix}{key}"


def _integer(value: Any) -> int | None:
    # NaN and Infinity (which Python's json reads) are not integers either
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return int(value) if int(value) == value else None


_EXPERTS = ("num_experts", "n_routed_experts", "num_local_experts", "moe_num_experts")
_TOP_K = ("num_experts_per_tok", "experts_per_token", "moe_top_k")


def _check_moe(node: Mapping[str, Any], prefix: str) -> None:
    """Experts routed per token: at least 1 and at most the experts there are (vLLM's router takes the
    top k of the experts' logits: torch.topk fails past them, and its MoE output refuses 0)."""
    experts = next((_integer(node[k]) for k in _EXPERTS if node.get(k) is not None), None)
    key = next((k for k in _TOP_K if node.get(k) is not None), None)
    if not experts or experts <= 1 or key is None:
        return
    top_k = _integer(node[key])
    if top_k is None:
        return  # _check_int reports it
    if top_k == 0:
        raise PlanInputError(
            f"{_field(prefix, key)}: 0 experts per token: vLLM's MoE layer fails with \"top_k must be "
            f"positive.\" Fix: set it to the value in the checkpoint's published config.json "
            f"(1 to {experts})."
        )
    if top_k > experts:
        raise PlanInputError(
            f"{_field(prefix, key)}: {top_k} experts per token, but the model has {experts} experts: vLLM's "
            'router fails with "selected index k out of range" (torch.topk). Fix: set it to at most '
            f"{experts}, as in the checkpoint's published config.json."
        )


# Weight bits each AWQ kernel packs: AWQ's GEMM kernels 4 (awq.py: "only 4-bit"), AWQ-Marlin 4 and 8
_AWQ_BITS = (4, 8)


def _check_awq_bits(q: Mapping[str, Any], name: str) -> None:
    if str(q.get("quant_method") or "").lower() not in ("awq", "awq_marlin"):
        return
    key = "bits" if q.get("bits") is not None else "w_bit"
    bits = _integer(q.get(key))
    if bits is None or bits in _AWQ_BITS:
        return
    raise PlanInputError(
        f"{name}.{key}: Currently, only 4-bit weight quantization is supported for AWQ, but got {bits} bits "
        "(vLLM's AWQ kernels pack 4-bit weights; AWQ-Marlin 4- or 8-bit). Fix: use a 4-bit AWQ checkpoint "
        f"(bits: 4), or a GPTQ checkpoint for {bits}-bit weights."
    )


def _check_int(node: Mapping[str, Any], key: str, prefix: str, minimum: int) -> None:
    value = node.get(key)
    if value is None:
        return
    n = _integer(value)
    name = _field(prefix, key)
    if n is None:
        shown = f"the string {value!r}" if isinstance(value, str) else repr(value)
        example = value.strip() if isinstance(value, str) and value.strip().isdigit() else "4096"
        raise PlanInputError(
            f"{name}: expected an integer, got {shown} (vLLM passes config.json values to its layers "
            f"as they are). Fix: write it as a JSON number, e.g. {example}."
        )
    if n < minimum:
        raise PlanInputError(
            f"{name}: must be >= {minimum}, got {value!r}. Fix: set it to the value in the "
            "checkpoint's published config.json."
        )


def _check_heads(node: Mapping[str, Any], prefix: str) -> None:
    nq = node.get("num_attention_heads")
    nkv = node.get("num_key_value_heads")
    if isinstance(nq, int) and isinstance(nkv, int) and nq > 0 and nkv > 0 and nq % nkv:
        raise PlanInputError(
            f"{_field(prefix, 'num_key_value_heads')}: num_heads ({nq}) is not divisible by num_kv_heads "
            f"({nkv}) (vLLM's Attention layer asserts it). Fix: set num_key_value_heads to a divisor of "
            f"num_attention_heads ({nq}), as in the checkpoint's published config.json."
        )


_DTYPES = ("float32", "float16", "bfloat16", "float", "half", "bf16", "fp16", "fp32", "float8_e4m3fn")


def _check_kinds(node: Mapping[str, Any], prefix: str) -> None:
    """Values of a fixed kind: dtype names, model_type, booleans, rope_theta."""
    for key in ("torch_dtype", "dtype"):
        v = node.get(key)
        if v is not None and str(v).strip().lower().removeprefix("torch.") not in _DTYPES + ("auto",):
            raise PlanInputError(
                f'{_field(prefix, key)}: {v!r} is not a torch dtype vLLM loads. Fix: e.g. "bfloat16".'
            )
    model_type = node.get("model_type")
    if model_type is not None and not isinstance(model_type, str):
        raise PlanInputError(
            f'{_field(prefix, "model_type")}: expected a string, got {model_type!r}. Fix: e.g. "llama".'
        )
    tie = node.get("tie_word_embeddings")
    if tie is not None and not isinstance(tie, bool):
        raise PlanInputError(
            f"{_field(prefix, 'tie_word_embeddings')}: expected true or false, got {tie!r}. Fix: write "
            "true or false."
        )
    theta = node.get("rope_theta")
    if theta is not None and (isinstance(theta, bool) or not isinstance(theta, (int, float)) or theta <= 0):
        raise PlanInputError(
            f"{_field(prefix, 'rope_theta')}: expected a positive number, got {theta!r}. Fix: write it as "
            "a JSON number, e.g. 500000.0."
        )


def _check_rope(node: Mapping[str, Any], prefix: str) -> None:
    for key in ("rope_scaling", "rope_parameters"):
        rope = node.get(key)
        if rope is None:
            continue
        name = _field(prefix, key)
        if not isinstance(rope, Mapping):
            raise PlanInputError(f"{name}: expected an object or null, got {rope!r}. Fix: e.g. null.")
        factor = rope.get("factor")
        if factor is not None and (isinstance(factor, bool) or not isinstance(factor, (int, float))):
            raise PlanInputError(
                f"{name}.factor: expected a number, got {factor!r}. Fix: write it as a JSON number, e.g. 4.0."
            )
        if factor is not None and not (math.isfinite(factor) and factor > 0):
            raise PlanInputError(f"{name}.factor: must be > 0, got {factor!r}. Fix: e.g. 4.0.")
        _check_int(rope, "original_max_position_embeddings", f"{prefix}{key}.", 1)


def _check_quant(q: Any, prefix: str) -> None:
    if q is None:
        return
    name = _field(prefix, "quantization_config")
    if not isinstance(q, Mapping):
        raise PlanInputError(f"{name}: expected a mapping, got {q!r}. Fix: remove it or restore the object.")
    method = q.get("quant_method")
    if method is not None and not isinstance(method, str):
        raise PlanInputError(f'{name}.quant_method: expected a string, got {method!r}. Fix: e.g. "fp8".')
    block = q.get("weight_block_size")
    if block is not None:
        ok = isinstance(block, list) and len(block) == 2 and all((_integer(b) or 0) > 0 for b in block)
        if not ok:
            raise PlanInputError(
                f"{name}.weight_block_size: expected two positive integers [block_n, block_k], got "
                f"{block!r}. Fix: use the checkpoint's block size, e.g. [128, 128], or remove it."
            )
    for key in ("bits", "w_bit", "group_size", "q_group_size"):
        v = q.get(key)
        if v is not None and (_integer(v) is None or (_integer(v) or 0) < -1):
            raise PlanInputError(
                f"{name}.{key}: expected an integer, got {v!r}. Fix: write it as a JSON number, e.g. 128."
            )
    _check_awq_bits(q, name)


def _check_node(node: Mapping[str, Any], prefix: str) -> None:
    for key in _POSITIVE:
        _check_int(node, key, prefix, 1)
    for key in _NON_NEGATIVE:
        _check_int(node, key, prefix, 0)
    for key in _OPTIONAL_WINDOW:
        if node.get(key) not in (None, False):
            _check_int(node, key, prefix, 1)
    _check_heads(node, prefix)
    _check_moe(node, prefix)
    _check_rope(node, prefix)
    _check_kinds(node, prefix)
    kinds = node.get("layer_types")
    if kinds is not None and not (isinstance(kinds, list) and all(isinstance(k, str) for k in kinds)):
        raise PlanInputError(
            f"{_field(prefix, 'layer_types')}: expected a list of layer kinds, got {kinds!r}. Fix: e.g. "
            '["full_attention", "sliding_attention", ...] (one per layer), or remove it.'
        )
    archs = node.get("architectures")
    if archs is not None and not (
        isinstance(archs, str) or (isinstance(archs, list) and all(isinstance(a, str) for a in archs))
    ):
        raise PlanInputError(
            f"{_field(prefix, 'architectures')}: expected a list of class names, got {archs!r}. "
            'Fix: e.g. "architectures": ["LlamaForCausalLM"].'
        )
    _check_quant(node.get("quantization_config"), prefix)


def check_config(config: Mapping[str, Any], text: Mapping[str, Any], text_path: str) -> None:
    """Raise PlanInputError naming the first config.json value vLLM could not load."""
    _check_node(config, "")
    for key in ("vision_config", "visual", "vision_tower_config"):
        vision = config.get(key)
        if isinstance(vision, Mapping):
            for field_name in _VISION:
                _check_int(vision, field_name, f"{key}.", 1)
    if text is not config:
        _check_node(text, f"{text_path}.")
