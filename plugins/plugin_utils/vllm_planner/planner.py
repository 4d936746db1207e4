"""Choose vLLM launch parameters and predict per-GPU memory as vLLM will account it."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from . import errors as E
from .config import DTYPE_BYTES, ModelArch, normalize_dtype, resolve_cached
from .errors import GIB, MIB, PlanInputError, Rejected
from .gpu import GpuSpec
from .kv import KvLayout, build_layout, logged_tokens, max_len_that_fits
from .memory import (
    activation_peak,
    cudagraph_bytes,
    stage_memory,
)
from .quant import QuantSpec, kv_dtype_bytes, resolve_quant
from .versions import VersionInfo, version_info
from .weights import (
    checkpoint_bytes,
    get_pp_indices,
    header_totals,
    index_has_towers,
    is_header,
    stage_bytes,
    total_from_index,
    tower_bytes,
)

OPTION_KEYS = {
    "tensor_parallel_size",
    "pipeline_parallel_size",
    "max_model_len",
    "gpu_memory_utilization",
    "max_num_seqs",
    "max_num_batched_tokens",
    "dtype",
    "kv_cache_dtype",
    "quantization",
    "vllm_version",
    "enforce_eager",
    "target_context_len",
    "target_concurrency",
    "workload",
    "model_name",
    "block_size",
    "language_model_only",
    "kv_cache_memory_bytes",
}
WORKLOADS = ("chat", "batch")
# Expected request length (prompt + output) used to size max_num_seqs when no target is given.
EXPECTED_CONTEXT = {"chat": 4096, "batch": 2048}
KV_SAFETY = 0.8  # max_num_seqs keeps 20 % of the KV cache free for longer-than-expected requests
MIN_USEFUL_CONTEXT = 2048
SHARED_GMU = 0.5
_KV_DTYPES = ("auto", "bfloat16", "float16", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_ds_mla", "half", "bf16")


@dataclass(slots=True)
class Stage:
    mem: Any
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


def _opt_number(
    options: Mapping[str, Any], key: str, parse_text: Callable[[str], int], expected: str, minimum: int = 1
) -> int | None:
    """An integer option given as a number or as text that ``parse_text`` reads."""
    v = options.get(key)
    if v is None or v == "":
        return None
    if isinstance(v, str):
        try:
            n = parse_text(v.strip())
        except ValueError:
            raise PlanInputError(f"{key}: expected {expected}, got {v!r}") from None
    elif isinstance(v, (int, float)) and not isinstance(v, bool) and int(v) == v:
        n = int(v)
    else:
        raise PlanInputError(f"{key}: expected {expected}, got {v!r}")
    if n < minimum:
        raise PlanInputError(f"{key}: must be >= {minimum}, got {v!r}")
    return n


def _length_text(text: str) -> int:
    """max_model_len as vLLM reads it: 32k = 32,000, 32K = 32,768."""
    if text[-1:] in ("k", "K"):
        return int(float(text[:-1]) * (1000 if text[-1] == "k" else 1024))
    return int(text)


_HUMAN_INT = re.compile(r"(\d+(?:\.\d+)?)([kKmMgGtT])")
_DECIMAL = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
_BINARY = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def _bytes_text(text: str) -> int:
    """vLLM's ``human_readable_int``: 64M = 64 MiB, 64m = 64,000,000; no decimals with binary suffixes."""
    match = _HUMAN_INT.fullmatch(text)
    if match and match.group(2) in _DECIMAL:
        return int(float(match.group(1)) * _DECIMAL[match.group(2)])
    if match:
        return int(match.group(1)) * _BINARY[match.group(2)]
    return int(text)


def _opt_int(options: Mapping[str, Any], key: str, minimum: int = 1) -> int | None:
    return _opt_number(options, key, _length_text if key == "max_model_len" else int, "an integer", minimum)


def _opt_bytes(options: Mapping[str, Any], key: str) -> int | None:
    return _opt_number(options, key, _bytes_text, "a byte count such as 8G (GiB), 8g (10^9) or 8589934592")


def _opt_bool(options: Mapping[str, Any], key: str) -> bool:
    v = options.get(key, False)
    if v is None:
        return False
    if isinstance(v, bool):
        return v
    if isinstance(v, str) and v.strip().lower() in ("true", "yes", "1", "false", "no", "0", ""):
        return v.strip().lower() in ("true", "yes", "1")
    raise PlanInputError(f"{key}: expected true/false, got {v!r}")


def _pow2(n: int) -> bool:
    return n & (n - 1) == 0


def _fmt_gib(n: float) -> str:
    return f"{n / GIB:.1f}"


def _short_name(arch: ModelArch, options: Mapping[str, Any]) -> str:
    name = str(options.get("model_name") or arch.name)
    name = name.rstrip("/").split("/")[-1]
    return name.split("__")[-1] or "model"


def _dtype_label(d: str) -> str:
    return {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}.get(d, d)


# --------------------------------------------------------------------------------------------------
# Validity of TP / PP for a model


_TP_CACHE: dict[tuple[int, int, int], tuple[ModelArch, QuantSpec, list[str]]] = {}


def tp_problems(arch: ModelArch, tp: int, quant: QuantSpec) -> list[str]:
    """vLLM's own messages for a tensor-parallel size the model cannot be split into."""
    key = (id(arch), id(quant), tp)
    hit = _TP_CACHE.get(key)
    if hit is not None and hit[0] is arch and hit[1] is quant:
        return list(hit[2])
    out = _tp_problems(arch, tp, quant)
    if len(_TP_CACHE) > 16384:
        _TP_CACHE.clear()
    _TP_CACHE[key] = (arch, quant, out)
    return list(out)


def _tp_problems(arch: ModelArch, tp: int, quant: QuantSpec) -> list[str]:
    out: list[str] = []
    nq = arch.num_heads
    if nq and nq % tp:
        out.append(E.heads_not_divisible(nq, tp))
        return out
    nkv = arch.num_kv_heads
    if arch.mla is None and nkv:
        if nkv >= tp and nkv % tp:
            out.append(E.not_divisible(nkv, tp))
        elif nkv < tp and tp % nkv:
            out.append(E.not_divisible(tp, nkv))
    if "dense" in arch.layer_mlp and arch.intermediate_size % tp:
        out.append(E.not_divisible(arch.intermediate_size, tp))
    if arch.moe is not None and arch.moe.expert_intermediate % tp:
        out.append(E.not_divisible(arch.moe.expert_intermediate, tp))
    if arch.vision is not None and arch.vision.heads % tp:
        out.append(E.not_divisible(arch.vision.heads, tp))
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
    """Tensor-parallel sizes vLLM accepts for this model, smallest first (powers of two first on ties)."""
    valid = [t for t in range(1, max_tp + 1) if not tp_problems(arch, t, quant)]
    return sorted(valid, key=lambda t: (t, not _pow2(t)))


# --------------------------------------------------------------------------------------------------
# Evaluation of one (TP, PP, sizing) combination


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


def _capture(max_num_seqs: int, mnbt: int, ctx: Ctx) -> tuple[int, int]:
    """(number of capture sizes, largest size) of vLLM's default CUDA-graph capture list."""
    if ctx.enforce_eager:
        return 0, 0
    cap = 1024 if (ctx.vinfo.extensible and ctx.gpu.is_blackwell_dc) else 512
    top = min(2 * max_num_seqs, cap, mnbt)
    count = sum(1 for s in (1, 2, 4) if s <= top)
    largest = max([s for s in (1, 2, 4) if s <= top] or [1])
    if top >= 8:
        k = min(top, 248) // 8
        count += k
        largest = 8 * k
    if top >= 256:
        k = (min(top, cap) - 256) // 16 + 1
        count += k
        largest = 256 + 16 * (k - 1)
    return max(count, 1), largest


_STATIC_CACHE: dict[
    tuple[Any, ...], tuple[ModelArch, QuantSpec, list[tuple[float, float, float, KvLayout]]]
] = {}


def _stage_statics(
    ctx: Ctx, tp: int, pp: int, mnbt: int, seqs: int
) -> list[tuple[float, float, float, KvLayout]]:
    """(weights, activation peak, CUDA graphs, KV layout) per stage: everything but the budget.

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
    )
    hit = _STATIC_CACHE.get(key)
    if hit is not None and hit[0] is arch and hit[1] is ctx.quant:
        return hit[2]
    weights = stage_bytes(arch, ctx.quant, ctx.d, tp, pp, towers=False, cc=ctx.gpu.cc)
    n_sizes, largest = _capture(seqs, mnbt, ctx)
    out = []
    for rank in range(pp):
        start, end = get_pp_indices(arch.num_layers, rank, pp)
        w = weights[rank] * ctx.weight_scale
        if rank == 0 and ctx.towers:
            w += ctx.tower_override / tp if ctx.tower_override is not None else tower_bytes(arch, ctx.d, tp)
        kinds = arch.layer_kinds[start:end]
        mlp = arch.layer_mlp[start:end]
        act = activation_peak(
            arch, mnbt, seqs, tp, ctx.d, rank == pp - 1, ctx.vinfo, kinds, mlp, rank == 0, ctx.towers
        )
        lay = _layout(ctx, tp, pp, rank)
        graphs = cudagraph_bytes(arch, n_sizes, largest, tp, ctx.d, lay.attention_layers, mlp)
        out.append((w, act, graphs, lay))
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
    for w, act, graphs, lay in _stage_statics(ctx, tp, pp, mnbt, seqs):
        mem = stage_memory(ctx.gpu, ctx.vinfo, gmu, w, act, graphs, world, tp)
        if ctx.kv_cache_memory_bytes is not None:
            # vLLM still profiles, then takes this value verbatim as each GPU's KV budget.
            mem = replace(mem, available_kv=ctx.kv_cache_memory_bytes)
        bpb = lay.bytes_per_block
        nb = int(mem.available_kv // bpb) if bpb > 0 and mem.available_kv > 0 else 0
        budget = mem.available_kv - (bpb if null_block else 0)
        if mem.available_kv <= 0 or (bpb > 0 and nb < 1) or _fixed_kv_overflow(ctx, mem) > 0:
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


def _bpr(ctx: Ctx, ev: Evaluation, mnbt: int, length: int) -> int:
    lay = ev.stage.layout
    if not lay.groups:
        return 1
    return lay.blocks_per_request(length, mnbt * ctx.inflight_mult(ev.pp), ctx.mamba_blocks)


def _concurrency(ctx: Ctx, ev: Evaluation, mnbt: int, length: int) -> float:
    bpr = _bpr(ctx, ev, mnbt, length)
    return ev.num_blocks / bpr if bpr else 0.0


# --------------------------------------------------------------------------------------------------
# Public entry point


def plan(
    model_config: Mapping[str, Any],
    gpu: GpuSpec | Mapping[str, Any],
    *,
    safetensors_index: Mapping[str, Any] | list[Mapping[str, Any]] | None = None,
    weights_bytes: int | None = None,
    options: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Plan a vLLM launch. Returns the CLI's JSON object; infeasible plans carry `errors` with fixes.

    Raises PlanInputError (a ValueError) only for malformed input.
    """
    options = dict(options or {})
    unknown = sorted(set(options) - OPTION_KEYS)
    if unknown:
        raise PlanInputError(
            f"options: unknown key(s) {', '.join(unknown)}; expected {', '.join(sorted(OPTION_KEYS))}"
        )
    arch = resolve_cached(model_config)
    g = GpuSpec.from_any(gpu)
    vtext = options.get("vllm_version")
    vinfo = version_info(str(vtext) if vtext is not None else None)
    errors: list[str] = []
    warnings: list[str] = []
    if vinfo.extrapolated:
        if vinfo.version < (0, 8):
            warnings.append(
                f"vllm_version {vinfo.text} predates the V1 engine (0.8); planned with the 0.8 "
                "accounting, so memory figures are approximate"
            )
        else:
            warnings.append(
                f"vllm_version {vinfo.text} is newer than the newest modelled release (0.34); "
                "planned with the 0.34 accounting"
            )

    user_tp = _opt_int(options, "tensor_parallel_size")
    user_pp = _opt_int(options, "pipeline_parallel_size")
    user_len = options.get("max_model_len")
    auto_len = isinstance(user_len, str) and user_len.strip().lower() in ("auto", "-1") or user_len == -1
    user_len = None if auto_len else _opt_int(options, "max_model_len")
    user_seqs = _opt_int(options, "max_num_seqs")
    user_mnbt = _opt_int(options, "max_num_batched_tokens")
    target_len = _opt_int(options, "target_context_len")
    target_conc = _opt_int(options, "target_concurrency")
    user_block = _opt_int(options, "block_size")
    user_kv_memory = _opt_bytes(options, "kv_cache_memory_bytes")
    eager = _opt_bool(options, "enforce_eager")
    lm_only = _opt_bool(options, "language_model_only")
    workload = str(options.get("workload") or "chat").strip().lower()
    if workload not in WORKLOADS:
        raise PlanInputError(
            f"workload: expected one of {', '.join(WORKLOADS)}, got {options.get('workload')!r}"
        )
    user_gmu = options.get("gpu_memory_utilization")
    if user_gmu is not None and user_gmu != "":
        try:
            user_gmu = float(user_gmu)
        except (TypeError, ValueError):
            raise PlanInputError(f"gpu_memory_utilization: expected a number, got {user_gmu!r}") from None
        if not 0.0 < user_gmu <= 1.0:
            raise PlanInputError(f"gpu_memory_utilization: must be in (0, 1], got {user_gmu}")
    else:
        user_gmu = None
    name = _short_name(arch, options)

    # ---- dtype -----------------------------------------------------------------------------------
    user_dtype_raw = options.get("dtype")
    user_dtype = None
    if user_dtype_raw not in (None, "", "auto"):
        user_dtype = normalize_dtype(user_dtype_raw)
        if user_dtype is None:
            raise PlanInputError(
                f"dtype: expected auto, bfloat16, float16 or float32, got {user_dtype_raw!r}"
            )
    ckpt_dtype = arch.config_dtype or "float32"
    if user_dtype:
        dtype = user_dtype
        if dtype == "bfloat16" and not g.supports_bf16:
            errors.append(
                f"dtype: {E.bf16_unsupported(g.name, g.compute_capability)} Fix: set dtype float16."
            )
        if dtype == "float16" and arch.no_fp16:
            errors.append(
                f"dtype: {E.fp16_unsupported(arch.text_model_type)} Fix: set dtype bfloat16 "
                "(compute capability >= 8.0) or float32."
            )
    else:
        dtype = ckpt_dtype
        if dtype == "float32":
            dtype = "bfloat16" if vinfo.fp32_to_bf16 else "float16"
        if dtype == "bfloat16" and not g.supports_bf16:
            if arch.no_fp16:
                dtype = "float32"
                warnings.append(
                    f"{g.name} (compute capability {g.compute_capability}) lacks bfloat16 and "
                    f"{arch.text_model_type} does not support float16: vLLM runs it in float32 "
                    "(twice the weight memory)"
                )
            else:
                dtype = "float16"
                warnings.append(
                    f"checkpoint dtype is bfloat16 but {g.name} (compute capability "
                    f"{g.compute_capability}) has no bfloat16: vLLM falls back to float16, which "
                    "can overflow on some models; set dtype explicitly to confirm"
                )
        elif ckpt_dtype == "float32" and arch.config_dtype is not None:
            warnings.append(f"checkpoint is float32: vLLM loads it as {dtype} (weights halve)")
    d = DTYPE_BYTES[dtype]

    # ---- quantization ----------------------------------------------------------------------------
    quant_opt = options.get("quantization")
    try:
        quant = _quant_for(arch, str(quant_opt) if quant_opt not in (None, "") else None)
    except Rejected as exc:
        errors.append(
            f"{exc.variable}: {exc.message} Fix: remove the quantization option or set it to the "
            "checkpoint's method."
        )
        quant = _quant_for(arch, None)
    if quant.method == "gguf":
        warnings.append("GGUF checkpoints are estimated as 4.5-bit; pass weights_bytes for exact sizing")

    # ---- KV-cache dtype --------------------------------------------------------------------------
    kv_raw = str(options.get("kv_cache_dtype") or "auto").strip().lower()
    if kv_raw not in _KV_DTYPES:
        raise PlanInputError(f"kv_cache_dtype: expected one of {', '.join(_KV_DTYPES)}, got {kv_raw!r}")
    if kv_raw == "auto":
        kv_eff = dtype
        if arch.text_model_type == "deepseek_v32" or arch.raw_text.get("index_topk"):
            kv_eff = "fp8_ds_mla"
        elif quant.kv_dtype and vinfo.checkpoint_kv_dtype:
            kv_eff = quant.kv_dtype
        if kv_eff == "nvfp4":
            warnings.append("checkpoint declares an NVFP4 KV cache; sized as fp8 (upper bound)")
            kv_eff = "fp8"
    else:
        kv_eff = {"half": "float16", "bf16": "bfloat16"}.get(kv_raw, kv_raw)
    kvb = 1 if kv_eff.startswith("fp8") else kv_dtype_bytes(kv_eff if kv_eff != dtype else "auto", d)

    # ---- weights from checkpoint metadata -------------------------------------------------------
    # A config without a dtype says nothing about the tensors; released checkpoints are 16-bit.
    ckpt_d = DTYPE_BYTES.get(ckpt_dtype, 2) if arch.config_dtype is not None else 2
    ckpt_quant = _quant_for(arch, None) if quant.online else quant
    scale, tower_override, w_source = _weight_scale(
        arch, ckpt_quant, ckpt_d, d, quant, safetensors_index, weights_bytes, warnings
    )

    # ---- max_model_len derivation ----------------------------------------------------------------
    derived, key = arch.derived_max_len(vinfo.yarn_multiplies)
    default_len = derived
    ml = arch.max_len
    if ml.rope_type in ("longrope", "su") and ml.original_max and vinfo.longrope_original_default:
        default_len = ml.original_max
    if user_len is not None and user_len > derived:
        errors.append(
            f"max_model_len: {E.max_len_too_long(user_len, key, derived)} Fix: set max_model_len "
            f"<= {derived}."
        )
    if target_len is not None and target_len > derived:
        warnings.append(
            f"target_context_len {target_len} exceeds the model's maximum ({key}={derived}); "
            f"capped at {derived}"
        )
    if user_len is not None:
        want_len = user_len
    elif target_len is not None:
        want_len = min(target_len, derived)
    else:
        want_len = default_len

    # ---- scheduler defaults ----------------------------------------------------------------------
    cls_mnbt, cls_seqs = _class_defaults(g, vinfo, workload)
    seqs0 = user_seqs or cls_seqs
    mnbt = user_mnbt or cls_mnbt
    if user_seqs and user_mnbt and user_mnbt < user_seqs:
        errors.append(
            f"max_num_batched_tokens: {E.mnbt_lt_seqs(user_mnbt, user_seqs)} Fix: set "
            f"max_num_batched_tokens >= {user_seqs} or max_num_seqs <= {user_mnbt}."
        )
    if not user_mnbt and seqs0 > mnbt:
        mnbt = seqs0

    # ---- parallelism candidates ------------------------------------------------------------------
    ctx = Ctx(
        arch=arch,
        gpu=g,
        vinfo=vinfo,
        quant=quant,
        d=d,
        kv_dtype=kv_eff,
        kv_bytes=kvb,
        weight_scale=scale,
        tower_override=tower_override,
        towers=arch.is_multimodal and not lm_only,
        enforce_eager=eager,
        block_size=user_block,
        inflight_mult=_inflight_fn(vinfo),
        mamba_blocks=2 if vinfo.extensible else 1,
        derived_len=derived,
        kv_cache_memory_bytes=user_kv_memory,
    )
    gmu = _pick_gmu(user_gmu, g, vinfo, warnings)

    def result(
        feasible: bool,
        evaluation: Evaluation | None,
        tp: int,
        pp: int,
        max_len: int,
        seqs: int,
        l_fit: int | None = None,
    ) -> dict[str, Any]:
        # mnbt is read when called: it grows once max_num_seqs is chosen.
        return _result(
            feasible,
            errors,
            warnings,
            ctx,
            evaluation,
            tp,
            pp,
            gmu,
            max_len,
            seqs,
            mnbt,
            dtype,
            kv_eff,
            name,
            options,
            w_source,
            user_gmu,
            l_fit=l_fit,
        )

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
    if user_gmu is not None and not vinfo.extensible:
        from .memory import CUDA_CONTEXT, nccl_bytes

        pre = CUDA_CONTEXT + (0 if vinfo.nccl_in_budget else nccl_bytes(world))
        free = g.cuda_total_bytes - pre
        req = int(g.cuda_total_bytes * user_gmu)
        if not vinfo.absolute_budget and free < req:
            max_ok = math.floor((free - 64 * MIB) / g.cuda_total_bytes * 100) / 100
            errors.append(
                f"gpu_memory_utilization: {E.free_memory_short(free, g.cuda_total_bytes, user_gmu, req)}"
                f" Fix: set gpu_memory_utilization <= {max_ok:.2f}."
            )

    if errors:
        return result(False, None, user_tp or 1, user_pp or 1, want_len, seqs0)

    if user_tp is not None:
        tps = [user_tp]
    else:
        tps = tp_candidates(arch, g.count, quant)
        if not tps:
            errors.append(
                f"tensor_parallel_size: no tensor-parallel size up to {g.count} divides this model "
                f"({arch.num_heads} attention heads, {arch.num_kv_heads} KV heads). Fix: use a node "
                "with a GPU count that divides the attention heads."
            )
            return result(False, None, 1, 1, want_len, seqs0)
    if user_pp is not None:
        pps = [user_pp]
    else:
        pps = [1] + [p for p in range(2, g.nodes + 1) if p <= arch.num_layers]
    combos_single = [(t, 1) for t in tps] if 1 in pps else []
    combos_multi = [
        (t, p)
        for p in pps
        if p > 1
        for t in ([g.count] if user_tp is None else tps)
        if user_tp is not None or g.count in tps
    ]
    if user_tp is None and not combos_multi and len(pps) > 1:
        combos_multi = [(max(tps), p) for p in pps if p > 1]
    if user_pp is not None and user_pp > 1:
        # An explicit pipeline: every TP that fits the GPUs (within a node, or one stage per node).
        combos_multi = [(t, user_pp) for t in tps if t <= g.count and t * user_pp <= g.count * g.nodes]
        if not combos_multi:
            errors.append(
                f"pipeline_parallel_size: {user_pp} stages need at least {user_pp} GPUs; this host offers "
                f"{g.count * g.nodes}. Fix: lower pipeline_parallel_size or add nodes."
            )
            return result(False, None, user_tp or 1, user_pp, want_len, seqs0)

    expected = target_len if target_len is not None else min(want_len, EXPECTED_CONTEXT[workload])
    evals: dict[tuple[int, int], Evaluation] = {}

    def ev(tp: int, pp: int) -> Evaluation:
        k = (tp, pp)
        if k not in evals:
            evals[k] = evaluate(ctx, tp, pp, gmu, mnbt, seqs0, want_len)
        return evals[k]

    chosen: Evaluation | None = None
    for combo in combos_single:
        e = ev(*combo)
        if (
            e.weights_fit
            and e.l_fit >= want_len
            and (target_conc is None or _concurrency(ctx, e, mnbt, expected) >= target_conc)
        ):
            chosen = e
            break
    if chosen is None and target_conc is not None:
        ok = [ev(*c) for c in combos_single if ev(*c).weights_fit and ev(*c).l_fit >= want_len]
        if ok:
            chosen = max(ok, key=lambda e: (_concurrency(ctx, e, mnbt, expected), -e.tp))
    if chosen is None:
        for combo in combos_multi:
            e = ev(*combo)
            if e.weights_fit and e.l_fit >= want_len:
                chosen = e
                break
    capped = False
    if chosen is None and user_len is None:
        for group in (combos_single, combos_multi):
            fits = [
                ev(*c)
                for c in group
                if ev(*c).weights_fit and ev(*c).l_fit >= min(want_len, MIN_USEFUL_CONTEXT)
            ]
            if fits:
                chosen = max(fits, key=lambda e: (e.l_fit, -(e.tp * e.pp)))
                capped = True
                break

    if chosen is None:
        all_evals = [ev(*c) for c in combos_single + combos_multi]
        errors.extend(
            _memory_errors(
                ctx,
                all_evals,
                name,
                dtype,
                gmu,
                user_gmu,
                want_len,
                user_len,
                mnbt,
                seqs0,
                target_len,
                tps,
                combos_multi,
            )
        )
        best = max(all_evals, key=lambda e: (e.stage.mem.available_kv, -e.tp)) if all_evals else None
        return result(
            False,
            best,
            best.tp if best else 1,
            best.pp if best else 1,
            want_len,
            seqs0,
            l_fit=best.l_fit if best else 0,
        )

    tp, pp = chosen.tp, chosen.pp
    if pp > 1:
        warnings.append(
            f"one node cannot hold {name} at max_model_len {want_len}: pipeline_parallel_size {pp} "
            f"across {pp} nodes (tensor_parallel_size {tp} within each)"
        )
    max_len = want_len
    if capped:
        max_len = _round_len(chosen.l_fit)
        src = "target_context_len" if target_len is not None else f"the model's maximum ({key}={derived})"
        warnings.append(
            f"max_model_len capped at {max_len} (KV cache holds at most {chosen.l_fit} tokens for one "
            f"request); {src} was {want_len}. Raise it with tensor_parallel_size, kv_cache_dtype fp8 "
            "or more GPUs"
        )

    # ---- max_num_seqs from the KV capacity at the expected request length ------------------------
    expected = min(expected, max_len)
    if user_seqs:
        seqs = user_seqs
    else:
        seqs = _pick_seqs(ctx, chosen, mnbt, expected, cls_seqs, target_conc)
        if user_mnbt:
            seqs = min(seqs, user_mnbt)  # vLLM requires max_num_batched_tokens >= max_num_seqs
    if not user_mnbt:
        mnbt = max(mnbt, seqs)
    final = evaluate(ctx, tp, pp, gmu, mnbt, seqs, max_len)
    if final.l_fit < max_len:
        too_small = not final.weights_fit or final.l_fit < min(max_len, MIN_USEFUL_CONTEXT)
        if user_len is not None or too_small:
            seq_var = "target_concurrency" if target_conc is not None and not user_seqs else "max_num_seqs"
            errors.extend(
                _memory_errors(
                    ctx,
                    [final],
                    name,
                    dtype,
                    gmu,
                    user_gmu,
                    max_len,
                    user_len,
                    mnbt,
                    seqs,
                    target_len,
                    tps,
                    combos_multi,
                    seq_var=seq_var,
                )
            )
            return result(False, final, tp, pp, max_len, seqs, l_fit=final.l_fit)
        max_len = _round_len(final.l_fit)
        final = evaluate(ctx, tp, pp, gmu, mnbt, seqs, max_len)
    conc_expected = _concurrency(ctx, final, mnbt, expected)
    if target_conc is not None and conc_expected < target_conc:
        warnings.append(
            f"target_concurrency {target_conc} at {expected} tokens exceeds the KV cache "
            f"({conc_expected:.1f} requests fit): requests will queue or be preempted; add GPUs, "
            "set kv_cache_dtype fp8 or lower target_context_len"
        )
    if final.stage.mem.graph_headroom < 256 * MIB and not eager and not vinfo.cudagraph_in_budget:
        warnings.append(
            f"only {_fmt_gib(max(final.stage.mem.graph_headroom, 0))} GiB stay outside "
            "gpu_memory_utilization for CUDA-graph capture: capture may run out of memory; lower "
            "gpu_memory_utilization or set enforce_eager"
        )
    if arch.is_multimodal and ctx.towers:
        warnings.append(
            "multimodal model: the encoder profiling pass is estimated; lower --limit-mm-per-prompt "
            "or set language_model_only if images are not needed"
        )
    return result(True, final, tp, pp, max_len, seqs, l_fit=final.l_fit)


# --------------------------------------------------------------------------------------------------
# helpers


_QUANT_CACHE: dict[tuple[int, str | None], tuple[ModelArch, QuantSpec]] = {}


def _quant_for(arch: ModelArch, option: str | None) -> QuantSpec:
    key = (id(arch), option)
    hit = _QUANT_CACHE.get(key)
    if hit is not None and hit[0] is arch:
        return hit[1]
    q = resolve_quant(arch.quant_config, option)
    if len(_QUANT_CACHE) > 2048:
        _QUANT_CACHE.clear()
    _QUANT_CACHE[key] = (arch, q)
    return q


def _inflight_fn(vinfo: VersionInfo) -> Callable[[int], int]:
    if not vinfo.in_flight_tokens:
        return lambda pp: 1
    if vinfo.async_scheduling:
        return lambda pp: pp + 1
    return lambda pp: pp


def _class_defaults(g: GpuSpec, vinfo: VersionInfo, workload: str) -> tuple[int, int]:
    """vLLM's usage-context defaults (EngineArgs.get_batch_defaults); batch uses the offline (LLM) column."""
    gib = g.cuda_total_gib
    big = gib >= 70 and not (vinfo.a100_excluded and "a100" in g.name.lower())
    if vinfo.huge_gpu_class and gib >= 160:
        return 16384, 1024
    if big:
        return (8192 if workload == "chat" else 16384), 1024
    return (2048 if workload == "chat" else 8192), 256


def _pick_gmu(user: float | None, g: GpuSpec, vinfo: VersionInfo, warnings: list[str]) -> float | None:
    if user is not None:
        if vinfo.extensible and 0.7 < user < 1.0:
            withheld = g.cuda_total_bytes * (1 - user)
            if withheld >= GIB:
                warnings.append(
                    f"gpu_memory_utilization={user} caps this instance at "
                    f"{_fmt_gib(g.cuda_total_bytes * user)} GiB and keeps {_fmt_gib(withheld)} GiB "
                    "out of the extensible KV cache; leave it unset unless the GPU is shared"
                )
        return user
    if g.shared:
        warnings.append(
            f"GPU marked shared: gpu_memory_utilization set to {SHARED_GMU}; set it to this "
            "instance's share of the GPU"
        )
        return SHARED_GMU
    return None  # vLLM's default for the release


def _round_len(n: int) -> int:
    if n >= 8192:
        return n // 1024 * 1024
    if n >= 1024:
        return n // 256 * 256
    return n


def _pick_seqs(ctx: Ctx, e: Evaluation, mnbt: int, expected: int, cap: int, target: int | None) -> int:
    if target is not None:
        return max(1, target)
    bpr = _bpr(ctx, e, mnbt, max(expected, 1))
    fit = int(KV_SAFETY * e.num_blocks / bpr) if bpr else cap
    seqs = max(1, min(cap, fit))
    if seqs >= 16:
        seqs = seqs // 8 * 8
    return seqs


def _weight_scale(
    arch: ModelArch,
    ckpt_quant: QuantSpec,
    ckpt_d: int,
    d: int,
    quant: QuantSpec,
    index: Any,
    weights_bytes: int | None,
    warnings: list[str],
) -> tuple[float, float | None, str]:
    """Scale factor from the config estimate to the checkpoint's real size, and exact tower bytes."""
    total = None
    towers_actual = None
    mtp_actual = None
    source = "config"
    if index is not None:
        if isinstance(index, list) or (isinstance(index, Mapping) and is_header(index)):
            ht = header_totals(index, arch.num_layers)
            total, towers_actual, mtp_actual = ht.total, ht.towers, ht.mtp
            source = "safetensors headers"
        elif isinstance(index, Mapping):
            total = total_from_index(index)
            if total is None:
                raise PlanInputError("safetensors_index: no metadata.total_size and no tensor headers found")
            source = "safetensors index metadata.total_size"
            if not index_has_towers(index) and arch.vision is not None and index.get("weight_map"):
                warnings.append("config has a vision tower but the safetensors index lists no tower tensors")
        else:
            raise PlanInputError(
                "safetensors_index: expected a mapping (index.json or header) or a list of headers"
            )
    if weights_bytes is not None:
        if isinstance(weights_bytes, bool) or not isinstance(weights_bytes, int) or weights_bytes <= 0:
            raise PlanInputError(f"weights_bytes: expected a positive integer, got {weights_bytes!r}")
        total = weights_bytes
        source = "weights_bytes"
    if total is None:
        return 1.0, None, source
    est_towers = tower_bytes(arch, ckpt_d, 1)
    est_all = checkpoint_bytes(arch, ckpt_quant, ckpt_d, include_mtp=True)
    est_text = checkpoint_bytes(arch, ckpt_quant, ckpt_d, include_mtp=False) - est_towers
    est_mtp = est_all - est_text - est_towers
    towers = towers_actual if towers_actual is not None else est_towers
    mtp = mtp_actual if mtp_actual is not None else est_mtp
    text_actual = total - towers - mtp
    ratio = text_actual / est_text if est_text > 0 else 1.0
    if 0.45 <= ratio <= 0.55 and ckpt_d == 2 and source != "safetensors headers":
        warnings.append(
            f"{source} ({total}) looks like a parameter count, not bytes; weights estimated from "
            "the config instead"
        )
        return 1.0, None, "config"
    if not 0.7 <= ratio <= 1.4:
        warnings.append(
            f"{source} ({total} bytes) differs from the config-based estimate by "
            f"{(ratio - 1) * 100:+.0f} %; using {source}"
        )
    tower_gpu = towers * d / ckpt_d if towers_actual is not None else None
    return ratio, tower_gpu, source


def _fixed_kv_overflow(ctx: Ctx, mem: Any) -> int:
    """Bytes by which a fixed KV cache (kv_cache_memory_bytes) and the rest exceed the GPU; 0 or less fits."""
    if ctx.kv_cache_memory_bytes is None:
        return 0
    needed = (
        mem.pre_snapshot + mem.weights + mem.activation + mem.non_torch + mem.cuda_graphs + mem.available_kv
    )
    return needed - mem.total


def _fixed_kv_error(ctx: Ctx, evals: list[Evaluation]) -> str | None:
    """Why a fixed KV cache fits on no candidate (told for the one it misses by least), else None."""
    if ctx.kv_cache_memory_bytes is None or not evals:
        return None
    # a candidate fits only if every pipeline stage does: judge it by its worst stage
    worst = [
        max(((_fixed_kv_overflow(ctx, st.mem), st.mem) for st in e.stages), key=lambda x: x[0]) for e in evals
    ]
    over, m = min(worst, key=lambda x: x[0])
    if over <= 0:
        return None
    needed = m.total + over
    return (
        f"kv_cache_memory_bytes: {_fmt_gib(m.available_kv)} GiB of KV cache on top of "
        f"{_fmt_gib(needed - m.available_kv)} GiB of weights, activations and runtime needs "
        f"{_fmt_gib(needed)} GiB per GPU, more than its {_fmt_gib(m.total)} GiB: vLLM would run out "
        "of memory allocating the cache. Fix: lower kv_cache_memory_bytes or add GPUs "
        "(tensor_parallel_size)."
    )


def _memory_errors(
    ctx: Ctx,
    evals: list[Evaluation],
    name: str,
    dtype: str,
    gmu: float | None,
    user_gmu: float | None,
    want_len: int,
    user_len: int | None,
    mnbt: int,
    seqs: int,
    target_len: int | None,
    tps: list[int],
    combos_multi: list[tuple[int, int]],
    seq_var: str = "max_num_seqs",
) -> list[str]:
    """Explain why nothing fits, with concrete fixes (each names the variable to change)."""
    fixed_kv = _fixed_kv_error(ctx, evals)
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
            f"{name} needs {_fmt_gib(need)} GiB per GPU "
            f"at {_dtype_label(dtype)} with tensor_parallel_size {best.tp}"
            + (f" x pipeline_parallel_size {best.pp}" if best.pp > 1 else "")
            + f" (weights {_fmt_gib(total_w)} GiB, activations {_fmt_gib(mem.activation)} GiB), but "
            f"{gpus_label} x gpu_memory_utilization {shown_gmu}"
            f" leaves {_fmt_gib(mem.requested)} GiB."
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
                    f">= {t}x{g.cuda_total_gib:.0f} GiB at {_dtype_label(dtype)}",
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
        q8 = _quant_for(ctx.arch, "fp8")
        ctx_q = _replace_ctx(ctx, quant=q8)
        for t in [best.tp] + [x for x in tps if x > best.tp]:
            e4 = quick(ctx_q, t, best.pp, gmu, mnbt, seqs)
            if e4 is not None and _ok(e4):
                extra = "" if t == best.tp else f" and tensor_parallel_size {t}"
                fixes.append(
                    f"set quantization fp8{extra} (weights ~{_fmt_gib(e4.stage.mem.weights)} GiB per GPU)"
                    + _cap(e4)
                )
                break
    # fix: fp8 KV cache
    if weights_ok and ctx.kv_bytes > 1:
        e5 = quick(_replace_ctx(ctx, kv_dtype="fp8", kv_bytes=1), best.tp, best.pp, gmu, mnbt, seqs)
        if _ok(e5):
            fixes.append("set kv_cache_dtype fp8" + _cap(e5))
    # fix: higher gpu_memory_utilization
    if not vinfo.extensible:
        from .memory import CUDA_CONTEXT, nccl_bytes

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
        e7 = quick(_replace_ctx(ctx, enforce_eager=True), best.tp, best.pp, gmu, mnbt, seqs)
        if _ok(e7):
            fixes.append(
                f"set enforce_eager true (frees ~{_fmt_gib(mem.cuda_graphs)} GiB of CUDA graphs, slower "
                "decode)" + _cap(e7)
            )
    # fix: smaller profiling batch
    if mnbt > 2048 or seqs > 256:
        small_mnbt, small_seqs = min(mnbt, 2048), min(seqs, 256)
        e8 = quick(ctx, best.tp, best.pp, gmu, small_mnbt, small_seqs)
        if _ok(e8):
            fixes.append(
                f"set max_num_batched_tokens {small_mnbt} and max_num_seqs {small_seqs} (activation peak "
                f"{_fmt_gib(mem.activation)} -> {_fmt_gib(e8.stage.mem.activation)} GiB)" + _cap(e8)
            )
    if weights_ok:
        variable = length_var
    elif mem.activation > mem.weights:
        variable = seq_var  # the profiling batch, not the model, fills the GPU
    else:
        variable = "tensor_parallel_size"
    text = " ".join(lines)
    return [f"{variable}: {text} Fix: {'; or '.join(dict.fromkeys(fixes)) or 'use GPUs with more memory'}."]


def _replace_ctx(ctx: Ctx, **changes: Any) -> Ctx:
    fields = {f: getattr(ctx, f) for f in Ctx.__slots__}  # type: ignore[attr-defined]
    fields.update(changes)
    return Ctx(**fields)


def _vllm_args(
    ctx: Ctx,
    tp: int,
    pp: int,
    gmu: float | None,
    user_gmu: float | None,
    max_len: int,
    seqs: int,
    mnbt: int,
    dtype: str,
    kv_eff: str,
    options: Mapping[str, Any],
) -> list[str]:
    args = ["--tensor-parallel-size", str(tp)]
    if pp > 1:
        args += ["--pipeline-parallel-size", str(pp)]
    args += [
        "--max-model-len",
        str(max_len),
        "--max-num-seqs",
        str(seqs),
        "--max-num-batched-tokens",
        str(mnbt),
    ]
    vinfo = ctx.vinfo
    if gmu is not None:
        default = None if vinfo.extensible else vinfo.gmu_default
        if user_gmu is not None or gmu != default:
            args += ["--gpu-memory-utilization", f"{gmu:g}"]
    if options.get("dtype") not in (None, "", "auto"):
        args += ["--dtype", dtype]
    kv_opt = str(options.get("kv_cache_dtype") or "auto").lower()
    if kv_opt != "auto":
        args += ["--kv-cache-dtype", kv_eff]
    if ctx.quant.arg:
        args += ["--quantization", ctx.quant.arg]
    if ctx.enforce_eager:
        args.append("--enforce-eager")
    if ctx.kv_cache_memory_bytes is not None:
        args += ["--kv-cache-memory-bytes", str(ctx.kv_cache_memory_bytes)]
    if ctx.block_size:
        args += ["--block-size", str(ctx.block_size)]
    if ctx.arch.is_multimodal and not ctx.towers:
        if vinfo.extensible:
            args.append("--language-model-only")
        else:
            args += ["--limit-mm-per-prompt", '{"image": 0, "video": 0, "audio": 0}']
    return args


def _result(
    feasible: bool,
    errors: list[str],
    warnings: list[str],
    ctx: Ctx,
    ev: Evaluation | None,
    tp: int,
    pp: int,
    gmu: float | None,
    max_len: int,
    seqs: int,
    mnbt: int,
    dtype: str,
    kv_eff: str,
    name: str,
    options: Mapping[str, Any],
    w_source: str,
    user_gmu: float | None,
    l_fit: int | None = None,
) -> dict[str, Any]:
    vinfo = ctx.vinfo
    eff_gmu = gmu if gmu is not None else (1.0 if vinfo.extensible else vinfo.gmu_default)
    per_gpu: dict[str, int] = {
        "total_bytes": ctx.gpu.cuda_total_bytes,
        "weights_bytes": 0,
        "activation_peak_bytes": 0,
        "non_torch_bytes": 0,
        "cuda_graph_bytes": 0,
        "kv_cache_bytes": 0,
    }
    kv_per_tok = 0
    tokens = 0
    conc = 0.0
    blocks = 0
    block_size = 0
    available = 0
    budget = 0
    if ev is not None:
        s = ev.stage
        m = s.mem
        per_gpu = {
            "total_bytes": int(m.total),
            "weights_bytes": int(m.weights),
            "activation_peak_bytes": int(m.activation),
            "non_torch_bytes": int(m.non_torch + m.pre_snapshot),
            "cuda_graph_bytes": int(m.cuda_graphs),
            "kv_cache_bytes": int(max(ev.num_blocks, 0) * s.layout.bytes_per_block),
        }
        kv_per_tok = s.layout.per_token_bytes
        blocks = ev.num_blocks
        block_size = s.layout.block_size
        available = m.available_kv
        budget = m.requested
        if blocks > 0 and max_len > 0:
            tokens, conc = logged_tokens(
                s.layout, blocks, max_len, mnbt * ctx.inflight_mult(pp), ctx.mamba_blocks, vinfo
            )
    args = (
        _vllm_args(ctx, tp, pp, gmu, user_gmu, max_len, seqs, mnbt, dtype, kv_eff, options)
        if feasible
        else []
    )
    return {
        "feasible": feasible,
        "errors": errors,
        "warnings": warnings,
        "model": name,
        "vllm_version": vinfo.text,
        "vllm_family": vinfo.family,
        "tensor_parallel_size": tp,
        "pipeline_parallel_size": pp,
        "gpu_memory_utilization": eff_gmu,
        "max_model_len": max_len,
        "max_num_seqs": seqs,
        "max_num_batched_tokens": mnbt,
        "dtype": dtype,
        "kv_cache_dtype": kv_eff,
        "quantization": ctx.quant.method,
        "block_size": block_size,
        "per_gpu": per_gpu,
        "per_gpu_budget_bytes": int(budget),
        "available_kv_cache_bytes": int(available),
        "kv_bytes_per_token": int(kv_per_tok),
        "kv_cache_blocks": int(blocks),
        "kv_cache_tokens": int(tokens),
        "max_concurrency": round(conc, 2),
        "max_model_len_fit": int(l_fit) if l_fit is not None else 0,
        "weights_source": w_source,
        "vllm_args": args,
    }
