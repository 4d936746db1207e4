"""Quantization formats: bytes per parameter of quantized linear layers, and checkpoint KV dtypes."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any

from .errors import PlanInputError, Rejected, quant_mismatch

# vLLM `--quantization` values accepted by the planner, mapped to the checkpoint family they read.
_ALIASES = {
    "awq": "awq",
    "awq_marlin": "awq",
    "gptq": "gptq",
    "gptq_marlin": "gptq",
    "gptq_marlin_24": "gptq",
    "marlin": "gptq",
    "fp8": "fp8",
    "fbgemm_fp8": "fp8",
    "ptpc_fp8": "fp8",
    "compressed-tensors": "compressed-tensors",
    "compressed_tensors": "compressed-tensors",
    "mxfp4": "mxfp4",
    "bitsandbytes": "bitsandbytes",
    "modelopt": "modelopt",
    "modelopt_fp4": "modelopt",
    "nvfp4": "modelopt",
    "gguf": "gguf",
    "experts_int8": "experts_int8",
    "fp_quant": "fp_quant",
    "torchao": "torchao",
    "quark": "quark",
    "auto-round": "gptq",
    "auto_round": "gptq",
    "moe_wna16": "gptq",
    "hqq": "hqq",
    "deepspeedfp": "fp8",
    "tpu_int8": "int8",
    "inc": "gptq",
    "petit_nvfp4": "modelopt",
}
# Methods that may be applied to an unquantized (bf16/fp16) checkpoint at load time.
_ONLINE = {"fp8", "bitsandbytes", "experts_int8", "torchao"}


@dataclass(frozen=True, slots=True)
class QuantSpec:
    method: str | None  # canonical family (None = unquantized)
    arg: str | None  # value to pass as --quantization (only when not read from the checkpoint)
    linear_bpp: float  # bytes/param of quantized dense linear layers
    expert_bpp: float  # bytes/param of MoE expert weights
    attn_quantized: bool
    dense_mlp_quantized: bool
    lm_head_quantized: bool
    group_size: int | None
    block: tuple[int, int] | None
    kv_dtype: str | None  # KV-cache dtype declared by the checkpoint
    online: bool
    ignored: tuple[str, ...]
    # MXFP4 MoE kernel on Hopper: "triton" (torch 2.8+ releases) or "marlin" (earlier releases).
    mxfp4_hopper: str = "triton"

    @property
    def is_quantized(self) -> bool:
        return self.method is not None


NONE = QuantSpec(None, None, 2.0, 2.0, False, False, False, None, None, None, False, ())


def _int_bits(bits: int, group: int | None, zero_point: bool = True) -> float:
    g = group if group and group > 0 else 0
    scale = (2.0 + (bits / 8.0 if zero_point else 0.0)) / g if g else 0.0
    return bits / 8.0 + scale


def _ct_weights(q: Mapping[str, Any]) -> tuple[float, int | None, tuple[int, int] | None]:
    groups = q.get("config_groups")
    if isinstance(groups, Mapping):
        for grp in groups.values():
            w = grp.get("weights") if isinstance(grp, Mapping) else None
            if not isinstance(w, Mapping):
                continue
            bits = int(w.get("num_bits") or 8)
            typ = str(w.get("type") or "int")
            strategy = str(w.get("strategy") or "tensor")
            g = w.get("group_size")
            g = int(g) if isinstance(g, int) and g > 0 else None
            block = w.get("block_structure")
            blk = (int(block[0]), int(block[1])) if isinstance(block, list) and len(block) == 2 else None
            if typ == "float" and bits == 4:
                return 0.5 + 1.0 / (g or 16), g or 16, None  # nvfp4: fp8 scale per 16
            if typ == "float":
                return 1.0 + (4.0 / (blk[0] * blk[1]) if blk else 0.0), None, blk
            if strategy == "group":
                return _int_bits(bits, g, zero_point=not w.get("symmetric", True)), g, None
            return bits / 8.0, None, None
    return 1.0, None, None


def _ct_kv(q: Mapping[str, Any]) -> str | None:
    kv = q.get("kv_cache_scheme")
    if isinstance(kv, Mapping):
        bits = int(kv.get("num_bits") or 8)
        typ = str(kv.get("type") or "float")
        if typ == "float" and bits == 8:
            return "fp8"
    return None


def _ignored(q: Mapping[str, Any]) -> tuple[str, ...]:
    out: list[str] = []
    for key in ("modules_to_not_convert", "ignore", "ignored_layers", "exclude_modules", "skip_modules"):
        v = q.get(key)
        if isinstance(v, list):
            out.extend(str(x) for x in v)
    return tuple(out)


def resolve_quant(q: Mapping[str, Any] | None, option: str | None) -> QuantSpec:
    """Combine the checkpoint's quantization_config with the `--quantization` option.

    Raises `Rejected` with vLLM's wording when the option contradicts the checkpoint.
    """
    return _resolve_uncached(q, option)


def _resolve_uncached(q: Mapping[str, Any] | None, option: str | None) -> QuantSpec:
    opt = None
    if option:
        opt_raw = str(option).strip().lower()
        if opt_raw in ("none", "auto", ""):
            opt = None
        elif opt_raw not in _ALIASES:
            raise PlanInputError(
                f"quantization: unknown method {option!r}; expected one of {', '.join(sorted(_ALIASES))}. "
                "Fix: unset quantization (the checkpoint's method is read from config.json)."
            )
        else:
            opt = opt_raw
    ckpt_method = None
    if q:
        ckpt_method = str(q.get("quant_method") or q.get("quantization") or "").lower() or None
        if ckpt_method is None and q.get("quant_algo"):
            ckpt_method = "modelopt"
        if ckpt_method is None and (q.get("load_in_4bit") or q.get("load_in_8bit")):
            ckpt_method = "bitsandbytes"
    if ckpt_method and opt:
        fam_ckpt = _ALIASES.get(ckpt_method, ckpt_method)
        fam_opt = _ALIASES[opt]
        if fam_ckpt != fam_opt and not (fam_ckpt == "gptq" and fam_opt == "gptq"):
            raise Rejected("quantization", quant_mismatch(ckpt_method, opt))
    if not ckpt_method and not opt:
        return NONE
    method = _ALIASES.get(ckpt_method or opt or "", ckpt_method or opt)
    q = q or {}
    ignored = _ignored(q)
    attn_q = not any("self_attn" in x or "attn" == x.split(".")[-1] for x in ignored)
    lm_head_q = bool(q.get("lm_head")) and "lm_head" not in ignored
    group = None
    block = None
    kv = None
    if method == "awq":
        bits = int(q.get("bits") or q.get("w_bit") or 4)
        group = int(q.get("group_size") or q.get("q_group_size") or 128)
        bpp = _int_bits(bits, group, zero_point=bool(q.get("zero_point", True)))
        expert = bpp
    elif method == "gptq":
        bits = int(q.get("bits") or 4)
        g = q.get("group_size", 128)
        group = int(g) if isinstance(g, int) and g > 0 else None
        bpp = _int_bits(bits, group, zero_point=True)
        expert = bpp
    elif method == "fp8":
        blk = q.get("weight_block_size")
        block = (int(blk[0]), int(blk[1])) if isinstance(blk, list) and len(blk) == 2 else None
        bpp = 1.0 + (4.0 / (block[0] * block[1]) if block else 0.0)
        expert = bpp
        if q.get("kv_cache_quant_method") or q.get("kv_cache_scheme"):
            kv = "fp8"
    elif method == "compressed-tensors":
        bpp, group, block = _ct_weights(q)
        expert = bpp
        kv = _ct_kv(q)
    elif method == "modelopt":
        algo = str(q.get("quant_algo") or "FP8").upper()
        if "FP4" in algo:
            g = int(q.get("group_size") or 16)
            bpp = 0.5 + 1.0 / g
            group = g
        else:
            bpp = 1.0
        expert = bpp
        kv_algo = str(q.get("kv_cache_quant_algo") or "").upper()
        kv = "fp8" if kv_algo == "FP8" else ("nvfp4" if "FP4" in kv_algo else None)
    elif method == "mxfp4":
        bpp = 2.0  # dense layers stay in the model dtype
        expert = 0.5 + 1.0 / 32
        attn_q = False
    elif method == "bitsandbytes":
        if q.get("load_in_8bit"):
            bpp = 1.0
        else:
            # NF4 packs two weights per uint8 with one absmax per 64 weights: fp32, or with double
            # quantisation uint8 plus one fp32 per 256 absmax. vLLM quantises unquantised checkpoints
            # itself with compress_statistics=True (double quantisation); pre-quantised ones keep
            # their own setting.
            double = not q or bool(q.get("bnb_4bit_use_double_quant"))
            bpp = 0.5 + (1.0 / 64 + 4.0 / (64 * 256) if double else 4.0 / 64)
        expert = bpp
    elif method == "experts_int8":
        bpp = 2.0
        expert = 1.0
    else:  # gguf, hqq, torchao, quark, ...: assume 4-bit-class packing
        bpp = 0.5625
        expert = bpp
    dense_mlp_q = method != "mxfp4" and method != "experts_int8"
    online = ckpt_method is None and opt is not None
    if online and method not in _ONLINE:
        raise PlanInputError(
            f"quantization: {option!r} needs a checkpoint quantized with that method; only "
            f"{', '.join(sorted(_ONLINE))} can be applied to an unquantized checkpoint. Fix: unset "
            "quantization, set it to fp8, or serve a checkpoint quantized with that method."
        )
    return QuantSpec(
        method,
        opt if online or opt else None,
        bpp,
        expert,
        attn_q,
        dense_mlp_q,
        lm_head_q,
        group,
        block,
        kv,
        online,
        ignored,
    )


_MARLIN_VARIANTS: dict[int, tuple[QuantSpec, QuantSpec]] = {}


def for_release(q: QuantSpec, torch_28: bool) -> QuantSpec:
    """The spec as one release runs it: before torch 2.8 vLLM has no Triton MXFP4 MoE path on Hopper."""
    if q.method != "mxfp4" or torch_28:
        return q
    hit = _MARLIN_VARIANTS.get(id(q))
    if hit is not None and hit[0] is q:
        return hit[1]
    variant = replace(q, mxfp4_hopper="marlin")
    if len(_MARLIN_VARIANTS) > 256:
        _MARLIN_VARIANTS.clear()
    _MARLIN_VARIANTS[id(q)] = (q, variant)
    return variant


@lru_cache(maxsize=64)
def kv_dtype_bytes(kv_dtype: str, model_dtype_bytes: int) -> int:
    k = kv_dtype.lower()
    if k in ("auto", "bfloat16", "float16", "half", "bf16", "fp16"):
        return model_dtype_bytes if k == "auto" else 2
    if k.startswith("fp8") or k in ("int8", "uint8"):
        return 1
    if k in ("float32", "float"):
        return 4
    raise PlanInputError(
        f"kv_cache_dtype: unsupported value {kv_dtype!r}; expected auto, fp8, fp8_e4m3, "
        "fp8_e5m2, bfloat16 or float16"
    )
