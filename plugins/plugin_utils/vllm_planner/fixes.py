"""Fixes: why no candidate fits, told the way vLLM would fail, with concrete changes that make it fit."""

from __future__ import annotations

import math

from . import errors as E
from .candidates import tp_problems
from .errors import MIB
from .evaluation import Ctx, Evaluation, evaluate, fixed_kv_overflow, replace_ctx
from .memory import CUDA_CONTEXT, nccl_bytes
from .settings import Settings, fmt_gib, quant_for
from .weights import stage_bytes

MIN_USEFUL_CONTEXT = 2048


def dtype_label(d: str) -> str:
    return {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}.get(d, d)


def fixed_kv_error(ctx: Ctx, evals: list[Evaluation]) -> str | None:
    """Why a fixed KV cache fits on no candidate (told for the one it misses by least), else None."""
    if ctx.kv_cache_memory_bytes is None or not evals:
        return None
    # a candidate fits only if every pipeline stage does: judge it by its worst stage
    worst = [
        max(((fixed_kv_overflow(ctx, st.mem), st.mem) for st in e.stages), key=lambda x: x[0]) for e in evals
    ]
    over, m = min(worst, key=lambda x: x[0])
    if over <= 0:
        return None
    needed = m.total + over
    return (
        f"kv_cache_memory_bytes: {fmt_gib(m.available_kv)} GiB of KV cache on top of "
        f"{fmt_gib(needed - m.available_kv)} GiB of weights, activations and runtime needs "
        f"{fmt_gib(needed)} GiB per GPU, more than its {fmt_gib(m.total)} GiB: vLLM would run out "
        "of memory allocating the cache. Fix: lower kv_cache_memory_bytes or add GPUs "
        "(tensor_parallel_size)."
    )


def memory_errors(
    s: Settings,
    evals: list[Evaluation],
    want_len: int,
    mnbt: int,
    seqs: int,
    tps: list[int],
    seq_var: str = "max_num_seqs",
) -> list[str]:
    """Explain why nothing fits at ``want_len``, with concrete fixes (each names the variable to change)."""
    ctx, name, dtype, gmu = s.ctx, s.name, s.dtype, s.gmu
    user_gmu, user_len, target_len = (
        s.opts.gpu_memory_utilization,
        s.opts.max_model_len,
        s.opts.target_context_len,
    )
    fixed_kv = fixed_kv_error(ctx, evals)
    if fixed_kv:
        return [fixed_kv]
    g, vinfo = ctx.gpu, ctx.vinfo

    def quick(c: Ctx, tp: int, pp: int, gmu_: float | None, mnbt_: int, seqs_: int) -> Evaluation | None:
        """Evaluate only when the weights alone leave room in the budget (fixes are tried many times)."""
        frac = gmu_ if gmu_ is not None else (1.0 if vinfo.extensible else vinfo.gmu_default)
        stages = stage_bytes(c.arch, c.quant, c.d, tp, pp, towers=False, cc=g.cc)
        if max(stages) * c.weight_scale >= g.cuda_total_bytes * frac:
            return None
        return evaluate(c, tp, pp, gmu_, mnbt_, seqs_, want_len)

    fixes: list[str] = []
    best = max(evals, key=lambda e: (e.l_fit, e.stage.mem.available_kv))
    mem = best.stage.mem
    gpus_label = (
        f"{g.name} {g.cuda_total_gib:.0f} GiB" if g.name != "unknown" else f"{g.cuda_total_gib:.0f} GiB"
    )
    lines: list[str] = []
    weights_ok = [e for e in evals if e.weights_fit]
    length_var = (
        "max_model_len"
        if user_len is not None
        else ("target_context_len" if target_len is not None else "max_model_len")
    )
    if weights_ok:
        e = max(weights_ok, key=lambda x: x.l_fit)
        s = e.stage
        needed = s.layout.needed_bytes(want_len, mnbt * ctx.inflight_mult(e.pp), ctx.mamba_blocks)
        est = max(e.l_fit, 0)
        gmu_shown = gmu if gmu is not None else (None if vinfo.extensible else vinfo.gmu_default)
        if vinfo.version < (0, 8):  # the V0 engine (default before 0.8) words it by token count
            msg = E.v0_kv_too_small(want_len, s.num_blocks * s.layout.block_size)
        else:
            msg = E.kv_too_small(
                vinfo.kv_error_variant,
                vinfo.kv_error_link,
                want_len,
                needed,
                max(s.budget, 0),
                est,
                extensible=vinfo.extensible,
                gmu=gmu_shown if user_gmu is not None else None,
            )
        lines.append(msg)
        if est >= 1:
            fixes.append(f"set {length_var} <= {est}")
    else:
        total_w = best.stage.mem.weights
        shown_gmu = gmu if gmu is not None else (1.0 if vinfo.extensible else vinfo.gmu_default)
        need = total_w + mem.activation + mem.non_torch + mem.cuda_graphs
        lines.append(
            f"{name} needs {fmt_gib(need)} GiB per GPU "
            f"at {dtype_label(dtype)} with tensor_parallel_size {best.tp}"
            + (f" x pipeline_parallel_size {best.pp}" if best.pp > 1 else "")
            + f" (weights {fmt_gib(total_w)} GiB, activations {fmt_gib(mem.activation)} GiB), but "
            f"{gpus_label} x gpu_memory_utilization {shown_gmu}"
            f" leaves {fmt_gib(mem.requested)} GiB."
            + (f" {E.NO_CACHE_MEMORY}" if mem.available_kv <= 0 else "")
        )
    # fix: more tensor parallelism (within a node, or with more GPUs)
    budget = g.cuda_total_bytes * (
        gmu if gmu is not None else (1.0 if vinfo.extensible else vinfo.gmu_default)
    )
    for t in range(best.tp + 1, 65):
        if tp_problems(ctx.arch, t, ctx.quant):
            continue
        w_t = stage_bytes(ctx.arch, ctx.quant, ctx.d, t, 1, towers=False, cc=g.cc)[0] * ctx.weight_scale
        if w_t >= budget:
            continue
        e2 = evaluate(ctx, t, 1, gmu, mnbt, seqs, want_len)
        if e2.weights_fit and e2.l_fit >= min(want_len, MIN_USEFUL_CONTEXT):
            if t <= g.count:
                fixes.insert(0, f"set tensor_parallel_size {t}")
            else:
                fixes.insert(
                    0,
                    f"use a node with >= {t} such GPUs (tensor_parallel_size {t}); {name} needs "
                    f">= {t}x{g.cuda_total_gib:.0f} GiB at {dtype_label(dtype)}",
                )
            break
    # fix: pipeline parallelism across more nodes
    if g.nodes == 1 and not weights_ok:
        tp_node = max((t for t in tps if t <= g.count), default=1)
        for p in range(2, 9):
            e3 = quick(ctx, tp_node, p, gmu, mnbt, seqs)
            if e3 is not None and e3.weights_fit and e3.l_fit >= min(want_len, MIN_USEFUL_CONTEXT):
                fixes.append(
                    f"add nodes: {p} nodes with pipeline_parallel_size {p} and tensor_parallel_size {tp_node}"
                )
                break

    def _ok(e: Evaluation | None) -> bool:
        return (
            e is not None
            and e.weights_fit
            and e.l_fit >= min(want_len, MIN_USEFUL_CONTEXT)
            and e.l_fit > best.l_fit
        )

    def _cap(e: Evaluation) -> str:
        return "" if e.l_fit >= want_len else f" with {length_var} <= {e.l_fit}"

    # fix: quantization
    if not ctx.quant.is_quantized and g.cc >= (8, 0):
        q8 = quant_for(ctx.arch, "fp8")
        ctx_q = replace_ctx(ctx, quant=q8)
        for t in [best.tp] + [x for x in tps if x > best.tp]:
            e4 = quick(ctx_q, t, best.pp, gmu, mnbt, seqs)
            if e4 is not None and _ok(e4):
                extra = "" if t == best.tp else f" and tensor_parallel_size {t}"
                fixes.append(
                    f"set quantization fp8{extra} (weights ~{fmt_gib(e4.stage.mem.weights)} GiB per GPU)"
                    + _cap(e4)
                )
                break
    # fix: fp8 KV cache
    if weights_ok and ctx.kv_bytes > 1:
        e5 = quick(replace_ctx(ctx, kv_dtype="fp8", kv_bytes=1), best.tp, best.pp, gmu, mnbt, seqs)
        if _ok(e5):
            fixes.append("set kv_cache_dtype fp8" + _cap(e5))
    # fix: higher gpu_memory_utilization
    if not vinfo.extensible:
        pre = CUDA_CONTEXT + (0 if vinfo.nccl_in_budget else nccl_bytes(best.tp * best.pp))
        outside = 0 if vinfo.cudagraph_in_budget else mem.cuda_graphs
        max_gmu = (
            math.floor((g.cuda_total_bytes - pre - outside - 256 * MIB) / g.cuda_total_bytes * 100) / 100
        )
        cur = gmu if gmu is not None else vinfo.gmu_default
        if max_gmu > cur + 0.005:
            e6 = quick(ctx, best.tp, best.pp, max_gmu, mnbt, seqs)
            if _ok(e6):
                fixes.append(f"set gpu_memory_utilization {max_gmu:.2f}" + _cap(e6))
    elif gmu is not None and gmu < 1.0:
        e6 = quick(ctx, best.tp, best.pp, None, mnbt, seqs)
        if _ok(e6):
            fixes.append(
                "leave gpu_memory_utilization unset (the extensible KV cache then takes all free memory)"
                + _cap(e6)
            )
    # fix: no CUDA graphs inside the budget
    if (
        not ctx.enforce_eager
        and (vinfo.cudagraph_in_budget or vinfo.extensible)
        and mem.cuda_graphs > 256 * MIB
    ):
        e7 = quick(replace_ctx(ctx, enforce_eager=True), best.tp, best.pp, gmu, mnbt, seqs)
        if _ok(e7):
            fixes.append(
                f"set enforce_eager true (frees ~{fmt_gib(mem.cuda_graphs)} GiB of CUDA graphs, slower "
                "decode)" + _cap(e7)
            )
    # fix: smaller profiling batch
    if mnbt > 2048 or seqs > 256:
        small_mnbt, small_seqs = min(mnbt, 2048), min(seqs, 256)
        e8 = quick(ctx, best.tp, best.pp, gmu, small_mnbt, small_seqs)
        if _ok(e8):
            fixes.append(
                f"set max_num_batched_tokens {small_mnbt} and max_num_seqs {small_seqs} (activation peak "
                f"{fmt_gib(mem.activation)} -> {fmt_gib(e8.stage.mem.activation)} GiB)" + _cap(e8)
            )
    if weights_ok:
        variable = length_var
    elif mem.activation > mem.weights:
        variable = seq_var  # the profiling batch, not the model, fills the GPU
    else:
        variable = "tensor_parallel_size"
    text = " ".join(lines)
    return [f"{variable}: {text} Fix: {'; or '.join(dict.fromkeys(fixes)) or 'use GPUs with more memory'}."]
