"""Settings: what the options leave open, resolved the way vLLM resolves it.

dtype, quantization, KV-cache dtype, the checkpoint's real weight size, the context length to aim
for, the scheduler defaults and gpu_memory_utilization, gathered into the evaluation context.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from . import errors as E
from .config import DTYPE_BYTES, ModelArch
from .errors import GIB, PlanInputError, Rejected
from .evaluation import Ctx
from .gpu import GpuSpec
from .lora import DEFAULT_LORA_RANK
from .options import PlanOptions
from .quant import QuantSpec, for_release, kv_dtype_bytes, resolve_quant
from .speculative import verify_shape
from .v0_engine import v0_long_context_chunked
from .versions import VersionInfo
from .weights import (
    checkpoint_bytes,
    header_totals,
    index_has_towers,
    is_header,
    total_from_index,
    tower_bytes,
)

# Expected request length (prompt + output) used to size max_num_seqs when no target is given.
EXPECTED_CONTEXT = {"chat": 4096, "batch": 2048}
SHARED_GMU = 0.5


@dataclass(slots=True)
class Notes:
    """Errors (each names the variable to change) and warnings, in the order they are found."""

    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


@dataclass(slots=True)
class Settings:
    opts: PlanOptions
    ctx: Ctx
    name: str  # the model's short name in messages
    dtype: str
    kv_dtype: str  # effective KV-cache dtype
    weights_source: str
    len_key: str  # config key the model's maximum length came from
    want_len: int  # max_model_len to aim for
    expected: int  # request length max_num_seqs is sized for
    default_len: int  # max_model_len vLLM takes when it is not passed
    class_seqs: int  # vLLM's default max_num_seqs for this GPU class
    seqs: int  # max_num_seqs before it is sized from the KV cache
    mnbt: int  # max_num_batched_tokens before it follows max_num_seqs
    gmu: float | None  # None: vLLM's default for the release


def fmt_gib(n: float) -> str:
    return f"{n / GIB:.1f}"


def short_name(arch: ModelArch, model_name: str | None) -> str:
    name = str(model_name or arch.name)
    name = name.rstrip("/").rsplit("/", maxsplit=1)[-1]
    return name.split("__")[-1] or "model"


def version_warnings(vinfo: VersionInfo) -> list[str]:
    out = []
    if vinfo.assumed:
        out.append(
            f"VLLM VERSION UNKNOWN: neither vllm_version nor a release-tagged vllm_image was given; planned "
            f"for {vinfo.text}, whose memory accounting differs from older releases. Fix: set vllm_version "
            "to the release the image runs"
        )
    elif vinfo.dev_build:
        out.append(
            f"VLLM DEVELOPMENT BUILD: vllm_version {vinfo.raw} is a build between releases; planned with "
            f"the {vinfo.version[0]}.{vinfo.version[1]} family's accounting ({vinfo.family}), and changes "
            "merged since that release are not modelled. Fix: run a released image and set vllm_version "
            "to its release"
        )
    if vinfo.reading:
        out.append(
            f"VLLM VERSION READ AS {vinfo.text}: vllm_version {vinfo.raw!r} {vinfo.reading}; planned with "
            f"the {vinfo.text} release's accounting ({vinfo.family}). Fix: set vllm_version to the exact "
            "release the image runs (python -c 'import vllm; print(vllm.__version__)') if it is not that one"
        )
    if not vinfo.extrapolated:
        return out
    if vinfo.version < (0, 4):
        out.append(
            f"vllm_version {vinfo.text} predates the 0.4 V0 engine, the oldest modelled; planned with the "
            "0.4 V0 accounting, so memory figures are approximate"
        )
        return out
    out.append(
        f"vllm_version {vinfo.text} is newer than the newest modelled release (0.34); "
        "planned with the 0.34 accounting"
    )
    return out


def resolve_dtype(opts: PlanOptions, arch: ModelArch, g: GpuSpec, vinfo: VersionInfo, notes: Notes) -> str:
    """The runtime dtype: the option (checked against the GPU and model), else vLLM's choice."""
    ckpt_dtype = arch.config_dtype or "float32"
    dtype = opts.dtype
    if dtype:
        if dtype == "bfloat16" and not g.supports_bf16:
            notes.errors.append(
                f"dtype: {E.bf16_unsupported(g.name, g.compute_capability)} Fix: set dtype float16."
            )
        if dtype == "float16" and arch.no_fp16:
            notes.errors.append(
                f"dtype: {E.fp16_unsupported(arch.text_model_type)} Fix: set dtype bfloat16 "
                "(compute capability >= 8.0) or float32."
            )
        return dtype
    dtype = ckpt_dtype
    if dtype == "float32":
        dtype = "bfloat16" if vinfo.fp32_to_bf16 else "float16"
    if dtype == "bfloat16" and not g.supports_bf16:
        if arch.no_fp16:
            notes.warnings.append(
                f"{g.name} (compute capability {g.compute_capability}) lacks bfloat16 and "
                f"{arch.text_model_type} does not support float16: vLLM runs it in float32 "
                "(twice the weight memory)"
            )
            return "float32"
        notes.warnings.append(
            f"checkpoint dtype is bfloat16 but {g.name} (compute capability "
            f"{g.compute_capability}) has no bfloat16: vLLM falls back to float16, which "
            "can overflow on some models; set dtype explicitly to confirm"
        )
        return "float16"
    if ckpt_dtype == "float32" and arch.config_dtype is not None:
        notes.warnings.append(f"checkpoint is float32: vLLM loads it as {dtype} (weights halve)")
    return dtype


_QUANT_CACHE: dict[tuple[int, str | None], tuple[ModelArch, QuantSpec]] = {}


def quant_for(arch: ModelArch, option: str | None) -> QuantSpec:
    key = (id(arch), option)
    hit = _QUANT_CACHE.get(key)
    if hit is not None and hit[0] is arch:
        return hit[1]
    q = resolve_quant(arch.quant_config, option)
    if len(_QUANT_CACHE) > 2048:
        _QUANT_CACHE.clear()
    _QUANT_CACHE[key] = (arch, q)
    return q


def resolve_quantization(opts: PlanOptions, arch: ModelArch, notes: Notes) -> QuantSpec:
    try:
        quant = quant_for(arch, opts.quantization)
    except Rejected as exc:
        notes.errors.append(
            f"{exc.variable}: {exc.message} Fix: remove the quantization option or set it to the "
            "checkpoint's method."
        )
        quant = quant_for(arch, None)
    if quant.method == "gguf":
        notes.warnings.append(
            "GGUF checkpoints are estimated as 4.5-bit; pass weights_bytes for exact sizing"
        )
    return quant


def resolve_kv_dtype(
    opts: PlanOptions, arch: ModelArch, vinfo: VersionInfo, quant: QuantSpec, dtype: str, notes: Notes
) -> str:
    """The KV cache's effective dtype (auto follows the model, or the checkpoint's KV quantization)."""
    if opts.kv_cache_dtype != "auto":
        return {"half": "float16", "bf16": "bfloat16"}.get(opts.kv_cache_dtype, opts.kv_cache_dtype)
    kv_eff = dtype
    if arch.text_model_type == "deepseek_v32" or arch.raw_text.get("index_topk"):
        kv_eff = "fp8_ds_mla"
    elif quant.kv_dtype and vinfo.checkpoint_kv_dtype:
        kv_eff = quant.kv_dtype
    if kv_eff == "nvfp4":
        notes.warnings.append("checkpoint declares an NVFP4 KV cache; sized as fp8 (upper bound)")
        kv_eff = "fp8"
    return kv_eff


def vllm_default_len(arch: ModelArch, vinfo: VersionInfo) -> int:
    """The max_model_len vLLM takes when none is passed (it fails to start when that does not fit)."""
    derived, _key = arch.derived_max_len(vinfo.yarn_multiplies)
    ml = arch.max_len
    if ml.rope_type in ("longrope", "su") and ml.original_max and vinfo.longrope_original_default:
        return int(ml.original_max)
    return derived


def _yarn_hint(arch: ModelArch, vinfo: VersionInfo, user_len: int) -> str:
    """Where YaRN would allow the length in older releases: 0.30+ take max_position_embeddings as already
    scaled (vllm/config/model.py `_get_and_verify_max_len` at v0.34.0), so the config must say so."""
    ml = arch.max_len
    if vinfo.yarn_multiplies or ml.rope_type != "yarn" or not ml.original_max or not ml.rope_factor:
        return ""
    scaled = int(ml.original_max * ml.rope_factor)
    if user_len > scaled or (ml.base or 0) >= scaled:
        return ""
    return (
        f", or set max_position_embeddings to {scaled} (original_max_position_embeddings x YaRN factor) in "
        f"config.json: vLLM {vinfo.text} (0.30+) takes max_position_embeddings as already scaled by YaRN "
        "and no longer multiplies it"
    )


def context_length(
    opts: PlanOptions, arch: ModelArch, vinfo: VersionInfo, notes: Notes
) -> tuple[int, str, int]:
    """(the model's maximum as vLLM derives it, the config key it came from, the length to aim for)."""
    derived, key = arch.derived_max_len(vinfo.yarn_multiplies)
    default_len = vllm_default_len(arch, vinfo)
    user_len, target_len = opts.max_model_len, opts.target_context_len
    if user_len is not None and user_len > derived:
        notes.errors.append(
            f"max_model_len: {E.max_len_too_long(user_len, key, derived)} Fix: set max_model_len "
            f"<= {derived}{_yarn_hint(arch, vinfo, user_len)}."
        )
    if target_len is not None and target_len > derived:
        notes.warnings.append(
            f"target_context_len {target_len} exceeds the model's maximum ({key}={derived}); "
            f"capped at {derived}"
        )
    if user_len is not None:
        return derived, key, user_len
    if target_len is not None:
        return derived, key, min(target_len, derived)
    return derived, key, default_len


def class_defaults(g: GpuSpec, vinfo: VersionInfo, workload: str) -> tuple[int, int]:
    """vLLM's usage-context defaults (EngineArgs.get_batch_defaults); batch uses the offline (LLM) column."""
    gib = g.cuda_total_gib
    big = gib >= 70 and not (vinfo.a100_excluded and "a100" in g.name.lower())
    if vinfo.huge_gpu_class and gib >= 160:
        return 16384, 1024
    if big:
        return (8192 if workload == "chat" else 16384), 1024
    return (2048 if workload == "chat" else 8192), 256


# V0 engine (before 0.8): SchedulerConfig's defaults
V0_MAX_NUM_SEQS = 256
V0_MIN_BATCHED_TOKENS = 2048  # without chunked prefill: max(max_model_len, 2048)


def vllm_scheduler_defaults(
    g: GpuSpec,
    vinfo: VersionInfo,
    workload: str,
    max_model_len: int,
    user_mnbt: int | None = None,
    user_seqs: int | None = None,
    arch: ModelArch | None = None,
) -> tuple[int, int]:
    """(max_num_batched_tokens, max_num_seqs) that vLLM itself runs with; a passed value is kept.

    V1 (0.8+): the usage-context / GPU-class defaults, then mnbt <= max_num_seqs x max_model_len and
    max_num_seqs <= mnbt. V0: 256 sequences; without chunked prefill one prefill of the whole context
    (max(max_model_len, 2048)); above 32K vLLM 0.5.3+ turns chunked prefill on (v0_long_context_chunked)
    with 512 tokens (0.5-0.6) or 2048 (0.7).
    """
    if vinfo.v0_engine:
        seqs = user_seqs or V0_MAX_NUM_SEQS
        if user_mnbt:
            mnbt = user_mnbt
        elif v0_long_context_chunked(vinfo.version, max_model_len, arch):
            mnbt = 2048 if vinfo.version >= (0, 7) else 512
        else:
            mnbt = max(max_model_len, V0_MIN_BATCHED_TOKENS)
        return mnbt, seqs if user_seqs else min(seqs, mnbt)
    cls_mnbt, cls_seqs = class_defaults(g, vinfo, workload)
    seqs = user_seqs or cls_seqs
    mnbt = user_mnbt or min(seqs * max(max_model_len, 1), cls_mnbt)
    return mnbt, seqs if user_seqs else min(seqs, mnbt)


def scheduler(
    opts: PlanOptions,
    g: GpuSpec,
    vinfo: VersionInfo,
    notes: Notes,
    want_len: int,
    arch: ModelArch | None = None,
) -> tuple[int, int, int]:
    """(class default max_num_seqs, max_num_seqs, max_num_batched_tokens) before KV sizing."""
    if vinfo.v0_engine:
        # V0 refuses a batch below max_model_len unless chunked prefill is on: keep vLLM's own choice
        cls_mnbt, cls_seqs = vllm_scheduler_defaults(g, vinfo, opts.workload, want_len, arch=arch)
    else:
        cls_mnbt, cls_seqs = class_defaults(g, vinfo, opts.workload)
    user_seqs, user_mnbt = opts.max_num_seqs, opts.max_num_batched_tokens
    seqs = user_seqs or cls_seqs
    mnbt = user_mnbt or cls_mnbt
    if user_seqs and user_mnbt and user_mnbt < user_seqs:
        notes.errors.append(
            f"max_num_batched_tokens: {E.mnbt_lt_seqs(user_mnbt, user_seqs)} Fix: set "
            f"max_num_batched_tokens >= {user_seqs} or max_num_seqs <= {user_mnbt}."
        )
    if not user_mnbt and seqs > mnbt:
        mnbt = seqs
    return cls_seqs, seqs, mnbt


def inflight_fn(vinfo: VersionInfo) -> Callable[[int], int]:
    if not vinfo.in_flight_tokens:
        return lambda pp: 1
    if vinfo.async_scheduling:
        return lambda pp: pp + 1
    return lambda pp: pp


def pick_gmu(user: float | None, g: GpuSpec, vinfo: VersionInfo, warnings: list[str]) -> float | None:
    if user is not None:
        if vinfo.extensible and 0.7 < user < 1.0:
            withheld = g.cuda_total_bytes * (1 - user)
            if withheld >= GIB:
                warnings.append(
                    f"gpu_memory_utilization={user} caps this instance at "
                    f"{fmt_gib(g.cuda_total_bytes * user)} GiB and keeps {fmt_gib(withheld)} GiB "
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


def settle(
    opts: PlanOptions,
    arch: ModelArch,
    g: GpuSpec,
    vinfo: VersionInfo,
    safetensors_index: Any,
    weights_bytes: int | None,
    notes: Notes,
) -> Settings:
    """Every setting the search needs, in the order their errors and warnings are reported."""
    name = short_name(arch, opts.model_name)
    dtype = resolve_dtype(opts, arch, g, vinfo, notes)
    d = DTYPE_BYTES[dtype]
    quant = for_release(resolve_quantization(opts, arch, notes), vinfo.torch_28)
    kv_eff = resolve_kv_dtype(opts, arch, vinfo, quant, dtype, notes)
    kvb = 1 if kv_eff.startswith("fp8") else kv_dtype_bytes(kv_eff if kv_eff != dtype else "auto", d)
    # A config without a dtype says nothing about the tensors; released checkpoints are 16-bit.
    ckpt_dtype = arch.config_dtype or "float32"
    ckpt_d = DTYPE_BYTES.get(ckpt_dtype, 2) if arch.config_dtype is not None else 2
    ckpt_quant = quant_for(arch, None) if quant.online else quant
    scale, tower_override, w_source = weight_scale(
        arch, ckpt_quant, ckpt_d, d, safetensors_index, weights_bytes, notes.warnings
    )
    derived, key, want_len = context_length(opts, arch, vinfo, notes)
    cls_seqs, seqs, mnbt = scheduler(opts, g, vinfo, notes, want_len, arch)
    spec_tokens, draft_slots = verify_shape(opts.speculative, arch)
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
        towers=arch.is_multimodal and not opts.language_model_only,
        mm_limits=opts.limit_mm_per_prompt,
        enforce_eager=opts.enforce_eager,
        block_size=opts.block_size,
        inflight_mult=inflight_fn(vinfo),
        mamba_blocks=2 if vinfo.extensible else 1,
        derived_len=derived,
        kv_cache_memory_bytes=opts.kv_cache_memory_bytes,
        max_loras=opts.max_loras or 0,
        max_lora_rank=(opts.max_lora_rank or DEFAULT_LORA_RANK) if opts.max_loras else 0,
        spec_tokens=spec_tokens,
        draft_slots=draft_slots,
    )
    gmu = pick_gmu(opts.gpu_memory_utilization, g, vinfo, notes.warnings)
    target_len = opts.target_context_len
    expected = target_len if target_len is not None else min(want_len, EXPECTED_CONTEXT[opts.workload])
    return Settings(
        opts=opts,
        ctx=ctx,
        name=name,
        dtype=dtype,
        kv_dtype=kv_eff,
        weights_source=w_source,
        len_key=key,
        want_len=want_len,
        default_len=vllm_default_len(arch, vinfo),
        expected=expected,
        class_seqs=cls_seqs,
        seqs=seqs,
        mnbt=mnbt,
        gmu=gmu,
    )


def weight_scale(
    arch: ModelArch,
    ckpt_quant: QuantSpec,
    ckpt_d: int,
    d: int,
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
