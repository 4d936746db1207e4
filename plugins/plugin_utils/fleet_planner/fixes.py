"""Fixes: why no candidate fits, told the way vLLM would fail, with concrete changes that make it fit."""

from __future__ import annotations

import math
from dataclasses import dataclass

from . import errors as E
from .candidates import splittable_tps
from .errors import MIB
from .evaluation import Ctx, Evaluation, concurrency, evaluate, fixed_kv_overflow, holds, replace_ctx
from .memory import CUDA_CONTEXT, StageMemory, nccl_bytes
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


def _weights_fill_budget(c: Ctx, tp: int, pp: int, gmu: float | None) -> bool:
    """Whether one stage's weights alone fill the budget (nothing evaluated there can fit)."""
    stages = stage_bytes(c.arch, c.quant, c.d, tp, pp, towers=False, cc=c.gpu.cc)
    return max(stages) * c.weight_scale >= c.gpu.cuda_total_bytes * _gmu_or_default(gmu, c)


def _gmu_or_default(gmu: float | None, ctx: Ctx) -> float:
    """The budget fraction vLLM applies: the extensible KV cache's default is the whole GPU."""
    return gmu if gmu is not None else (1.0 if ctx.vinfo.extensible else ctx.vinfo.gmu_default)


@dataclass(slots=True)
class _Miss:
    """One sizing that does not fit, and the means to try a change on it."""

    s: Settings
    want_len: int
    mnbt: int
    seqs: int
    tps: list[int]
    best: Evaluation  # the candidate closest to fitting
    weights_ok: list[Evaluation]  # candidates whose weights fit (the KV cache is what is short)
    length_var: str  # the option that set the wanted length

    @property
    def ctx(self) -> Ctx:
        return self.s.ctx

    @property
    def mem(self) -> StageMemory:
        return self.best.stage.mem

    def quick(
        self, c: Ctx, tp: int, pp: int, gmu: float | None, mnbt: int | None = None, seqs: int | None = None
    ) -> Evaluation | None:
        """Evaluate only when the weights alone leave room in the budget (fixes are tried many times)."""
        if _weights_fill_budget(c, tp, pp, gmu):
            return None
        return evaluate(
            c,
            tp,
            pp,
            gmu,
            self.mnbt if mnbt is None else mnbt,
            self.seqs if seqs is None else seqs,
            self.want_len,
        )

    def holds_useful(self, c: Ctx, tp: int, pp: int, gmu: float | None) -> bool:
        """useful(quick(...)) without building the evaluation: stops at the first stage that fails."""
        if _weights_fill_budget(c, tp, pp, gmu):
            return False
        need = min(self.want_len, MIN_USEFUL_CONTEXT)
        return holds(c, tp, pp, gmu, self.mnbt, self.seqs, self.want_len, need)

    def useful(self, e: Evaluation | None) -> bool:
        return e is not None and e.weights_fit and e.l_fit >= min(self.want_len, MIN_USEFUL_CONTEXT)

    def better(self, e: Evaluation | None) -> bool:
        """Fits a useful context, and a longer one than now."""
        return e is not None and self.useful(e) and e.l_fit > self.best.l_fit

    def cap(self, e: Evaluation) -> str:
        return "" if e.l_fit >= self.want_len else f" with {self.length_var} <= {e.l_fit}"


def _kv_short(m: _Miss) -> tuple[str, str | None]:
    """vLLM's message when the KV cache cannot hold one request, and the length that would fit."""
    ctx, vinfo, gmu = m.ctx, m.ctx.vinfo, m.s.gmu
    e = max(m.weights_ok, key=lambda x: x.l_fit)
    st = e.stage
    est = max(e.l_fit, 0)
    if vinfo.v0_engine:  # the V0 engine words it by token count
        msg = E.v0_kv_too_small(m.want_len, st.num_blocks * st.layout.block_size)
    else:
        gmu_shown = gmu if gmu is not None else (None if vinfo.extensible else vinfo.gmu_default)
        msg = E.kv_too_small(
            vinfo.kv_error_variant,
            vinfo.kv_error_link,
            m.want_len,
            st.layout.needed_bytes(m.want_len, m.mnbt * ctx.inflight_mult(e.pp), ctx.mamba_blocks),
            max(st.budget, 0),
            est,
            extensible=vinfo.extensible,
            gmu=gmu_shown if m.s.opts.gpu_memory_utilization is not None else None,
        )
    return msg, (f"set {m.length_var} <= {est}" if est >= 1 else None)


def _weights_too_big(m: _Miss) -> str:
    g, mem, best = m.ctx.gpu, m.mem, m.best
    gpus_label = (
        f"{g.name} {g.cuda_total_gib:.0f} GiB" if g.name != "unknown" else f"{g.cuda_total_gib:.0f} GiB"
    )
    need = mem.weights + mem.activation + mem.non_torch + mem.cuda_graphs
    return (
        f"{m.s.name} needs {fmt_gib(need)} GiB per GPU "
        f"at {dtype_label(m.s.dtype)} with tensor_parallel_size {best.tp}"
        + (f" x pipeline_parallel_size {best.pp}" if best.pp > 1 else "")
        + f" (weights {fmt_gib(mem.weights)} GiB, activations {fmt_gib(mem.activation)} GiB), but "
        f"{gpus_label} x gpu_memory_utilization {_gmu_or_default(m.s.gmu, m.ctx)}"
        f" leaves {fmt_gib(mem.requested)} GiB." + (f" {E.NO_CACHE_MEMORY}" if mem.available_kv <= 0 else "")
    )


def _fix_tensor_parallel(m: _Miss) -> str | None:
    """More tensor parallelism: within the node, or on a node with more such GPUs."""
    ctx, g = m.ctx, m.ctx.gpu
    for t in splittable_tps(ctx.arch, ctx.quant, 64):
        if t > m.best.tp and m.holds_useful(ctx, t, 1, m.s.gmu):
            if t <= g.count:
                return f"set tensor_parallel_size {t}"
            return (
                f"use a node with >= {t} such GPUs (tensor_parallel_size {t}); {m.s.name} needs "
                f">= {t}x{g.cuda_total_gib:.0f} GiB at {dtype_label(m.s.dtype)}"
            )
    return None


def _fix_pipeline(m: _Miss) -> str | None:
    """Pipeline parallelism across more nodes, when the weights do not fit one."""
    g = m.ctx.gpu
    if g.nodes != 1 or m.weights_ok:
        return None
    tp_node = max((t for t in m.tps if t <= g.count), default=1)
    for p in range(2, 9):
        if m.holds_useful(m.ctx, tp_node, p, m.s.gmu):
            return f"add nodes: {p} nodes with pipeline_parallel_size {p} and tensor_parallel_size {tp_node}"
    return None


def _fix_fp8_weights(m: _Miss) -> str | None:
    ctx, best = m.ctx, m.best
    if ctx.quant.is_quantized or ctx.gpu.cc < (8, 0):
        return None
    ctx_q = replace_ctx(ctx, quant=quant_for(ctx.arch, "fp8"))
    for t in [best.tp] + [x for x in m.tps if x > best.tp]:
        e = m.quick(ctx_q, t, best.pp, m.s.gmu)
        if e is not None and m.better(e):
            extra = "" if t == best.tp else f" and tensor_parallel_size {t}"
            return (
                f"set quantization fp8{extra} (weights ~{fmt_gib(e.stage.mem.weights)} GiB per GPU)"
                + m.cap(e)
            )
    return None


def _fix_fp8_kv(m: _Miss) -> str | None:
    if not m.weights_ok or m.ctx.kv_bytes <= 1:
        return None
    e = m.quick(replace_ctx(m.ctx, kv_dtype="fp8", kv_bytes=1), m.best.tp, m.best.pp, m.s.gmu)
    return "set kv_cache_dtype fp8" + m.cap(e) if e is not None and m.better(e) else None


def _fix_gmu(m: _Miss) -> str | None:
    """A higher gpu_memory_utilization (up to what the GPU leaves), or none with an extensible KV cache."""
    ctx, vinfo, g, gmu, best = m.ctx, m.ctx.vinfo, m.ctx.gpu, m.s.gmu, m.best
    if vinfo.extensible:
        if gmu is None or gmu >= 1.0:
            return None
        e = m.quick(ctx, best.tp, best.pp, None)
        if e is None or not m.better(e):
            return None
        return (
            "leave gpu_memory_utilization unset (the extensible KV cache then takes all free memory)"
            + m.cap(e)
        )
    pre = CUDA_CONTEXT + (0 if vinfo.nccl_in_budget else nccl_bytes(best.tp * best.pp))
    outside = max(m.mem.cuda_graphs - m.mem.cuda_graphs_reserved, 0)  # graphs the budget does not hold
    max_gmu = math.floor((g.cuda_total_bytes - pre - outside - 256 * MIB) / g.cuda_total_bytes * 100) / 100
    cur = gmu if gmu is not None else vinfo.gmu_default
    if max_gmu <= cur + 0.005:
        return None
    e = m.quick(ctx, best.tp, best.pp, max_gmu)
    return f"set gpu_memory_utilization {max_gmu:.2f}" + m.cap(e) if e is not None and m.better(e) else None


def _fix_eager(m: _Miss) -> str | None:
    """No CUDA graphs, where the budget reserves them (not the V2 runner before 0.29)."""
    ctx, mem = m.ctx, m.mem
    if ctx.enforce_eager or mem.cuda_graphs_reserved <= 256 * MIB:
        return None
    e = m.quick(replace_ctx(ctx, enforce_eager=True), m.best.tp, m.best.pp, m.s.gmu)
    if e is None or not m.better(e):
        return None
    return (
        f"set enforce_eager true (frees ~{fmt_gib(mem.cuda_graphs_reserved)} GiB of CUDA graphs, slower "
        "decode)" + m.cap(e)
    )


def _fix_batch(m: _Miss) -> str | None:
    """A smaller profiling batch (its activations are part of the budget)."""
    if m.mnbt <= 2048 and m.seqs <= 256:
        return None
    small_mnbt, small_seqs = min(m.mnbt, 2048), min(m.seqs, 256)
    e = m.quick(m.ctx, m.best.tp, m.best.pp, m.s.gmu, small_mnbt, small_seqs)
    if e is None or not m.better(e):
        return None
    return (
        f"set max_num_batched_tokens {small_mnbt} and max_num_seqs {small_seqs} (activation peak "
        f"{fmt_gib(m.mem.activation)} -> {fmt_gib(e.stage.mem.activation)} GiB)" + m.cap(e)
    )


def _target_unreachable(m: _Miss) -> tuple[str, int]:
    """Why a concurrency target cannot be met: it sets max_num_seqs, whose profiling batch fills the GPU."""
    s, best = m.s, m.best
    target = s.opts.target_concurrency or m.seqs
    e = m.quick(m.ctx, best.tp, best.pp, s.gmu, s.mnbt, s.class_seqs)
    fit = int(concurrency(m.ctx, e, s.mnbt, s.expected)) if e is not None and e.weights_fit else 0
    text = (
        f"{target} requests at once cannot be served: as max_num_seqs {target} (with "
        f"max_num_batched_tokens {m.mnbt}) vLLM's profiling run alone takes {fmt_gib(m.mem.activation)} GiB "
        f"of activations next to {fmt_gib(m.mem.weights)} GiB of weights, more than the "
        f"{fmt_gib(m.mem.requested)} GiB of the GPU budget; "
        + (
            f"at vLLM's default batch the KV cache holds {fit} requests of {s.expected} tokens."
            if fit >= 1
            else "even vLLM's default batch leaves no room for one request."
        )
    )
    return text, fit


_LATER_FIXES = (_fix_pipeline, _fix_fp8_weights, _fix_fp8_kv, _fix_gmu, _fix_eager, _fix_batch)


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
    fixed_kv = fixed_kv_error(s.ctx, evals)
    if fixed_kv:
        return [fixed_kv]
    opts = s.opts
    by_target = opts.max_model_len is None and opts.target_context_len is not None
    length_var = "target_context_len" if by_target else "max_model_len"
    m = _Miss(
        s,
        want_len,
        mnbt,
        seqs,
        tps,
        best=max(evals, key=lambda e: (e.l_fit, e.stage.mem.available_kv)),
        weights_ok=[e for e in evals if e.weights_fit],
        length_var=length_var,
    )
    fixes: list[str | None] = [_fix_tensor_parallel(m)]  # the first fix to offer
    if m.weights_ok:
        text, length_fix = _kv_short(m)
        fixes.append(length_fix)
        variable = length_var
    else:
        text = _weights_too_big(m)
        # the profiling batch, not the model, fills the GPU
        variable = seq_var if m.mem.activation > m.mem.weights else "tensor_parallel_size"
    if variable == "target_concurrency":
        text, reachable = _target_unreachable(m)
        fixes.insert(0, f"lower target_concurrency to <= {reachable}" if reachable >= 1 else None)
    fixes += [fix(m) for fix in _LATER_FIXES]
    shown = "; or ".join(dict.fromkeys(f for f in fixes if f)) or "use GPUs with more memory"
    return [f"{variable}: {text} Fix: {shown}."]
