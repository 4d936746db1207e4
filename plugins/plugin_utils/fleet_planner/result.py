"""Result: the plan's output dict (the CLI's JSON) and its `vllm serve` arguments."""

from __future__ import annotations

import json
from typing import Any

from . import errors as E
from .evaluation import Evaluation, evaluate
from .kv import logged_tokens
from .options import vllm_arguments
from .settings import Notes, Settings, vllm_scheduler_defaults

RECOMMENDED_WHAT = (
    "the launch this plan recommends: pass vllm_args (its max_model_len may be capped to fit, its "
    "max_num_seqs sized from the KV cache)"
)
GIVEN_ARGS_WHAT = (
    "NOT the recommendation: what vLLM does with only the arguments given (its own max_model_len, "
    "max_num_seqs and max_num_batched_tokens for the release and GPU), at the recommended split"
)

# vLLM releases before the language-model-only flag turn the encoders off this way
_NO_MM_INPUTS = ("--limit-mm-per-prompt", '{"image": 0, "video": 0, "audio": 0}')


def vllm_args(s: Settings, tp: int, pp: int, max_len: int, seqs: int, mnbt: int) -> list[str]:
    """The launch values vLLM must be told (the others are its defaults), as flags of the option table."""
    ctx, vinfo, gmu = s.ctx, s.ctx.vinfo, s.gmu
    shown_gmu = None
    if gmu is not None:
        default = None if vinfo.extensible else vinfo.gmu_default
        if s.opts.gpu_memory_utilization is not None or gmu != default:
            shown_gmu = f"{gmu:g}"
    no_towers = ctx.arch.is_multimodal and not ctx.towers
    values: dict[str, str | bool | None] = {
        "tensor_parallel_size": str(tp),
        "pipeline_parallel_size": str(pp) if pp > 1 else None,
        "max_model_len": str(max_len),
        "max_num_seqs": str(seqs),
        "max_num_batched_tokens": str(mnbt),
        "gpu_memory_utilization": shown_gmu,
        "dtype": s.dtype if s.opts.dtype is not None else None,
        "kv_cache_dtype": s.kv_dtype if s.opts.kv_cache_dtype != "auto" else None,
        "quantization": ctx.quant.arg or None,
        "enforce_eager": ctx.enforce_eager,
        "kv_cache_memory_bytes": (
            str(ctx.kv_cache_memory_bytes) if ctx.kv_cache_memory_bytes is not None else None
        ),
        "block_size": str(ctx.block_size) if ctx.block_size else None,
        "language_model_only": no_towers and vinfo.extensible,
        # releases without --language-model-only get a limit of 0 per modality below instead
        "limit_mm_per_prompt": (
            json.dumps(dict(ctx.mm_limits)) if ctx.mm_limits and (vinfo.extensible or not no_towers) else None
        ),
        "max_loras": str(ctx.max_loras) if ctx.max_loras else None,
        "max_lora_rank": str(ctx.max_lora_rank) if ctx.max_loras else None,
    }
    args = vllm_arguments(values)
    if ctx.max_loras:
        args.append("--enable-lora")
    if no_towers and not vinfo.extensible:
        args += list(_NO_MM_INPUTS)  # last, where --language-model-only would be
    return args


def _per_gpu(s: Settings, ev: Evaluation | None) -> dict[str, int]:
    if ev is None:
        return {
            "total_bytes": s.ctx.gpu.cuda_total_bytes,
            "weights_bytes": 0,
            "activation_peak_bytes": 0,
            "non_torch_bytes": 0,
            "cuda_graph_bytes": 0,
            "cuda_graph_reserved_bytes": 0,
            "kv_cache_bytes": 0,
        }
    m = ev.stage.mem
    return {
        "total_bytes": int(m.total),
        "weights_bytes": int(m.weights),
        "activation_peak_bytes": int(m.activation),
        "non_torch_bytes": int(m.non_torch + m.pre_snapshot),
        "cuda_graph_bytes": int(m.cuda_graphs),
        # the part of the graphs the release subtracts from the KV budget (model runner and release)
        "cuda_graph_reserved_bytes": int(m.cuda_graphs_reserved),
        "kv_cache_bytes": int(max(ev.num_blocks, 0) * ev.stage.layout.bytes_per_block),
    }


def _startup_error(s: Settings, ev: Evaluation, length: int, mnbt: int) -> str:
    """vLLM's own error when this evaluation cannot start; empty when it starts."""
    ctx, vinfo = s.ctx, s.ctx.vinfo
    st = ev.stage
    if not ev.weights_fit or st.mem.available_kv <= 0 or ev.num_blocks < 1:
        return E.NO_CACHE_MEMORY
    if ev.l_fit >= length:
        return ""
    if vinfo.v0_engine:
        return E.v0_kv_too_small(length, ev.num_blocks * st.layout.block_size)
    shown = s.gmu if s.opts.gpu_memory_utilization is not None else None
    return E.kv_too_small(
        vinfo.kv_error_variant,
        vinfo.kv_error_link,
        length,
        st.layout.needed_bytes(length, mnbt * ctx.inflight_mult(ev.pp), ctx.mamba_blocks),
        max(st.budget, 0),
        max(ev.l_fit, 0),
        extensible=vinfo.extensible,
        gmu=shown,
    )


def vllm_defaults(s: Settings, tp: int, pp: int) -> dict[str, Any]:
    """What vLLM does at this split when the planner's max_model_len, max_num_seqs and
    max_num_batched_tokens are not passed (those the options set are kept): its own defaults for the
    release, GPU class and usage context, profiled at those values. vLLM does not shrink a length that
    does not fit: it fails to start."""
    ctx, opts = s.ctx, s.opts
    length = opts.max_model_len or s.default_len
    mnbt, seqs = vllm_scheduler_defaults(
        ctx.gpu, ctx.vinfo, opts.workload, length, opts.max_num_batched_tokens, opts.max_num_seqs, ctx.arch
    )
    ev = evaluate(ctx, tp, pp, s.gmu, mnbt, seqs, length)
    st = ev.stage
    error = _startup_error(s, ev, length, mnbt)
    tokens = 0
    if ev.num_blocks > 0:
        tokens, _conc = logged_tokens(
            st.layout, ev.num_blocks, length, mnbt * ctx.inflight_mult(pp), ctx.mamba_blocks, ctx.vinfo
        )
    return {
        "max_model_len": length,
        "max_num_seqs": seqs,
        "max_num_batched_tokens": mnbt,
        "starts": not error,
        "error": error,
        "activation_peak_bytes": int(st.mem.activation),
        "available_kv_cache_bytes": int(st.mem.available_kv),
        "kv_cache_tokens": int(tokens),
        "max_model_len_fit": int(max(ev.l_fit, 0)),
    }


def build_result(
    feasible: bool,
    notes: Notes,
    s: Settings,
    ev: Evaluation | None,
    tp: int,
    pp: int,
    max_len: int,
    seqs: int,
    mnbt: int,
    l_fit: int | None = None,
) -> dict[str, Any]:
    ctx, vinfo, gmu = s.ctx, s.ctx.vinfo, s.gmu
    eff_gmu = gmu if gmu is not None else (1.0 if vinfo.extensible else vinfo.gmu_default)
    kv_per_tok = tokens = blocks = block_size = available = budget = 0
    conc = 0.0
    if ev is not None:
        st, m = ev.stage, ev.stage.mem
        kv_per_tok = st.layout.per_token_bytes
        blocks = ev.num_blocks
        block_size = st.layout.block_size
        available = m.available_kv
        budget = m.requested
        if blocks > 0 and max_len > 0:
            tokens, conc = logged_tokens(
                st.layout, blocks, max_len, mnbt * ctx.inflight_mult(pp), ctx.mamba_blocks, vinfo
            )
    args = vllm_args(s, tp, pp, max_len, seqs, mnbt) if feasible else []
    own = {"what": GIVEN_ARGS_WHAT, **vllm_defaults(s, tp, pp)}
    return {
        "feasible": feasible,
        "errors": notes.errors,
        "warnings": notes.warnings,
        "model": s.name,
        "vllm_version": vinfo.text,
        "vllm_family": vinfo.family,
        "tensor_parallel_size": tp,
        "pipeline_parallel_size": pp,
        "gpu_memory_utilization": eff_gmu,
        "max_model_len": max_len,
        "max_num_seqs": seqs,
        "max_num_batched_tokens": mnbt,
        "dtype": s.dtype,
        "kv_cache_dtype": s.kv_dtype,
        "quantization": ctx.quant.method,
        "block_size": block_size,
        "per_gpu": _per_gpu(s, ev),
        "per_gpu_budget_bytes": int(budget),
        "available_kv_cache_bytes": int(available),
        "kv_bytes_per_token": int(kv_per_tok),
        "kv_cache_blocks": int(blocks),
        "kv_cache_tokens": int(tokens),
        "max_concurrency": round(conc, 2),
        "max_model_len_fit": int(l_fit) if l_fit is not None else 0,
        "weights_source": s.weights_source,
        "vllm_args": args,
        # the two sets of launch figures, named apart (issue #27): what the plan recommends, and what
        # vLLM does with only the arguments given; the top-level keys above are the recommendation
        "recommended_launch": {
            "what": RECOMMENDED_WHAT,
            "tensor_parallel_size": tp,
            "pipeline_parallel_size": pp,
            "gpu_memory_utilization": eff_gmu,
            "max_model_len": max_len,
            "max_num_seqs": seqs,
            "max_num_batched_tokens": mnbt,
            "vllm_args": args,
        },
        "vllm_with_given_args": own,
        "vllm_defaults": own,  # the former name, kept for readers of older plans
    }
