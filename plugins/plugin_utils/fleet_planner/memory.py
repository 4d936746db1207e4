"""Per-GPU memory accounting, family by family (how vLLM arrives at "Available KV cache memory").

What vLLM measures at startup (activation peak, non-torch growth, CUDA-graph pool) cannot be read
from a config; it is estimated here from the shapes that produce it:

* activation peak A: one dummy forward of `max_num_batched_tokens` tokens without KV cache
  (residual + normed hidden states, the widest of gate/up+activation, fused-MoE workspaces and
  q/k/v); on the last PP stage the dummy sampler pass that follows it (fp32 logits plus the
  top-k/top-p temporaries over min(max_num_seqs, mnbt) rows, see sampler.py), which usually sets
  the peak;
  the encoder pass of multimodal models; and, where 0.34's extensible KV cache keeps the warm-up's peak
  free, the warm-up's spec-decode verify step over max_num_seqs x (1 + K) logits rows (sampler.py);
* CUDA graphs G (cuda_graphs.py): what the capture takes and, per model runner and release, what
  of it is reserved inside the budget;
* fixed costs: CUDA context, NCCL communicators for multi-GPU workers, cuBLAS workspaces.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping
from typing import NamedTuple

from .config import ModelArch
from .errors import GIB
from .gpu import GpuSpec
from .identity_cache import IdentityCache
from .multimodal import encoder_profile, encoder_rows, kept_rows, max_tokens_per_item
from .non_torch import (
    CUDA_CONTEXT,
    CUSTOM_ALLREDUCE,
    MISC_NON_TORCH,
    NCCL_BASE,
    NCCL_PER_PEER,
    custom_allreduce_topology_ok,
    device_nccl_bytes,
    in_budget_non_torch,
    multicast_capable,
    nccl_bytes,
    pre_snapshot_bytes,
)
from .quant import QuantSpec
from .sampler import DEFAULT_SMS, sampler_bytes, spec_warmup_bytes
from .v0_engine import v0_available_kv, v0_family, v0_non_torch
from .versions import VersionInfo

__all__ = [
    "CUDA_CONTEXT",
    "CUSTOM_ALLREDUCE",
    "MISC_NON_TORCH",
    "NCCL_BASE",
    "NCCL_PER_PEER",
    "StageMemory",
    "activation_peak",
    "nccl_bytes",
    "stage_memory",
]
EXT_MARGIN_MIN = 1 * GIB  # extensible KV cache: minimum headroom kept free (CUDA)
FUSED_MOE_CHUNK = 32768  # VLLM_FUSED_MOE_CHUNK_SIZE
MODULAR_MOE_CHUNK = 16384  # VLLM_FUSED_MOE_CHUNK_SIZE of the 0.14-0.17 modular kernel (0.18+ does not chunk)


def moe_workspace_bytes(
    arch: ModelArch,
    tokens: int,
    tp: int,
    d: int,
    vinfo: VersionInfo,
    quant: QuantSpec | None,
    cc: tuple[int, int],
    mlp_kinds: Collection[str],
) -> float:
    """The fused-MoE workspace that stays allocated through the profile (0 where vLLM takes another path).

    From 0.13 the modular MoE kernel (``FusedMoEModularKernel._allocate_buffers``, fused_moe/
    modular_kernel.py) takes its two workspaces from the worker's ``WorkspaceManager``
    (v1/worker/workspace.py), one buffer that grows to the largest request and is never freed, so it is
    still held when the sampler pass sets the profile's torch peak. ``TritonExperts.workspace_shapes``
    (fused_moe/fused_moe.py): (M, top_k, max(N/2, K)) shared with the (M, K) output, and (M, top_k,
    max(N, K)), N the gate+up width per rank, K the hidden size, each rounded to 256 bytes. The Triton
    experts run through it for unquantized MoE on CUDA from 0.14 (0.13 still calls ``fused_experts`` with
    per-call caches; ``UnquantizedFusedMoEMethod``, read in 0.13.0, 0.14.1, 0.15.1, 0.16.0, 0.17.1-0.20.0
    and 0.34.0) and for block-FP8 checkpoints on Hopper at TP from 0.17 ("On Hopper for Block Fp8, prefer
    Triton for TP", fused_moe/oracle/fp8.py); Blackwell takes FlashInfer's TRT-LLM kernel there, which
    keeps no such workspace. Other quantized MoE paths keep their per-call buffers (_mlp_activation).
    """
    moe = arch.moe
    if moe is None or "moe" not in mlp_kinds:
        return 0.0
    v = vinfo.version
    if quant is None or not quant.is_quantized:
        if v < (0, 14):
            return 0.0
    elif not (quant.method == "fp8" and quant.block is not None and cc[0] == 9 and v >= (0, 17)):
        return 0.0
    m = tokens if v >= (0, 18) else min(tokens, MODULAR_MOE_CHUNK)
    n = moe.expert_intermediate // tp
    k = arch.hidden_size
    ws13 = max(m * moe.top_k * max(n, k), m * k) * d
    ws2 = m * moe.top_k * max(2 * n, k) * d
    return float(-(-ws13 // 256) * 256 + -(-ws2 // 256) * 256)


def _mlp_activation(
    arch: ModelArch, tokens: int, tp: int, d: int, mlp_kinds: Collection[str], moe_caches: bool = True
) -> float:
    """The MLP's transient peak; ``moe_caches=False`` where the experts' caches live in the persistent
    workspace (moe_workspace_bytes) and only the router logits and shared experts come and go."""
    H = arch.hidden_size
    peak = 0.0
    if "dense" in mlp_kinds:
        peak = max(peak, tokens * 2 * arch.intermediate_size / tp * d * 1.5)
    if arch.moe is not None and "moe" in mlp_kinds:
        moe = arch.moe
        work = tokens * moe.num_experts * 4
        if moe_caches:
            m = min(tokens, FUSED_MOE_CHUNK)
            n = moe.expert_intermediate / tp
            work += m * moe.top_k * (max(2 * n, H) + n) * d
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


def _encoder_activation(
    arch: ModelArch,
    mnbt: int,
    tp: int,
    d: int,
    seqs: int,
    max_model_len: int,
    limits: Mapping[str, int],
    version: tuple[int, ...],
) -> tuple[float, float]:
    """(peak of the encoder pass, encoder outputs kept alive through the text dummy forward)."""
    v = arch.vision
    if v is None:
        return 0.0, 0.0
    modality, tokens, items = encoder_profile(arch, mnbt, seqs, max_model_len, limits, version)
    if tokens:
        merge = v.merge * v.merge
        rows = encoder_rows(arch, modality, tokens, version)
        out_tokens = rows * items
        width = max(v.out_hidden, 1) * (1 + v.deepstack)
        kept = items * kept_rows(rows, max(mnbt, tokens), version) * width * d
    elif max_tokens_per_item(arch, max_model_len, version) or not any(
        limits.get(m, 1) for m in ("image", "video")
    ):
        return 0.0, 0.0  # every modality disabled by limit_mm_per_prompt: no encoder pass
    else:
        merge = 4  # families not modelled: a 2x2 spatial merge and one 16384-token budget
        out_tokens = max(mnbt, 16384)
        kept = 0.0
    patches = out_tokens * merge
    peak = patches * (4 * v.hidden + 2 * v.intermediate / tp) * d + out_tokens * max(v.out_hidden, 1) * d
    return peak, kept


# PyTorch's default cuBLAS workspace (aten/src/ATen/cuda/CublasHandlePool.cpp, parseChosenWorkspaceSize:
# ":4096:8" = 32 MiB on compute capability 9.0, ":4096:2:16:8" = 8.125 MiB elsewhere), allocated by the
# caching allocator (allocateCUDABlasWorkspace) when a handle and stream first run a GEMM.
TORCH_CUBLAS_WORKSPACE_SM90 = 4096 * 8 * 1024
TORCH_CUBLAS_WORKSPACE = (4096 * 2 + 16 * 8) * 1024


def torch_cublas_workspace(vinfo: VersionInfo, cc: tuple[int, int]) -> int:
    """Bytes of PyTorch's cuBLAS workspace inside the profile's torch peak: the profile run is the
    worker's first GEMM, so the workspace is allocated there and stays. The 0.19 H100 starts log their
    torch peak 0.03-0.04 GiB above the forward/sampler peak, the 0.7.3 RTX 4060 start 0.01 GiB. Later
    releases are left out: newer torch leaves the workspace to cuBLAS (TORCH_CUBLAS_WORKSPACE_CACHE off),
    outside the caching allocator, which the planner's non-torch cuBLAS term covers."""
    if not vinfo.cublas_workspace_torch:
        return 0
    return TORCH_CUBLAS_WORKSPACE_SM90 if cc == (9, 0) else TORCH_CUBLAS_WORKSPACE


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
    max_model_len: int = 0,
    mm_limits: Mapping[str, int] | None = None,
    num_sms: int = DEFAULT_SMS,
    cc: tuple[int, int] = (9, 0),
    quant: QuantSpec | None = None,
    spec_tokens: int = 0,
    draft_slots: int = 0,
) -> float:
    """spec_tokens: num_speculative_tokens of the speculative config (0 without one); draft_slots: the
    method's max_num_new_slots_for_drafting."""
    tokens = mnbt
    H = arch.hidden_size
    workspace = moe_workspace_bytes(arch, tokens, tp, d, vinfo, quant, cc, stage_mlp)
    mlp = _mlp_activation(arch, tokens, tp, d, stage_mlp, moe_caches=not workspace)
    attn = 0.0 if vinfo.extensible else _attn_activation(arch, tokens, tp, d)
    if arch.mamba is not None and "mamba" in stage_kinds:
        m = arch.mamba
        width = (2 * m.k_heads * m.k_dim + 2 * m.v_heads * m.v_dim) if m.kind == "gdn" else 2 * m.intermediate
        attn = max(attn, tokens * width / tp * d * 1.5)
    a = tokens * H * d * 2 + max(mlp, attn) + workspace
    if last_stage:
        # The sampler runs after the forward pass; the torch peak is the larger of the two.
        rows = min(max_num_seqs, mnbt)
        sampler = sampler_bytes(vinfo, rows, arch.vocab_size, H, d, num_sms, cc)
        a = max(a, tokens * H * d + sampler + workspace)
    if first_stage and towers and arch.vision is not None:
        peak, kept = _encoder_activation(
            arch, mnbt, tp, d, max_num_seqs, max_model_len, mm_limits or {}, vinfo.version
        )
        a = max(a + kept, peak)
    a += torch_cublas_workspace(vinfo, cc)
    if last_stage and spec_tokens:
        # 0.34 keeps free the larger of the profile's peak and the warm-up's (measure_kv_cache_blocks); the
        # warm-up's is allocated peak - current, so what the profile left allocated (cuBLAS workspace, the
        # Triton top-k buffer, the MoE workspace) is not in it
        verify = spec_warmup_bytes(vinfo, max_num_seqs, mnbt, spec_tokens, draft_slots, arch.vocab_size, H, d)
        a = max(a, verify)
    return a


class StageMemory(NamedTuple):  # immutable, and built for every stage of every evaluation: cheap to make
    total: int  # CUDA total T
    requested: int  # T * gmu (the instance's budget; T when the 0.34 extensible cache has no gmu)
    pre_snapshot: int  # used before vLLM's baseline snapshot (context, NCCL, cuBLAS by family)
    weights: int
    activation: int
    non_torch: int
    cuda_graphs: int  # the pool the capture takes
    available_kv: int
    graph_headroom: int  # memory left outside the budget once the graphs not reserved in it are captured
    cuda_graphs_reserved: int = 0  # the part of cuda_graphs subtracted from the KV budget


_RUNTIME_CACHE: IdentityCache[tuple[int, bool, int, int]] = IdentityCache(16384)


def runtime_bytes(
    gpu: GpuSpec, vinfo: VersionInfo, world: int, tp: int, pp: int, hidden: int, d: int, mnbt: int
) -> tuple[int, bool, int, int]:
    """(NCCL device bytes, custom all-reduce on under V0, pre-snapshot bytes, in-budget non-torch bytes):
    what the GPUs' topology and the parallel layout cost, whatever the model's weights (cached, as every
    candidate and fix of a plan asks again)."""
    values = (gpu.name, gpu.cc, gpu.count > 1, gpu.nodes, gpu.p2p, world, tp, pp, hidden, d, mnbt)
    hit = _RUNTIME_CACHE.get((vinfo,), values)
    if hit is not None:
        return hit
    # without CUDA P2P on one node NCCL's buffers are host memory and vLLM has no custom all-reduce
    p2p = gpu.p2p or gpu.nodes > 1
    nccl = device_nccl_bytes(world, gpu.p2p, gpu.nodes)
    custom_ar = custom_allreduce_topology_ok(gpu.name, tp)
    if vinfo.v0_engine:
        out = (nccl, tp > 1 and p2p and custom_ar, 0, 0)
    else:
        # Hopper SXM and Blackwell data-center boards: NVSwitch, with NVLink multicast
        nvswitch = multicast = gpu.count > 1 and multicast_capable(gpu.name, gpu.cc)
        non_torch = in_budget_non_torch(
            vinfo, world, tp, pp, gpu.cc, hidden, d, mnbt, nvswitch, multicast, p2p, custom_ar
        )
        out = (nccl, False, pre_snapshot_bytes(vinfo, world, gpu.p2p, gpu.nodes), non_torch)
    return _RUNTIME_CACHE.put((vinfo,), values, out)


def stage_memory(
    gpu: GpuSpec,
    vinfo: VersionInfo,
    gmu: float | None,
    weights: float,
    activation: float,
    graphs: float,
    world: int,
    tp: int,
    graphs_reserved: float | None = None,
    pp: int = 1,
    hidden: int = 0,
    d: int = 2,
    mnbt: int = 0,
    runner_state: int = 0,
    runtime: tuple[int, bool, int, int] | None = None,
) -> StageMemory:
    """graphs: the CUDA-graph pool captured; graphs_reserved: what of it the release subtracts from the
    KV budget (None: all of it from 0.20 on, as the V1 runner's estimate does, none before);
    runtime: runtime_bytes for these GPUs and this layout, when the caller has it."""
    T = gpu.cuda_total_bytes
    if runtime is None:
        runtime = runtime_bytes(gpu, vinfo, world, tp, pp, hidden, d, mnbt)
    nccl, ar, pre, non_torch = runtime
    if vinfo.v0_engine:
        return _v0_stage_memory(gpu, vinfo, gmu, weights, activation, graphs, nccl, ar)
    # runner_state: persistent torch buffers allocated after the weights (sampler.sampler_state_bytes),
    # counted with the non-torch growth as memory that is neither weights nor the profile's peak
    non_torch += runner_state
    W = int(weights)
    A = int(activation)
    G = int(graphs)
    if graphs_reserved is None:
        graphs_reserved = G if (vinfo.cudagraph_in_budget or vinfo.extensible) else 0
    R = int(graphs_reserved)
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
            # graphs are captured after the KV cache: what the profile did not reserve comes from
            # the memory outside the budget
            avail = requested - (W + A + non_torch) - R
            headroom = T - requested - pre - gpu.used_bytes - max(G - R, 0)
    return StageMemory(T, requested, pre, W, A, non_torch, G, int(avail), int(headroom), R)


def _v0_stage_memory(
    gpu: GpuSpec,
    vinfo: VersionInfo,
    gmu: float | None,
    weights: float,
    activation: float,
    graphs: float,
    nccl: int,
    custom_allreduce: bool,
) -> StageMemory:
    """V0 engine (v0_engine.py): graphs are captured after the cache, outside the budget."""
    T = gpu.cuda_total_bytes
    requested = int(T * (gmu if gmu is not None else vinfo.gmu_default))
    W, A, G = int(weights), int(activation), int(graphs)
    non_torch = v0_non_torch(nccl, CUSTOM_ALLREDUCE if custom_allreduce else 0)
    avail = v0_available_kv(vinfo.version, requested, W, A, non_torch, CUDA_CONTEXT, gpu.used_bytes)
    outside = v0_family(vinfo.version) != "V0-peak-nontorch"
    pre = CUDA_CONTEXT if outside else 0
    headroom = T - requested - G - (CUDA_CONTEXT + gpu.used_bytes if outside else 0)
    return StageMemory(T, requested, pre, W, A, non_torch, G, int(avail), int(headroom), 0)
