"""Candidates: the (TP, PP) splits vLLM accepts for a model on these GPUs, and checks of explicit ones."""

from __future__ import annotations

import math
from dataclasses import dataclass

from . import errors as E
from .config import ModelArch
from .errors import MIB
from .identity_cache import IdentityCache
from .memory import CUDA_CONTEXT, nccl_bytes
from .quant import QuantSpec
from .settings import Notes, Settings

VOCAB_PADDING = 64  # vllm/model_executor/layers/vocab_parallel_embedding.py DEFAULT_VOCAB_PADDING_SIZE

_TP_CACHE: IdentityCache[list[str]] = IdentityCache(16384)


def tp_problems(arch: ModelArch, tp: int, quant: QuantSpec) -> list[str]:
    """vLLM's own messages for a tensor-parallel size the model cannot be split into."""
    out = _TP_CACHE.get((arch, quant), tp)
    if out is None:
        out = _TP_CACHE.put((arch, quant), tp, _tp_problems(arch, tp, quant))
    return list(out)


_SPLITTABLE_CACHE: IdentityCache[tuple[int, ...]] = IdentityCache(4096)


def splittable_tps(arch: ModelArch, quant: QuantSpec, upto: int) -> tuple[int, ...]:
    """The tensor-parallel sizes 1..upto that tp_problems accepts, ascending (fixes scan them per miss)."""
    out = _SPLITTABLE_CACHE.get((arch, quant), upto)
    if out is None:
        out = tuple(t for t in range(1, upto + 1) if not _tp_problems(arch, t, quant))
        _SPLITTABLE_CACHE.put((arch, quant), upto, out)
    return out


def _tp_problems(arch: ModelArch, tp: int, quant: QuantSpec) -> list[str]:
    out: list[str] = []
    nq = arch.num_heads
    if nq and nq % tp:
        out.append(E.heads_not_divisible(nq, tp))
        return out
    # The first module built is the embedding (VocabParallelEmbedding, every release): the vocabulary padded
    # to DEFAULT_VOCAB_PADDING_SIZE (64) is split evenly over the ranks, `divide` asserting it.
    vocab = arch.vocab_size
    padded = -(-vocab // VOCAB_PADDING) * VOCAB_PADDING
    if vocab and padded % tp:
        out.append(
            E.not_divisible(padded, tp)
            + f" (the {vocab}-token vocabulary, padded to a multiple of {VOCAB_PADDING}, across "
            f"tensor_parallel_size {tp})."
        )
    nkv = arch.num_kv_heads
    if arch.mla is None and nkv:
        kv = f" (the model's {nkv} KV heads across tensor_parallel_size {tp})."
        if nkv >= tp and nkv % tp:
            out.append(E.not_divisible(nkv, tp) + kv)
        elif nkv < tp and tp % nkv:
            out.append(E.not_divisible(tp, nkv) + kv)
    if "dense" in arch.layer_mlp and arch.intermediate_size % tp:
        out.append(E.not_divisible(arch.intermediate_size, tp) + f" (intermediate_size across {tp} GPUs).")
    if arch.moe is not None and arch.moe.expert_intermediate % tp:
        out.append(
            E.not_divisible(arch.moe.expert_intermediate, tp) + f" (moe_intermediate_size across {tp} GPUs)."
        )
    if arch.vision is not None and arch.vision.heads % tp:
        out.append(E.not_divisible(arch.vision.heads, tp) + f" (vision attention heads across {tp} GPUs).")
    if quant.block is not None:
        bn, bk = quant.block
        if "dense" in arch.layer_mlp and (arch.intermediate_size // tp) % bn:
            out.append(E.fp8_block_output(arch.intermediate_size // tp, bn))
        elif "dense" in arch.layer_mlp and (arch.intermediate_size // tp) % bk:
            out.append(E.fp8_block_input(arch.intermediate_size // tp, bk))
        elif arch.moe is not None and (arch.moe.expert_intermediate // tp) % bn:
            out.append(E.fp8_moe_block_output(arch.moe.expert_intermediate // tp, bn))
        elif arch.moe is not None and (arch.moe.expert_intermediate // tp) % bk:
            out.append(E.fp8_moe_block_input(arch.moe.expert_intermediate // tp, bk))
    elif quant.group_size and quant.method in ("awq", "gptq", "compressed-tensors", "modelopt"):
        for inter in _quant_inters(arch):
            part = inter // tp
            if part % quant.group_size:
                out.append(E.group_not_aligned(part, quant.group_size))
                break
    return out


def _quant_inters(arch: ModelArch) -> list[int]:
    inters = []
    if "dense" in arch.layer_mlp:
        inters.append(arch.intermediate_size)
    if arch.moe is not None:
        inters.append(arch.moe.expert_intermediate)
    return inters


def tp_candidates(arch: ModelArch, max_tp: int, quant: QuantSpec) -> list[int]:
    """Tensor-parallel sizes vLLM accepts for this model, smallest first."""
    return list(splittable_tps(arch, quant, max_tp))


def parallel_errors(s: Settings) -> list[str]:
    """What vLLM would reject in an explicit tensor/pipeline split or gpu_memory_utilization."""
    arch, g, vinfo, quant = s.ctx.arch, s.ctx.gpu, s.ctx.vinfo, s.ctx.quant
    user_tp, user_pp, user_gmu = (
        s.opts.tensor_parallel_size,
        s.opts.pipeline_parallel_size,
        s.opts.gpu_memory_utilization,
    )
    errors: list[str] = []
    if user_tp is not None:
        probs = tp_problems(arch, user_tp, quant)
        if probs:
            valid = tp_candidates(arch, max(g.count, user_tp), quant)
            errors.append(
                f"tensor_parallel_size: {probs[0]} Fix: set tensor_parallel_size to one of "
                f"{', '.join(str(t) for t in valid) or 'none'}."
            )
    world = (user_tp or 1) * (user_pp or 1)
    if user_tp is not None and user_tp > g.count:
        msg = (
            E.world_size_too_large(user_tp, g.count)
            if vinfo.world_size_error
            else f"tensor_parallel_size {user_tp} exceeds the {g.count} GPUs of one node"
        )
        errors.append(
            f"tensor_parallel_size: {msg} Fix: set tensor_parallel_size <= {g.count} and use "
            "pipeline_parallel_size across nodes."
        )
    if user_pp is not None and user_pp > 1:
        if world > g.count * g.nodes:
            errors.append(
                f"pipeline_parallel_size: {E.world_size_too_large(world, g.count)} Fix: "
                f"tensor_parallel_size x pipeline_parallel_size must be <= {g.count * g.nodes} "
                f"({g.nodes} node(s) x {g.count} GPUs)."
            )
        if user_pp > arch.num_layers:
            errors.append(
                f"pipeline_parallel_size: {user_pp} stages exceed the model's {arch.num_layers} "
                "layers. Fix: lower pipeline_parallel_size."
            )
    # vLLM's startup check (0.9+): the memory free at its first snapshot must hold total x gmu;
    # other processes on the GPU (memory_used_mib) count against it.
    gmu = user_gmu if user_gmu is not None else (vinfo.gmu_default if g.memory_used_mib else None)
    if gmu is not None and not vinfo.extensible:
        pre = CUDA_CONTEXT + (0 if vinfo.nccl_in_budget else nccl_bytes(world))
        free = g.cuda_total_bytes - pre - g.used_bytes
        req = int(g.cuda_total_bytes * gmu)
        if not vinfo.absolute_budget and free < req:
            max_ok = math.floor((free - 64 * MIB) / g.cuda_total_bytes * 100) / 100
            others = (
                f", or free the {g.memory_used_mib} MiB other processes hold on the GPU"
                if g.memory_used_mib
                else ""
            )
            errors.append(
                f"gpu_memory_utilization: {E.free_memory_short(free, g.cuda_total_bytes, gmu, req)}"
                f" Fix: set gpu_memory_utilization <= {max_ok:.2f}{others}."
            )
    return errors


@dataclass(frozen=True, slots=True)
class Candidates:
    tps: list[int]  # tensor-parallel sizes to try
    single: list[tuple[int, int]]  # (TP, 1): one node
    multi: list[tuple[int, int]]  # (TP, PP > 1): a pipeline across nodes


def candidates(s: Settings, notes: Notes) -> Candidates | tuple[int, int]:
    """The splits to evaluate, single-node first; or, when there is none, the (TP, PP) the
    infeasible plan reports (the reason is added to ``notes``)."""
    arch, g, quant = s.ctx.arch, s.ctx.gpu, s.ctx.quant
    user_tp, user_pp = s.opts.tensor_parallel_size, s.opts.pipeline_parallel_size
    if user_tp is not None:
        tps = [user_tp]
    else:
        tps = tp_candidates(arch, g.count, quant)
        if not tps:
            notes.errors.append(
                f"tensor_parallel_size: no tensor-parallel size up to {g.count} divides this model "
                f"({arch.num_heads} attention heads, {arch.num_kv_heads} KV heads). Fix: use a node "
                "with a GPU count that divides the attention heads."
            )
            return 1, 1
    if user_pp is not None:
        pps = [user_pp]
    else:
        pps = [1] + [p for p in range(2, g.nodes + 1) if p <= arch.num_layers]
    single = [(t, 1) for t in tps] if 1 in pps else []
    multi = [
        (t, p)
        for p in pps
        if p > 1
        for t in ([g.count] if user_tp is None else tps)
        if user_tp is not None or g.count in tps
    ]
    if user_tp is None and not multi and len(pps) > 1:
        multi = [(max(tps), p) for p in pps if p > 1]
    if user_pp is not None and user_pp > 1:
        # An explicit pipeline: every TP that fits the GPUs (within a node, or one stage per node).
        multi = [(t, user_pp) for t in tps if t <= g.count and t * user_pp <= g.count * g.nodes]
        if not multi:
            notes.errors.append(
                f"pipeline_parallel_size: {user_pp} stages need at least {user_pp} GPUs; this host offers "
                f"{g.count * g.nodes}. Fix: lower pipeline_parallel_size or add nodes."
            )
            return user_tp or 1, user_pp
    return Candidates(tps, single, multi)
