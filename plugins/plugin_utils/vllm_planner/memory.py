"""Per-GPU memory accounting, family by family (how vLLM arrives at "Available KV cache memory").

What vLLM measures at startup (activation peak, non-torch growth, CUDA-graph pool) cannot be read
from a config; it is estimated here from the shapes that produce it:

* activation peak A: one dummy forward of `max_num_batched_tokens` tokens without KV cache
  (residual + normed hidden states, the widest of gate/up+activation, fused-MoE workspaces and
  q/k/v); on the last PP stage the dummy sampler pass that follows it (fp32 logits plus the
  top-k/top-p temporaries over min(max_num_seqs, mnbt) rows, see sampler.py), which usually sets
  the peak; and
  the encoder pass of multimodal models;
* CUDA graphs G: piecewise graphs keep each piece's outputs (q/k/v, attention output, residual)
  for the largest capture size alive in the shared pool, plus the intermediates of one piece and
  a small per-graph cost;
* fixed costs: CUDA context, NCCL communicators for multi-GPU workers, cuBLAS workspaces.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .config import ModelArch
from .errors import GIB
from .gpu import GpuSpec
from .non_torch import (
    CUDA_CONTEXT,
    CUSTOM_ALLREDUCE,
    MISC_NON_TORCH,
    NCCL_BASE,
    NCCL_PER_PEER,
    in_budget_non_torch,
    nccl_bytes,
    pre_snapshot_bytes,
)
from .sampler import DEFAULT_SMS, sampler_bytes

__all__ = [
    "CUDA_CONTEXT",
    "CUSTOM_ALLREDUCE",
    "MISC_NON_TORCH",
    "NCCL_BASE",
    "NCCL_PER_PEER",
    "StageMemory",
    "activation_peak",
    "cudagraph_bytes",
    "nccl_bytes",
    "stage_memory",
]
from .versions import VersionInfo

GRAPH_EXEC_BYTES = 32 * 1024  # device memory of one instantiated CUDA graph
EXT_MARGIN_MIN = 1 * GIB  # extensible KV cache: minimum headroom kept free (CUDA)
FUSED_MOE_CHUNK = 32768  # VLLM_FUSED_MOE_CHUNK_SIZE


def _mlp_activation(arch: ModelArch, tokens: int, tp: int, d: int, mlp_kinds: set[str]) -> float:
    H = arch.hidden_size
    peak = 0.0
    if "dense" in mlp_kinds:
        peak = max(peak, tokens * 2 * arch.intermediate_size / tp * d * 1.5)
    if "moe" in mlp_kinds and arch.moe is not None:
        moe = arch.moe
        m = min(tokens, FUSED_MOE_CHUNK)
        n = moe.expert_intermediate / tp
        work = m * moe.top_k * (max(2 * n, H) + n) * d + tokens * moe.num_experts * 4
        if moe.shared_intermediate:
            work += tokens * 2 * moe.shared_intermediate / tp * d * 1.5
        peak = max(peak, work)
    return peak


def _attn_activation(arch: ModelArch, tokens: int, tp: int, d: int) -> float:
    if arch.mla is not None:
        m = arch.mla
        nq = arch.num_heads / tp
        return tokens * nq * (2 * (m.qk_nope_head_dim + m.qk_rope_head_dim) + 2 * m.v_head_dim) * d
    kvh = max(1, arch.num_kv_heads // tp) if arch.num_kv_heads else 0
    return tokens * (2 * arch.num_heads / tp + 2 * kvh) * arch.head_dim * d


def _encoder_activation(arch: ModelArch, mnbt: int, tp: int, d: int) -> float:
    v = arch.vision
    if v is None:
        return 0.0
    merge = 4  # 2x2 spatial merge of the Qwen-VL / InternVL families
    patches = max(mnbt, 16384) * merge
    return patches * (4 * v.hidden + 2 * v.intermediate / tp) * d + patches / merge * max(v.out_hidden, 1) * d


def activation_peak(
    arch: ModelArch,
    mnbt: int,
    max_num_seqs: int,
    tp: int,
    d: int,
    last_stage: bool,
    vinfo: VersionInfo,
    stage_kinds: tuple[str, ...],
    stage_mlp: tuple[str, ...],
    first_stage: bool,
    towers: bool,
    num_sms: int = DEFAULT_SMS,
    cc: tuple[int, int] = (9, 0),
) -> float:
    tokens = mnbt
    H = arch.hidden_size
    mlp = _mlp_activation(arch, tokens, tp, d, set(stage_mlp))
    attn = 0.0 if vinfo.extensible else _attn_activation(arch, tokens, tp, d)
    if "mamba" in stage_kinds and arch.mamba is not None:
        m = arch.mamba
        width = (2 * m.k_heads * m.k_dim + 2 * m.v_heads * m.v_dim) if m.kind == "gdn" else 2 * m.intermediate
        attn = max(attn, tokens * width / tp * d * 1.5)
    a = tokens * H * d * 2 + max(mlp, attn)
    if last_stage:
        # The sampler runs after the forward pass; the torch peak is the larger of the two.
        rows = min(max_num_seqs, mnbt)
        a = max(a, tokens * H * d + sampler_bytes(vinfo, rows, arch.vocab_size, H, d, num_sms, cc))
    if first_stage and towers and arch.vision is not None:
        a = max(a, _encoder_activation(arch, mnbt, tp, d))
    return a


def cudagraph_bytes(
    arch: ModelArch, n_sizes: int, largest: int, tp: int, d: int, attn_layers: int, stage_mlp: tuple[str, ...]
) -> float:
    """Estimated CUDA-graph pool for piecewise capture (the largest size's piece outputs dominate)."""
    if n_sizes <= 0 or largest <= 0:
        return 0.0
    s = largest
    H = arch.hidden_size
    if arch.mla is not None:
        q_width = arch.num_heads / tp * (arch.mla.kv_lora_rank + arch.mla.qk_rope_head_dim)
        kv_width = arch.mla.kv_lora_rank + arch.mla.qk_rope_head_dim
    else:
        kvh = max(1, arch.num_kv_heads // tp) if arch.num_kv_heads else 0
        q_width = arch.num_heads / tp * arch.head_dim
        kv_width = kvh * arch.head_dim
    pieces = attn_layers + 1
    outputs = pieces * s * (2 * q_width + 2 * kv_width + H) * d
    inner = _mlp_activation(arch, s, tp, d, set(stage_mlp)) + s * H * d * 2
    graphs = n_sizes * (pieces + 1)
    return outputs + inner + graphs * GRAPH_EXEC_BYTES


@dataclass(frozen=True, slots=True)
class StageMemory:
    total: int  # CUDA total T
    requested: int  # T * gmu (the instance's budget; T when the 0.34 extensible cache has no gmu)
    pre_snapshot: int  # used before vLLM's baseline snapshot (context, NCCL, cuBLAS by family)
    weights: int
    activation: int
    non_torch: int
    cuda_graphs: int
    available_kv: int
    graph_headroom: int  # memory left outside the budget for graph capture (families before 0.20)


def stage_memory(
    gpu: GpuSpec,
    vinfo: VersionInfo,
    gmu: float | None,
    weights: float,
    activation: float,
    graphs: float,
    world: int,
    tp: int,
    pp: int = 1,
    hidden: int = 0,
    d: int = 2,
    mnbt: int = 0,
    runner_state: int = 0,
) -> StageMemory:
    T = gpu.cuda_total_bytes
    nccl = nccl_bytes(world)
    pre = pre_snapshot_bytes(vinfo, world)
    # runner_state: persistent torch buffers allocated after the weights (sampler.sampler_state_bytes),
    # counted with the non-torch growth as memory that is neither weights nor the profile's peak
    non_torch = in_budget_non_torch(vinfo, world, tp, pp, gpu.cc, hidden, d, mnbt) + runner_state
    W = int(weights)
    A = int(activation)
    G = int(graphs)
    headroom = 0
    if vinfo.extensible:
        requested = math.ceil(T * gmu) if gmu is not None else T
        free_snap = T - pre - gpu.used_bytes
        margin = max(EXT_MARGIN_MIN, int(0.75 * A))
        avail = min(requested, free_snap - margin) - (W + non_torch + G) - A
    else:
        g = gmu if gmu is not None else vinfo.gmu_default
        requested = int(T * g)
        if vinfo.absolute_budget:
            # 0.8.x: everything on the GPU, other processes included, counts against total x gmu
            avail = requested - (W + A + non_torch + CUDA_CONTEXT + nccl + gpu.used_bytes)
            headroom = T - requested - G
        else:
            avail = requested - (W + A + non_torch)
            if vinfo.cudagraph_in_budget:
                avail -= G
            else:
                headroom = T - requested - pre - G - gpu.used_bytes
    return StageMemory(T, requested, pre, W, A, non_torch, G, int(avail), int(headroom))
