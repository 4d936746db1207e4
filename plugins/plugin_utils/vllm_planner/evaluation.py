"""Evaluation: memory and KV cache of one (TP, PP, sizing) candidate, as vLLM accounts it per stage."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from .config import ModelArch
from .cuda_graphs import (
    capture_sizes,
    captured_bytes,
    full_decode_sizes,
    model_capture_max,
    model_runner,
    reserved_bytes,
    v1_estimate_bytes,
)
from .gpu import GpuSpec
from .kv import KvLayout, build_layout, max_len_that_fits
from .lora import lora_bytes
from .memory import StageMemory, activation_peak, stage_memory
from .multimodal import encoder_profiled
from .quant import QuantSpec
from .sampler import sampler_state_bytes, sm_count
from .versions import VersionInfo
from .weights import get_pp_indices, stage_bytes, tower_bytes


@dataclass(slots=True)
class Stage:
    mem: StageMemory
    layout: KvLayout
    num_blocks: int
    budget: int  # bytes the max_model_len check compares against (available minus null block)


@dataclass(slots=True)
class Evaluation:
    tp: int
    pp: int
    stages: list[Stage]
    num_blocks: int
    binding: int
    l_fit: int
    weights_fit: bool

    @property
    def stage(self) -> Stage:
        return self.stages[self.binding]


@dataclass(slots=True)
class Ctx:
    arch: ModelArch
    gpu: GpuSpec
    vinfo: VersionInfo
    quant: QuantSpec
    d: int  # runtime dtype bytes
    kv_dtype: str
    kv_bytes: int
    weight_scale: float
    tower_override: float | None
    towers: bool
    enforce_eager: bool
    block_size: int | None
    inflight_mult: Callable[[int], int]
    mamba_blocks: int
    derived_len: int
    kv_cache_memory_bytes: int | None = None  # --kv-cache-memory-bytes: the KV budget verbatim
    max_loras: int = 0  # LoRA slots (0: LoRA off)
    max_lora_rank: int = 0
    mm_limits: tuple[tuple[str, int], ...] = ()  # --limit-mm-per-prompt (unset modalities: vLLM's 999)


def _layout(ctx: Ctx, tp: int, pp: int, rank: int) -> KvLayout:
    key = (
        id(ctx.arch),
        tp,
        pp,
        rank,
        ctx.kv_bytes,
        ctx.kv_dtype,
        ctx.d,
        ctx.gpu.cc[0],
        ctx.vinfo.version,
        ctx.block_size,
    )
    hit = _LAYOUT_CACHE.get(key)
    if hit is not None and hit[0] is ctx.arch:
        return hit[1]
    start, end = get_pp_indices(ctx.arch.num_layers, rank, pp)
    lay = build_layout(
        ctx.arch, start, end, tp, ctx.kv_bytes, ctx.kv_dtype, ctx.d, ctx.gpu, ctx.vinfo, ctx.block_size
    )
    if len(_LAYOUT_CACHE) > 8192:
        _LAYOUT_CACHE.clear()
    _LAYOUT_CACHE[key] = (ctx.arch, lay)
    return lay


_LAYOUT_CACHE: dict[tuple[Any, ...], tuple[ModelArch, KvLayout]] = {}


def _capture(max_num_seqs: int, mnbt: int, ctx: Ctx) -> tuple[int, int, int]:
    """(capture sizes, largest size, FULL decode graphs) of vLLM's default CUDA-graph capture."""
    if ctx.enforce_eager:
        return 0, 0, 0
    cap = 1024 if (ctx.vinfo.extensible and ctx.gpu.is_blackwell_dc) else 512
    sizes = capture_sizes(max_num_seqs, mnbt, cap, model_capture_max(ctx.arch, ctx.vinfo.version))
    n_full = full_decode_sizes(sizes, max_num_seqs) if ctx.vinfo.version >= (0, 11) else 0
    return len(sizes), sizes[-1], n_full


_STATIC_CACHE: dict[
    tuple[Any, ...], tuple[ModelArch, QuantSpec, list[tuple[float, float, float, float, KvLayout]]]
] = {}


def _stage_statics(
    ctx: Ctx, tp: int, pp: int, mnbt: int, seqs: int
) -> list[tuple[float, float, float, float, KvLayout]]:
    """(weights, activation peak, CUDA graphs captured, of them reserved in the budget, KV layout) per
    stage: everything but the budget.

    These depend on the model, parallelism and sizing, not on the GPU's memory, so a fleet planning one
    model for many hosts computes them once.
    """
    arch = ctx.arch
    key = (
        id(arch),
        id(ctx.quant),
        tp,
        pp,
        mnbt,
        seqs,
        ctx.d,
        ctx.kv_bytes,
        ctx.kv_dtype,
        ctx.weight_scale,
        ctx.tower_override,
        ctx.towers,
        ctx.enforce_eager,
        ctx.block_size,
        ctx.vinfo.version,
        ctx.gpu.cc,
        ctx.gpu.name,
        ctx.max_loras,
        ctx.max_lora_rank,
        ctx.mm_limits,
        ctx.derived_len,
    )
    hit = _STATIC_CACHE.get(key)
    if hit is not None and hit[0] is arch and hit[1] is ctx.quant:
        return hit[2]
    weights = stage_bytes(arch, ctx.quant, ctx.d, tp, pp, towers=False, cc=ctx.gpu.cc)
    n_sizes, largest, n_full = _capture(seqs, mnbt, ctx)
    runner = model_runner(arch, ctx.vinfo, ctx.quant)
    out = []
    for rank in range(pp):
        start, end = get_pp_indices(arch.num_layers, rank, pp)
        w = weights[rank] * ctx.weight_scale
        # LoRA slots are allocated at load, before the profile: vLLM counts them with the weights
        w += lora_bytes(
            arch, ctx.max_loras, ctx.max_lora_rank, tp, ctx.d, end - start, rank == 0, rank == pp - 1
        )
        if rank == 0 and ctx.towers:
            w += ctx.tower_override / tp if ctx.tower_override is not None else tower_bytes(arch, ctx.d, tp)
        kinds = arch.layer_kinds[start:end]
        mlp = arch.layer_mlp[start:end]
        act = activation_peak(
            arch,
            mnbt,
            seqs,
            tp,
            ctx.d,
            rank == pp - 1,
            ctx.vinfo,
            kinds,
            mlp,
            rank == 0,
            ctx.towers and encoder_profiled(runner, ctx.vinfo.version),
            # the encoder budget reads max_model_len; the model's own bounds it from above
            ctx.derived_len,
            dict(ctx.mm_limits),
            num_sms=sm_count(ctx.gpu.name),
            cc=ctx.gpu.cc,
        )
        lay = _layout(ctx, tp, pp, rank)
        shape = (arch, n_sizes, largest, tp, ctx.d, lay.attention_layers, mlp)
        graphs = captured_bytes(*shape, n_full)
        estimate = v1_estimate_bytes(*shape, n_full) if runner == "v1" else 0.0
        out.append((w, act, graphs, reserved_bytes(runner, ctx.vinfo, graphs, estimate), lay))
    if len(_STATIC_CACHE) > 8192:
        _STATIC_CACHE.clear()
    _STATIC_CACHE[key] = (arch, ctx.quant, out)
    return out


def evaluate(ctx: Ctx, tp: int, pp: int, gmu: float | None, mnbt: int, seqs: int, length: int) -> Evaluation:
    world = tp * pp
    inflight = mnbt * ctx.inflight_mult(pp)
    stages: list[Stage] = []
    l_fit = length
    weights_fit = True
    null_block = ctx.vinfo.null_block_in_check
    for rank, (w, act, graphs, reserved, lay) in enumerate(_stage_statics(ctx, tp, pp, mnbt, seqs)):
        state = sampler_state_bytes(ctx.vinfo, seqs, ctx.arch.vocab_size) if rank == pp - 1 else 0
        mem = stage_memory(
            ctx.gpu,
            ctx.vinfo,
            gmu,
            w,
            act,
            graphs,
            world,
            tp,
            reserved,
            pp=pp,
            hidden=ctx.arch.hidden_size,
            d=ctx.d,
            mnbt=mnbt,
            runner_state=state,
        )
        if ctx.kv_cache_memory_bytes is not None:
            # vLLM still profiles, then takes this value verbatim as each GPU's KV budget.
            mem = replace(mem, available_kv=ctx.kv_cache_memory_bytes)
        bpb = lay.bytes_per_block
        nb = int(mem.available_kv // bpb) if bpb > 0 and mem.available_kv > 0 else 0
        budget = mem.available_kv - (bpb if null_block else 0)
        if mem.available_kv <= 0 or (bpb > 0 and nb < 1) or fixed_kv_overflow(ctx, mem) > 0:
            weights_fit = False
            fit = 0
        elif bpb > 0:
            fit = max_len_that_fits(lay, budget, inflight, ctx.mamba_blocks, max(length, 1))
        else:
            fit = length
        l_fit = min(l_fit, fit)
        stages.append(Stage(mem, lay, nb, budget))
    binding = 0
    if pp > 1:
        binding = min(
            range(pp), key=lambda r: stages[r].num_blocks if stages[r].layout.bytes_per_block else 1 << 62
        )
    return Evaluation(tp, pp, stages, stages[binding].num_blocks, binding, l_fit, weights_fit)


def blocks_per_request(ctx: Ctx, ev: Evaluation, mnbt: int, length: int) -> int:
    lay = ev.stage.layout
    if not lay.groups:
        return 1
    return lay.blocks_per_request(length, mnbt * ctx.inflight_mult(ev.pp), ctx.mamba_blocks)


def concurrency(ctx: Ctx, ev: Evaluation, mnbt: int, length: int) -> float:
    bpr = blocks_per_request(ctx, ev, mnbt, length)
    return ev.num_blocks / bpr if bpr else 0.0


def fixed_kv_overflow(ctx: Ctx, mem: StageMemory) -> int:
    """Bytes by which a fixed KV cache (kv_cache_memory_bytes) and the rest exceed the GPU; 0 or less fits."""
    if ctx.kv_cache_memory_bytes is None:
        return 0
    needed = (
        mem.pre_snapshot + mem.weights + mem.activation + mem.non_torch + mem.cuda_graphs + mem.available_kv
    )
    return needed - mem.total


def replace_ctx(ctx: Ctx, **changes: Any) -> Ctx:
    fields = {f: getattr(ctx, f) for f in Ctx.__slots__}  # type: ignore[attr-defined]
    fields.update(changes)
    return Ctx(**fields)
