"""Choose vLLM launch parameters and predict per-GPU memory as vLLM will account it.

``plan()`` runs the phases in order, each in its own module: options (read and check), settings (what
the options leave open), candidates (TP/PP splits), evaluation (memory and KV cache per split), choice
(pick one and size it; fixes explain a miss) and result (the output dict).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .candidates import Candidates, candidates, parallel_errors, tp_candidates, tp_problems
from .choice import Search, choose, nothing_fits, size
from .config import DTYPE_BYTES, resolve_cached
from .evaluation import Ctx, Evaluation, Stage, evaluate
from .gpu import GpuSpec
from .options import OPTION_KEYS, WORKLOADS, check_known, parse_options, parse_version
from .pooling import V1_POOLING_SINCE, PoolingKv, pooling_kv, without_kv_cache
from .quant import kv_dtype_bytes
from .refusals import refusals
from .result import build_result
from .settings import Notes, settle, version_warnings
from .settings import class_defaults as _class_defaults  # tests/accuracy/run.py reads it from here
from .speculative import apply_draft, draft_cost
from .v0_engine import v1_unsupported
from .versions import as_v0_fallback, resolve_version_text, version_info, with_sampler

__all__ = [
    "OPTION_KEYS",
    "WORKLOADS",
    "Ctx",
    "Evaluation",
    "Stage",
    "_class_defaults",
    "evaluate",
    "plan",
    "tp_candidates",
    "tp_problems",
]


def plan(
    model_config: Mapping[str, Any],
    gpu: GpuSpec | Mapping[str, Any],
    *,
    safetensors_index: Mapping[str, Any] | list[Mapping[str, Any]] | None = None,
    weights_bytes: int | None = None,
    options: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Plan a vLLM launch. Returns the CLI's JSON object; infeasible plans carry `errors` with fixes.

    A pooling model's plan (option runner: pooling) carries ``pooling``: whether vLLM reserves a KV cache
    for it and why (pooling.py). Raises PlanInputError (a ValueError) only for malformed input.
    """
    raw = dict(options or {})
    check_known(raw)
    first = _plan(model_config, gpu, safetensors_index, weights_bytes, raw)
    given = first.get("vllm_with_given_args") or {}
    if (first.get("pooling") or {}).get("kv_cache") is False and raw.get("max_num_seqs") in (None, ""):
        # no KV cache to size the batch by: the search would shrink it to one request; vLLM keeps its own
        # max_num_seqs, so the plan does too
        first = _plan(
            model_config,
            gpu,
            safetensors_index,
            weights_bytes,
            {**raw, "max_num_seqs": given.get("max_num_seqs") or 256},
        )
    return _with_draft(first, model_config, raw)


def _with_draft(
    result: dict[str, Any], model_config: Mapping[str, Any], raw: Mapping[str, Any]
) -> dict[str, Any]:
    """The plan with the speculative drafter's weights and KV cache (speculative.py)."""
    opts = parse_options(raw, check=False)
    spec = opts.speculative
    if spec is None or not result.get("tensor_parallel_size"):
        return result
    target = resolve_cached(model_config)
    draft = resolve_cached(opts.speculative_draft_config) if opts.speculative_draft_config else None
    tp = int(result["tensor_parallel_size"])
    if (
        spec.get("draft_tensor_parallel_size") not in (None, tp)
        and int(spec["draft_tensor_parallel_size"]) != 1
    ):
        result["feasible"] = False
        result.setdefault("errors", []).append(
            f"speculative: draft_tensor_parallel_size {spec['draft_tensor_parallel_size']} with the target's "
            f"tensor_parallel_size {tp}: vLLM takes 1 or the target's (V0), the target's (V1 from 0.14). "
            f"Fix: set draft_tensor_parallel_size {tp}."
        )
    d = DTYPE_BYTES.get(str(result.get("dtype")), 2)
    kv_dtype = str(result.get("kv_cache_dtype") or "auto")
    cost = draft_cost(spec, target, draft, tp, kv_dtype_bytes(kv_dtype, d), kv_dtype, d)
    return apply_draft(result, cost, spec)


def _plan(
    model_config: Mapping[str, Any],
    gpu: GpuSpec | Mapping[str, Any],
    safetensors_index: Mapping[str, Any] | list[Mapping[str, Any]] | None,
    weights_bytes: int | None,
    raw: dict[str, Any],
) -> dict[str, Any]:
    arch = resolve_cached(model_config)
    g = GpuSpec.from_any(gpu)
    vinfo = version_info(resolve_version_text(parse_version(raw, "vllm_version"), raw.get("vllm_image")))
    notes = Notes(warnings=[*g.notes, *version_warnings(vinfo)])
    opts = parse_options(raw, check=False)  # checked above, before the config is read
    if opts.sampler_backend != "auto" and not vinfo.v0_engine:
        # the V1 sampler's path where the deployment differs from the release's default install
        # (sampler.sampler_path); the V0 engine (v0_engine.py) keeps its sort path
        vinfo = with_sampler(vinfo, opts.sampler_backend == "flashinfer")
    fallback = v1_unsupported(vinfo.version, g.cc, opts.dtype, opts.kv_cache_dtype, opts.quantization)
    if not fallback and opts.runner == "pooling" and not vinfo.v0_engine and vinfo.version < V1_POOLING_SINCE:
        fallback = "a pooling model: the V1 oracle takes generation only before 0.10 (pooling.py)"
    if fallback:
        # vLLM 0.8 (0.9 for a pooling model) runs the V0 engine for this start (no VLLM_USE_V1 set): plan it
        # with V0's accounting
        vinfo = as_v0_fallback(vinfo)
        notes.warnings.append(f"vLLM {vinfo.text} falls back to the V0 engine ({fallback}); planned as V0")
    pooling = pooling_kv(arch, opts.runner, opts.convert, vinfo.version) if opts.runner == "pooling" else None
    if pooling is not None and not pooling.kv_cache:
        arch = without_kv_cache(arch)  # sized as vLLM starts it: weights and runtime only, no KV budget
    s = settle(opts, arch, g, vinfo, safetensors_index, weights_bytes, notes)
    refusals(s, notes)
    notes.errors.extend(parallel_errors(s))
    tp, pp = opts.tensor_parallel_size or 1, opts.pipeline_parallel_size or 1
    if notes.errors:
        return _with_pooling(
            pooling, opts.convert, build_result(False, notes, s, None, tp, pp, s.want_len, s.seqs, s.mnbt)
        )
    cands = candidates(s, notes)
    if not isinstance(cands, Candidates):
        return _with_pooling(
            pooling, opts.convert, build_result(False, notes, s, None, *cands, s.want_len, s.seqs, s.mnbt)
        )
    search = Search(s, cands)
    chosen, capped = choose(search)
    if chosen is None:
        best = nothing_fits(search, notes)
        tp, pp, l_fit = (best.tp, best.pp, best.l_fit) if best else (1, 1, 0)
        return _with_pooling(
            pooling,
            opts.convert,
            build_result(False, notes, s, best, tp, pp, s.want_len, s.seqs, s.mnbt, l_fit=l_fit),
        )
    sized = size(search, chosen, capped, notes)
    final = sized.ev
    return _with_pooling(
        pooling,
        opts.convert,
        build_result(
            sized.feasible,
            notes,
            s,
            final,
            final.tp,
            final.pp,
            sized.max_len,
            sized.seqs,
            sized.mnbt,
            final.l_fit,
        ),
    )


def _with_pooling(pooling: PoolingKv | None, convert: str, result: dict[str, Any]) -> dict[str, Any]:
    """The plan with its pooling facts: the runner, whether vLLM reserves a KV cache, and why."""
    if pooling is None:
        return result
    result["pooling"] = pooling.as_dict("pooling", convert)
    if not pooling.kv_cache:
        # no KV cache bounds the batch: max_num_seqs alone does (the KV figures above are 0 by design)
        result["pooling"]["free_bytes_per_gpu"] = result.get("available_kv_cache_bytes", 0)
        result["available_kv_cache_bytes"] = 0  # vLLM skips the profile and takes 0 for the cache
        result["max_concurrency"] = float(result.get("max_num_seqs") or 0)
    return result
