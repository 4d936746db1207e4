"""Evaluation: memory and KV cache of one (TP, PP, sizing) candidate, as vLLM accounts it per stage."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from dataclasses import fields as dataclass_fields
from functools import lru_cache
from typing import Any, cast

from .config import ModelArch
from .cuda_graphs import (
    capture_sizes,
    fa3_split_buffers,
    full_decode_sizes,
    graph_pools,
    model_capture_max,
    model_runner,
    reserved_bytes,
)
from .gpu import GpuSpec
from .identity_cache import IdentityCache
from .kv import KvLayout, build_layout, max_len_that_fits
from .lora import lora_bytes
from .memory import StageMemory, activation_peak, runtime_bytes, stage_memory
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
    spec_tokens: int = 0  # num_speculative_tokens (0: no speculative decoding)
    draft_slots: int = 0  # the method's max_num_new_slots_for_drafting
    # what the stage statics depend on besides the split and sizing, as a number
    statics_id: int = field(init=False, repr=False, compare=False)
    # what the KV layouts depend on besides the split, as a number (made on the first layout needed)
    _layout_id: int = field(init=False, repr=False, compare=False)
    # evaluations already made with this context: vLLM's defaults often repeat the search's sizing
    evaluations: dict[tuple[Any, ...], Evaluation] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.evaluations = {}
        self._layout_id = -1
        self.statics_id = _statics_id(
            (self.arch, self.quant, self.vinfo),
            (
                self.kv_bytes,
                self.kv_dtype,
                self.d,
                self.block_size,
                self.gpu.cc,
                self.weight_scale,
                self.tower_override,
                self.towers,
                self.enforce_eager,
                # the Triton sampler's buffers (0.17+); nothing else here reads the GPU's name
                sm_count(self.gpu.name) if self.vinfo.triton_topk else 0,
                self.max_loras,
                self.max_lora_rank,
                self.mm_limits,
                self.derived_len,
                self.spec_tokens,
                self.draft_slots,
            ),
        )

    @property
    def layout_id(self) -> int:
        if self._layout_id < 0:
            self._layout_id = _statics_id(
                (self.arch, self.vinfo),
                (self.kv_bytes, self.kv_dtype, self.d, self.gpu.cc[0], self.block_size),
            )
        return self._layout_id


# Contexts with equal inputs (the same model config, quantization and release objects) share a number,
# so the per-stage caches are keyed by small tuples. A number is never reused: the stage caches are emptied
# with the table.
_STATICS_IDS: IdentityCache[int] = IdentityCache(4096)
_NEXT_ID = itertools.count()


def _statics_id(objects: tuple[Any, ...], values: tuple[Any, ...]) -> int:
    n = _STATICS_IDS.get(objects, values)
    if n is None:
        if _STATICS_IDS.full():
            _STATIC_CACHE.clear()
            _LAYOUT_CACHE.clear()
        n = _STATICS_IDS.put(objects, values, next(_NEXT_ID))
    return n


def _layout(ctx: Ctx, tp: int, pp: int, rank: int) -> KvLayout:
    key = (ctx.layout_id, tp, pp, rank)
    hit = _LAYOUT_CACHE.get(key)
    if hit is not None:
        return hit
    start, end = get_pp_indices(ctx.arch.num_layers, rank, pp)
    lay = build_layout(
        ctx.arch, start, end, tp, ctx.kv_bytes, ctx.kv_dtype, ctx.d, ctx.gpu, ctx.vinfo, ctx.block_size
    )
    if len(_LAYOUT_CACHE) > 8192:
        _LAYOUT_CACHE.clear()
    _LAYOUT_CACHE[key] = lay
    return lay


_LAYOUT_CACHE: dict[tuple[int, ...], KvLayout] = {}


def _capture(max_num_seqs: int, mnbt: int, ctx: Ctx) -> tuple[int, int, int, int]:
    """(capture sizes, largest size, FULL decode graphs, largest FULL size) of vLLM's default
    CUDA-graph capture."""
    if ctx.enforce_eager:
        return 0, 0, 0, 0
    cap = 1024 if (ctx.vinfo.extensible and ctx.gpu.is_blackwell_dc) else 512
    return _capture_counts(
        max_num_seqs, mnbt, cap, model_capture_max(ctx.arch, ctx.vinfo.version), ctx.vinfo.version >= (0, 11)
    )


@lru_cache(maxsize=4096)
def _capture_counts(
    max_num_seqs: int, mnbt: int, cap: int, fixed_max: int | None, full: bool
) -> tuple[int, int, int, int]:
    sizes = capture_sizes(max_num_seqs, mnbt, cap, fixed_max)
    n_full = full_decode_sizes(sizes, max_num_seqs) if full else 0
    return len(sizes), sizes[-1], n_full, sizes[n_full - 1] if n_full else 0


Statics = tuple[float, float, float, float, KvLayout]
_STATIC_CACHE: dict[tuple[int, ...], Statics] = {}


def _stage_statics(ctx: Ctx, tp: int, pp: int, mnbt: int, seqs: int, rank: int) -> Statics:
    """(weights, activation peak, CUDA graphs captured, of them reserved in the budget, KV layout) of
    one stage: everything but the budget.

    These depend on the model, parallelism and sizing, not on the GPU's memory, so a fleet planning one
    model for many hosts computes them once.
    """
    key = (ctx.statics_id, tp, pp, mnbt, seqs, rank)
    hit = _STATIC_CACHE.get(key)
    if hit is not None:
        return hit
    out = _rank_statics(ctx, tp, pp, mnbt, seqs, rank)
    if len(_STATIC_CACHE) > 16384:
        _STATIC_CACHE.clear()
    _STATIC_CACHE[key] = out
    return out


def _rank_statics(ctx: Ctx, tp: int, pp: int, mnbt: int, seqs: int, rank: int) -> Statics:
    arch = ctx.arch
    w = stage_bytes(arch, ctx.quant, ctx.d, tp, pp, towers=False, cc=ctx.gpu.cc)[rank] * ctx.weight_scale
    n_sizes, largest, n_full, largest_full = _capture(seqs, mnbt, ctx)
    runner = model_runner(arch, ctx.vinfo, ctx.quant)
    start, end = get_pp_indices(arch.num_layers, rank, pp)
    # LoRA slots are allocated at load, before the profile: vLLM counts them with the weights
    w += lora_bytes(arch, ctx.max_loras, ctx.max_lora_rank, tp, ctx.d, end - start, rank == 0, rank == pp - 1)
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
        dict(ctx.mm_limits) if ctx.mm_limits else None,
        num_sms=sm_count(ctx.gpu.name),
        cc=ctx.gpu.cc,
        quant=ctx.quant,
        spec_tokens=ctx.spec_tokens,
        draft_slots=ctx.draft_slots,
    )
    lay = _layout(ctx, tp, pp, rank)
    split = (
        fa3_split_buffers(arch, tp, largest_full, ctx.gpu.cc, ctx.vinfo.version)
        if lay.attention_layers
        else 0.0
    )
    graphs, estimate = graph_pools(
        arch, n_sizes, largest, tp, ctx.d, lay.attention_layers, mlp, n_full, runner == "v1", split
    )
    return w, act, graphs, reserved_bytes(runner, ctx.vinfo, graphs, estimate), lay


def evaluate(ctx: Ctx, tp: int, pp: int, gmu: float | None, mnbt: int, seqs: int, length: int) -> Evaluation:
    key = (tp, pp, gmu, mnbt, seqs, length)
    done = ctx.evaluations.get(key)
    if done is not None:
        return done
    # without a needed length _evaluate never stops early
    done = cast(
        Evaluation, _evaluate(ctx, tp, pp, gmu, mnbt, seqs, length, None, _runtime(ctx, tp, pp, mnbt))
    )
    ctx.evaluations[key] = done
    return done


def _runtime(ctx: Ctx, tp: int, pp: int, mnbt: int) -> tuple[int, bool, int, int]:
    return runtime_bytes(ctx.gpu, ctx.vinfo, tp * pp, tp, pp, ctx.arch.hidden_size, ctx.d, mnbt)


def holds(
    ctx: Ctx, tp: int, pp: int, gmu: float | None, mnbt: int, seqs: int, length: int, need: int
) -> bool:
    """Whether every stage fits and holds a request of ``need`` tokens: evaluate's weights_fit and
    l_fit >= need, stopping at the first stage that does not (fixes try many splits that fail)."""
    return _evaluate(ctx, tp, pp, gmu, mnbt, seqs, length, need, _runtime(ctx, tp, pp, mnbt)) is not None


def _evaluate(
    ctx: Ctx,
    tp: int,
    pp: int,
    gmu: float | None,
    mnbt: int,
    seqs: int,
    length: int,
    need: int | None,
    runtime: tuple[int, bool, int, int],
) -> Evaluation | None:
    """Each pipeline stage's memory and KV cache and the longest request every stage holds; with
    ``need``, None as soon as a stage has no room for the cache or for a request of ``need`` tokens."""
    world = tp * pp
    inflight = mnbt * ctx.inflight_mult(pp)
    gpu, vinfo, d = ctx.gpu, ctx.vinfo, ctx.d
    null_block = vinfo.null_block_in_check
    hidden = ctx.arch.hidden_size
    fixed_kv = ctx.kv_cache_memory_bytes
    stages: list[Stage] = []
    l_fit = length
    weights_fit = True
    for rank in range(pp):
        w, act, graphs, reserved, lay = _stage_statics(ctx, tp, pp, mnbt, seqs, rank)
        state = sampler_state_bytes(vinfo, seqs, ctx.arch.vocab_size) if rank == pp - 1 else 0
        mem = stage_memory(
            gpu, vinfo, gmu, w, act, graphs, world, tp, reserved, pp, hidden, d, mnbt, state, runtime
        )
        if fixed_kv is not None:
            # vLLM still profiles, then takes this value verbatim as each GPU's KV budget.
            mem = mem._replace(available_kv=fixed_kv)
        avail = mem.available_kv
        bpb = lay.bytes_per_block
        nb = int(avail // bpb) if bpb > 0 and avail > 0 else 0
        budget = avail - (bpb if null_block else 0)
        if avail <= 0 or (bpb > 0 and nb < 1) or (fixed_kv is not None and fixed_kv_overflow(ctx, mem) > 0):
            weights_fit = False  # the weights and runtime leave no room for a cache
            fit = 0
        elif bpb > 0:
            fit = max_len_that_fits(lay, budget, inflight, ctx.mamba_blocks, max(length, 1))
        else:
            fit = length
        if need is not None and (not weights_fit or fit < need):
            return None
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


_CTX_INPUTS = tuple(f.name for f in dataclass_fields(Ctx) if f.init)


def replace_ctx(ctx: Ctx, **changes: Any) -> Ctx:
    fields = {name: getattr(ctx, name) for name in _CTX_INPUTS}
    fields.update(changes)
    return Ctx(**fields)
