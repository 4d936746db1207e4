"""Weight bytes: parameter counts from the config, checkpoint totals, and per-GPU bytes under TP/PP.

Per-GPU bytes follow vLLM's TP split rules: column/row-parallel linears, vocab-parallel embeddings and
the LM head are divided by TP (vocabulary padded to 64); norms, MoE routers, MLA down-projections and
k/v projections of models with fewer KV heads than TP ranks are replicated. Pipeline stages follow
`get_pp_indices`; the first stage holds the embeddings and encoders, the last the LM head.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from .config import ATTENTION_KINDS, ModelArch
from .errors import PlanInputError
from .quant import QuantSpec

SAFETENSORS_DTYPE_BYTES = {
    "F64": 8,
    "I64": 8,
    "U64": 8,
    "F32": 4,
    "I32": 4,
    "U32": 4,
    "F16": 2,
    "BF16": 2,
    "I16": 2,
    "U16": 2,
    "F8_E4M3": 1,
    "F8_E5M2": 1,
    "F8_E8M0": 1,
    "I8": 1,
    "U8": 1,
    "BOOL": 1,
    "F4": 1,
    "F6_E2M3": 1,
    "F6_E3M2": 1,
    "F8_E4M3FN": 1,
}
_TOWER_PREFIXES = (
    "visual.",
    "vision_tower.",
    "vision_model.",
    "model.visual.",
    "multi_modal_projector.",
    "audio_tower.",
    "model.vision_tower.",
    "model.multi_modal_projector.",
    "vision_encoder.",
    "mm_projector.",
    "model.vision_model.",
    "vpm.",
    "resampler.",
    "model.audio_tower.",
)
_LAYER_RE = re.compile(r"layers\.(\d+)\.")


def pad_vocab(vocab: int, pad: int = 64) -> int:
    return ((vocab + pad - 1) // pad) * pad


@lru_cache(maxsize=1024)
def get_pp_indices(num_layers: int, pp_rank: int, pp_size: int) -> tuple[int, int]:
    """vLLM's default split: floor(L/pp) each; the remainder goes one each to stages -2, -3, ..."""
    per = num_layers // pp_size
    parts = [per] * pp_size
    rem = num_layers % pp_size
    for i in range(rem):
        parts[-(i + 2) if i + 2 <= pp_size else 0] += 1
    start = sum(parts[:pp_rank])
    return start, start + parts[pp_rank]


@dataclass(frozen=True, slots=True)
class LayerBytes:
    """Bytes of one decoder layer on one GPU at a given TP."""

    total: int


def _lin(params: float, bpp: float) -> float:
    return params * bpp


def _attn_quantized(q: QuantSpec) -> bool:
    """Whether the checkpoint quantizes the attention projections (MXFP4 quantizes only the experts)."""
    return q.is_quantized and q.attn_quantized and q.method != "mxfp4"


def _attn_bytes(arch: ModelArch, q: QuantSpec, d: int, tp: int) -> float:
    H = arch.hidden_size
    bpp = q.linear_bpp if _attn_quantized(q) else d
    if arch.mla is not None:
        m = arch.mla
        nq = arch.num_heads
        qk = m.qk_nope_head_dim + m.qk_rope_head_dim
        rep = H * (m.kv_lora_rank + m.qk_rope_head_dim)  # kv_a_proj_with_mqa, replicated
        shard = m.kv_lora_rank * nq * (m.qk_nope_head_dim + m.v_head_dim) + nq * m.v_head_dim * H
        if m.q_lora_rank:
            rep += H * m.q_lora_rank
            shard += m.q_lora_rank * nq * qk
            norms = m.q_lora_rank + m.kv_lora_rank
        else:
            shard += H * nq * qk
            norms = m.kv_lora_rank
        return _lin(rep + shard / tp, bpp) + norms * d
    nq, nkv, hd = arch.num_heads, arch.num_kv_heads, arch.head_dim
    kvh = nkv // tp if nkv >= tp else 1
    qo = 2 * H * nq * hd / tp
    kv = 2 * H * kvh * hd
    b = _lin(qo + kv, bpp)
    if arch.qkv_bias:
        b += (nq * hd / tp + 2 * kvh * hd) * d
    if arch.o_bias:
        b += H * d
    if arch.qk_norm:
        b += 2 * hd * d
    if arch.text_model_type.startswith("gpt_oss"):
        b += nq / tp * 4  # attention sinks (fp32)
    return b


def _mamba_bytes(arch: ModelArch, d: int, tp: int) -> float:
    m = arch.mamba
    H = arch.hidden_size
    if m is None:
        return 0.0
    if m.kind == "gdn":
        qkvz = H * (2 * m.k_heads * m.k_dim + 2 * m.v_heads * m.v_dim)
        ba = H * 2 * m.v_heads
        conv = (2 * m.k_heads * m.k_dim + m.v_heads * m.v_dim) * m.d_conv
        out = m.v_heads * m.v_dim * H
        return (qkvz + ba + conv + out) / tp * d + m.v_dim * d
    if m.kind == "mamba2":
        inner = m.intermediate
        in_proj = H * (2 * inner + 2 * m.n_groups * m.d_state + m.n_heads)
        conv = (inner + 2 * m.n_groups * m.d_state) * m.d_conv
        out = inner * H
        return (in_proj + conv + out + inner + 3 * m.n_heads) / tp * d
    if m.kind == "mamba1":
        inner = m.intermediate
        dt_rank = math.ceil(H / 16)
        p = H * 2 * inner + inner * m.d_conv + inner * (dt_rank + 2 * m.d_state) + dt_rank * inner
        p += inner * m.d_state + inner + inner * H
        return p / tp * d
    # linear (lightning) attention: qkv + gate + out projections
    hd = m.head_dim * m.n_heads
    return (H * 3 * hd + H * hd + hd * H) / tp * d


def _up(x: int, m: int) -> int:
    return -(-x // m) * m


def mxfp4_backend(cc: tuple[int, int], hopper: str = "triton") -> str:
    """vLLM's MXFP4 MoE backend on a GPU of compute capability `cc` (get_mxfp4_backend): FlashInfer
    TRT-LLM on data-centre Blackwell, the Triton kernels on Hopper where the release has them, Marlin
    (weight-only FP4) elsewhere."""
    if cc[0] == 10:
        return "trtllm"
    if cc[0] == 9:
        return hopper
    return "marlin"


def mxfp4_padded(
    hidden: int, inter_part: int, cc: tuple[int, int], hopper: str = "triton"
) -> tuple[int, int]:
    """MoE dims after vLLM's MXFP4 padding (Mxfp4MoEMethod.create_weights): Marlin pads the
    intermediate to 128 and hidden to 256 (its n % 256, k % 128 rule); FlashInfer TRT-LLM pads both
    to 256; the Triton kernels pad the intermediate to 64."""
    backend = mxfp4_backend(cc, hopper)
    if backend == "trtllm":
        return _up(hidden, 256), _up(inter_part, 256)
    if backend == "triton":
        return hidden, _up(inter_part, 64)
    return _up(hidden, 256), _up(inter_part, 128)


# Triton MoE on Hopper: the swizzled scales' rows are padded to 2 * num_warps * 2 * 8 (HopperMXScaleLayout,
# num_warps 8 outside batched MoE) and their columns to 2.
_HOPPER_SCALE_ALIGN_M = 2 * 8 * 2 * 8
_HOPPER_SCALE_ALIGN_K = 2
_MXFP4_BLOCK = 32


def mxfp4_expert_bytes(
    experts: int, hidden: int, inter_part: int, cc: tuple[int, int], hopper: str = "triton"
) -> float:
    """Bytes one rank holds after loading for `experts` MXFP4 experts (weights, e8m0 scales, biases).

    Weights are two FP4 values per byte, scales one byte per 32 weights, biases bf16 as created. After
    loading, FlashInfer TRT-LLM and Triton keep the biases in fp32. Triton swizzles the weights and
    scales into new tensors; the weights' originals are deleted, the scales' stay registered on the
    layer, so the scales are held twice (the swizzled copy with the Hopper layout's padding).
    """
    backend = mxfp4_backend(cc, hopper)
    h, i = mxfp4_padded(hidden, inter_part, cc, hopper)
    weights = 2 * i * h // 2 + h * i // 2
    scales = 2 * i * (h // _MXFP4_BLOCK) + h * (i // _MXFP4_BLOCK)
    bias = (2 * i + h) * (2 if backend == "marlin" else 4)
    per = weights + scales + bias
    if backend == "triton":
        per += _up(2 * i, _HOPPER_SCALE_ALIGN_M) * _up(h // _MXFP4_BLOCK, _HOPPER_SCALE_ALIGN_K)
        per += _up(h, _HOPPER_SCALE_ALIGN_M) * _up(i // _MXFP4_BLOCK, _HOPPER_SCALE_ALIGN_K)
    return float(experts * per)


def _mlp_bytes(
    arch: ModelArch, q: QuantSpec, d: int, tp: int, kind: str, cc: tuple[int, int] | None = None
) -> float:
    H = arch.hidden_size
    if kind == "none":
        return 0.0
    if kind == "dense" or arch.moe is None:
        inter = arch.intermediate_size
        bpp = q.linear_bpp if (q.is_quantized and q.dense_mlp_quantized) else d
        mult = 3 if arch.gated_mlp else 2
        return _lin(mult * H * inter / tp, bpp)
    moe = arch.moe
    ebpp = q.expert_bpp if q.is_quantized else d
    if q.method == "mxfp4" and cc is None:  # the checkpoint: unpadded blocks and scales, bf16 biases
        i = moe.expert_intermediate // tp
        b = moe.num_experts * 3 * H * i * (0.5 + 1.0 / _MXFP4_BLOCK)
        if moe.expert_bias:
            b += moe.num_experts * (2 * i + H) * d
    elif q.method == "mxfp4":
        b = mxfp4_expert_bytes(moe.num_experts, H, moe.expert_intermediate // tp, cc, q.mxfp4_hopper)
    else:
        b = _lin(moe.num_experts * 3 * H * moe.expert_intermediate / tp, ebpp)
        if moe.expert_bias:
            b += moe.num_experts * (2 * moe.expert_intermediate / tp + H) * d
    b += H * moe.num_experts * d  # router, replicated
    if moe.router_bias:
        b += moe.num_experts * 4
    if moe.shared_intermediate:
        sbpp = q.linear_bpp if q.is_quantized and q.dense_mlp_quantized else d
        b += _lin(3 * H * moe.shared_intermediate / tp, sbpp)
        if arch.raw_text.get("shared_expert_intermediate_size"):
            b += H * d  # shared_expert_gate
    return b


def layer_bytes(
    arch: ModelArch, q: QuantSpec, d: int, tp: int, i: int, cc: tuple[int, int] | None = None
) -> float:
    """Bytes of decoder layer `i` on one GPU of compute capability `cc` (None: as stored on disk)."""
    kind = arch.layer_kinds[i]
    b = 2 * arch.hidden_size * d  # input / post-attention norms
    if kind == "mamba":
        b += _mamba_bytes(arch, d, tp)
    elif kind != "none":
        b += _attn_bytes(arch, q, d, tp)
    b += _mlp_bytes(arch, q, d, tp, arch.layer_mlp[i], cc)
    return b


def _embed_bytes(arch: ModelArch, d: int, tp: int, padded: bool = True) -> float:
    v = pad_vocab(arch.vocab_size) if padded else arch.vocab_size
    return v * arch.hidden_size / tp * d


def _head_bytes(arch: ModelArch, q: QuantSpec, d: int, tp: int, padded: bool = True) -> float:
    v = pad_vocab(arch.vocab_size) if padded else arch.vocab_size
    bpp = q.linear_bpp if q.is_quantized and q.lm_head_quantized else d
    return v * arch.hidden_size / tp * bpp


def rope_cache_bytes(arch: ModelArch, d: int) -> float:
    """cos/sin cache of the rotary embedding (max positions x rotary dim, model dtype), on every rank."""
    if not arch.num_heads or arch.text_model_type.startswith(("gpt2", "opt", "bloom", "mpt")):
        return 0.0
    positions = arch.max_len.base or 0
    if arch.mla is not None:
        rot = arch.mla.qk_rope_head_dim
    else:
        factor = arch.raw_text.get("partial_rotary_factor") or 1.0
        rot = int(arch.head_dim * float(factor))
    return float(positions * rot * d)


def mla_absorbed_bytes(arch: ModelArch, q: QuantSpec, d: int, tp: int) -> float:
    """Per MLA layer: the model-dtype copy of a quantized kv_b_proj that vLLM keeps for its absorbed
    matmuls. ``process_weights_after_loading`` (v1/attention/backends/mla/common.py 0.9.2-0.11,
    model_executor/layers/attention/mla_attention.py 0.18-0.34): "we currently do not have quantized
    bmm's which are needed for `W_UV` and `W_UK_T`, we just store fp16/bf16 copies"; an unquantized
    kv_b_proj is only viewed. Loaded with the weights, so in "Model loading took"; not in the checkpoint."""
    m = arch.mla
    if m is None or not _attn_quantized(q):
        return 0.0
    return m.kv_lora_rank * arch.num_heads / tp * (m.qk_nope_head_dim + m.v_head_dim) * d


def tower_bytes(arch: ModelArch, d: int, tp: int) -> float:
    p = (arch.vision.params if arch.vision else 0) + arch.audio_params
    return p / tp * d


def _mtp_bytes(arch: ModelArch, q: QuantSpec, d: int) -> float:
    """Checkpoint bytes of multi-token-prediction modules (skipped by vLLM unless used as a drafter)."""
    if not arch.mtp_layers:
        return 0.0
    last = arch.num_layers - 1
    per = (
        layer_bytes(arch, q, d, 1, last)
        + 2 * arch.hidden_size * arch.hidden_size * (q.linear_bpp if q.is_quantized else d)
        + 3 * arch.hidden_size * d
    )
    per += _embed_bytes(arch, d, 1, padded=False) + _head_bytes(arch, q, d, 1, padded=False)
    return arch.mtp_layers * per


_STAGE_CACHE: dict[tuple[Any, ...], tuple[Any, Any, tuple[float, ...]]] = {}


def stage_bytes(
    arch: ModelArch, q: QuantSpec, d: int, tp: int, pp: int, towers: bool = True, cc: tuple[int, int] = (9, 0)
) -> tuple[float, ...]:
    """Per-GPU weight bytes of each pipeline stage (config-based) on a GPU of compute capability `cc`."""
    key = (id(arch), id(q), d, tp, pp, towers, cc)
    hit = _STAGE_CACHE.get(key)
    if hit is not None and hit[0] is arch and hit[1] is q:
        return hit[2]
    per_layer: dict[tuple[str, str], float] = {}
    out = []
    absorbed = mla_absorbed_bytes(arch, q, d, tp)
    for rank in range(pp):
        start, end = get_pp_indices(arch.num_layers, rank, pp)
        b = 0.0
        for i in range(start, end):
            k = (arch.layer_kinds[i], arch.layer_mlp[i])
            lb = per_layer.get(k)
            if lb is None:
                lb = per_layer[k] = layer_bytes(arch, q, d, tp, i, cc)
            b += lb
        if rank == 0:
            b += _embed_bytes(arch, d, tp)
            if towers:
                b += tower_bytes(arch, d, tp)
        if rank == pp - 1:
            b += arch.hidden_size * d
            if arch.tie_word_embeddings:
                if pp > 1:
                    b += _embed_bytes(arch, d, tp)
            else:
                b += _head_bytes(arch, q, d, tp)
        b += rope_cache_bytes(arch, d)
        if absorbed:
            b += absorbed * sum(1 for i in range(start, end) if arch.layer_kinds[i] in ATTENTION_KINDS)
        out.append(b)
    result = tuple(out)
    if len(_STAGE_CACHE) > 4096:
        _STAGE_CACHE.clear()
    _STAGE_CACHE[key] = (arch, q, result)
    return result


def checkpoint_bytes(arch: ModelArch, q: QuantSpec, ckpt_dtype_bytes: int, include_mtp: bool = True) -> float:
    """Config-based estimate of the checkpoint's tensor bytes (what metadata.total_size records)."""
    d = ckpt_dtype_bytes
    b = sum(layer_bytes(arch, q, d, 1, i) for i in range(arch.num_layers))
    b += _embed_bytes(arch, d, 1, padded=False) + arch.hidden_size * d + tower_bytes(arch, d, 1)
    if not arch.tie_word_embeddings:
        b += _head_bytes(arch, q, d, 1, padded=False)
    if include_mtp:
        b += _mtp_bytes(arch, q, d)
    return b


def parameter_count(arch: ModelArch, include_mtp: bool = False) -> int:
    """Parameters implied by the config (1 byte per parameter accounting, unquantized)."""
    from .quant import NONE

    return int(round(checkpoint_bytes(arch, NONE, 1, include_mtp=include_mtp)))


def total_from_index(index: Mapping[str, Any]) -> int | None:
    """`metadata.total_size` of a model.safetensors.index.json mapping."""
    meta = index.get("metadata") if isinstance(index, Mapping) else None
    if isinstance(meta, Mapping) and meta.get("total_size") is not None:
        try:
            total = int(meta["total_size"])
        except (TypeError, ValueError):
            raise PlanInputError("safetensors_index: metadata.total_size is not an integer") from None
        if total <= 0:
            raise PlanInputError("safetensors_index: metadata.total_size must be positive")
        return total
    return None


def is_header(obj: Mapping[str, Any]) -> bool:
    for k, v in obj.items():
        if k == "__metadata__":
            continue
        return isinstance(v, Mapping) and "dtype" in v and "shape" in v
    return False


@dataclass(frozen=True, slots=True)
class HeaderTotals:
    total: int
    towers: int
    mtp: int


def header_totals(headers: Mapping[str, Any] | list[Mapping[str, Any]], num_layers: int) -> HeaderTotals:
    """Sum tensor bytes over one or more safetensors headers (prod(shape) x dtype size)."""
    parts = headers if isinstance(headers, list) else [headers]
    total = towers = mtp = 0
    for part in parts:
        if not isinstance(part, Mapping):
            raise PlanInputError("safetensors_index: header list entries must be mappings")
        for name, t in part.items():
            if name == "__metadata__":
                continue
            if not isinstance(t, Mapping) or "dtype" not in t or "shape" not in t:
                raise PlanInputError(f"safetensors_index: tensor {name!r} lacks dtype/shape")
            size = SAFETENSORS_DTYPE_BYTES.get(str(t["dtype"]).upper())
            if size is None:
                raise PlanInputError(f"safetensors_index: tensor {name!r} has unknown dtype {t['dtype']!r}")
            n = size
            for dim in t["shape"]:
                n *= int(dim)
            total += n
            if name.startswith(_TOWER_PREFIXES):
                towers += n
            else:
                m = _LAYER_RE.search(name)
                if m and int(m.group(1)) >= num_layers and "model.layers." in name:
                    mtp += n
    return HeaderTotals(total, towers, mtp)


def index_has_towers(index: Mapping[str, Any]) -> bool:
    wm = index.get("weight_map") if isinstance(index, Mapping) else None
    if not isinstance(wm, Mapping):
        return False
    return any(str(k).startswith(_TOWER_PREFIXES) for k in wm)
