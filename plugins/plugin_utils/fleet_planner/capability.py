"""Capability: what the GPU's compute capability and the vLLM release allow (quantization, KV-cache dtype).

Quantization minimums are each method's `get_min_capability()` per release (data/quant_capability.json);
vLLM refuses a method below it (`VllmConfig._get_quantization_config`). The platform minimum is the oldest
architecture vLLM's CUDA kernels are built for (CMakeLists.txt `CUDA_SUPPORTED_ARCHS` starts at 7.0; CUDA 13
builds at 7.5). KV-cache dtypes are the `--kv-cache-dtype` choices per release (data/kv_cache_dtypes.json);
the DeepSeek sparse-MLA layouts have attention backends only for sparse-MLA models (FlashMLASparse: SM 9.x
and 10.x; FlashInfer's sparse-MLA backend: SM 12.x, vllm/v1/attention/backends/mla/ in 0.34).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .config import ModelArch
from .gpu import GpuSpec
from .quant import QuantSpec
from .versions import Version, VersionInfo, parse_version
from .vllm_tables import newest_read, table, value_at

PLATFORM_MIN = (7, 0)
# vLLM checks a checkpoint's method and switches to the Marlin kernel where the GPU supports it
# (`override_quantization_method`), else keeps the base kernel: either one serves.
_FALLBACKS = {"awq": ("awq_marlin", "awq"), "gptq": ("gptq_marlin", "gptq")}
_SPARSE_MLA_KV = {"fp8_ds_mla": (9, 10, 12), "nvfp4_ds_mla": (9, 10)}
_KV_ALIASES = {"half": "float16", "bf16": "bfloat16"}


def _method(name: str) -> dict[str, Any] | None:
    methods = table("quant_capability")["methods"]
    for n in (name, name.replace("_", "-"), name.replace("-", "_")):
        if n in methods:
            entry: dict[str, Any] = methods[n]
            return entry
    return None


def _in_release(entry: dict[str, Any], v: Version) -> bool:
    last = entry.get("last")
    return parse_version(entry["first"]) <= v and (last is None or v <= parse_version(last))


def vllm_method(quant: QuantSpec, quant_config: Mapping[str, Any] | None, option: str | None) -> str | None:
    """The `--quantization` name vLLM resolves: the option, else the checkpoint's `quant_method`."""
    if option and str(option).strip().lower() not in ("none", "auto", ""):
        return str(option).strip().lower()
    if not quant.is_quantized:
        return None
    q = quant_config or {}
    name = str(q.get("quant_method") or q.get("quantization") or "").strip().lower()
    if name == "modelopt" or (not name and q.get("quant_algo")):
        algo = str(q.get("quant_algo") or "FP8").upper()
        if "FP4" in algo:
            return "modelopt_fp4"
        return "modelopt_mixed" if algo == "MIXED_PRECISION" else "modelopt"
    return name or quant.method


def quant_problems(method: str | None, variable: str, g: GpuSpec, vinfo: VersionInfo) -> list[str]:
    """vLLM's refusal of a quantization method it lacks or the GPU cannot run."""
    if method is None:
        return []
    v = vinfo.version
    entries = [e for e in (_method(n) for n in _FALLBACKS.get(method, (method,))) if e is not None]
    if not entries:
        if v > newest_read():
            return []
        return [
            f"{variable}: Unknown quantization method: {method}. Must be one of [...] (no vLLM release up "
            f"to {table('quant_capability')['newest']} has it). Fix: set {variable} to the method the "
            "checkpoint was quantized with, or remove it."
        ]
    present = [e for e in entries if _in_release(e, v)]
    if not present:
        e = entries[0]
        if parse_version(e["first"]) > v:
            why, fix = f"vLLM added {method} in {e['first']}", f"set vllm_version >= {e['first']}"
        else:
            why, fix = f"vLLM removed {method} after {e['last']}", f"set vllm_version <= {e['last']}"
        return [
            f"{variable}: Unknown quantization method: {method}. Must be one of [...] (vLLM {vinfo.text}). "
            f"{why}. Fix: {fix}, or use a checkpoint in a method vLLM {vinfo.text} has."
        ]
    caps = [value_at(e["min_capability"], v) for e in present]
    known = [c for c in caps if c is not None]
    if not known or len(known) < len(caps):
        return []  # a method whose minimum is not a constant (checked by its kernels at load)
    need = min(known)
    have = g.cc[0] * 10 + g.cc[1]
    if have >= need:
        return []
    return [
        f"{variable}: The quantization method {method} is not supported for the current GPU. Minimum "
        f"capability: {need}. Current capability: {have} ({g.name}). Fix: use GPUs with compute "
        f"capability >= {need // 10}.{need % 10}, or a checkpoint in a method this GPU supports."
    ]


def platform_problems(g: GpuSpec) -> list[str]:
    if g.cc >= PLATFORM_MIN:
        return []
    return [
        f"gpu.compute_capability: {g.compute_capability} is below 7.0, the oldest GPU architecture vLLM's "
        'CUDA kernels are built for (vLLM fails with "no kernel image is available for execution on the '
        'device"). Fix: use GPUs with compute capability >= 7.0 (Volta or newer).'
    ]


def kv_dtype_problems(option: str, arch: ModelArch, g: GpuSpec, vinfo: VersionInfo) -> list[str]:
    """A `--kv-cache-dtype` this release lacks, or one no attention backend serves for this model."""
    if option == "auto":
        return []
    kv = _KV_ALIASES.get(option, option)
    choices = value_at(table("kv_cache_dtypes")["choices"], vinfo.version) or []
    newest = parse_version(table("kv_cache_dtypes")["newest"])
    if kv not in choices and vinfo.version <= newest:
        added = next((v for v, c in table("kv_cache_dtypes")["choices"] if kv in c), None)
        fix = f"set vllm_version >= {added}" if added else "set kv_cache_dtype auto"
        return [
            f"kv_cache_dtype: argument --kv-cache-dtype: invalid choice: {kv!r} (choose from "
            f"{', '.join(choices) or 'none: this release has no --kv-cache-dtype'}) (vLLM {vinfo.text}). "
            f"Fix: {fix}."
        ]
    majors = _SPARSE_MLA_KV.get(kv)
    if majors is None:
        return fp8_kv_problems(kv, arch, g, vinfo)
    sparse = arch.is_mla and bool(arch.raw_text.get("index_topk"))
    if not sparse:
        kind = "multi-head latent attention without a sparse indexer" if arch.is_mla else "standard attention"
        return [
            f"kv_cache_dtype: No valid attention backend found for cuda with kv_cache_dtype={kv} "
            f"(kv_cache_dtype not supported): {kv} is the DeepSeek sparse-MLA cache layout and "
            f"{arch.text_model_type or 'this model'} uses {kind}. Fix: set kv_cache_dtype fp8 or auto."
        ]
    if g.cc[0] not in majors:
        return [
            f"kv_cache_dtype: No valid attention backend found for cuda with kv_cache_dtype={kv} "
            f"(compute capability not supported): the sparse-MLA backends serving {kv} need SM "
            f"{'/'.join(f'{m}.x' for m in majors)}, {g.name} is {g.compute_capability}. Fix: use such "
            "GPUs, or set kv_cache_dtype auto."
        ]
    return []


# FP8 KV cache below SM 8.9 (no native e4m3: Triton's fp8e4nv), by V1 release and attention backend
# (vllm/platforms/cuda.py and vllm/v1/attention/backends/ at v0.11.0, v0.12.0, v0.20.0, v0.27.0, v0.34.0):
# 0.9-0.11 send any fp8 cache off Hopper to TRITON_ATTN, whose kernels compile e5m2 but not e4m3;
# 0.12-0.26 try FlashInfer (SM 7.5-12.1, fp8 e4m3 and e5m2) before Triton; 0.27+ raise FlashInfer's floor
# to SM 8.0, and Triton then refuses every fp8 cache below SM 8.9. MLA models have only TRITON_MLA there.
# The V0 engine (before 0.8, and 0.8's fallback) stores fp8 through its CUDA cache kernels: not refused.
_NATIVE_FP8 = (8, 9)
_TRITON_ONLY_FP8 = ((0, 9), (0, 12))  # [first, end) of the releases that send fp8 caches to Triton
_TRITON_REFUSES_FP8 = (0, 27)
_FLASHINFER_FLOOR_027 = (8, 0)


def fp8_kv_problems(kv: str, arch: ModelArch, g: GpuSpec, vinfo: VersionInfo) -> list[str]:
    """A `--kv-cache-dtype fp8*` that the attention backend vLLM picks cannot store on this GPU."""
    v = vinfo.version
    if not kv.startswith("fp8") or g.cc >= _NATIVE_FP8 or vinfo.v0_engine or v < _TRITON_ONLY_FP8[0]:
        return []
    e4m3 = kv in ("fp8", "fp8_e4m3")
    where = f"{g.name} (compute capability {g.compute_capability})"
    if v < _TRITON_ONLY_FP8[1] and g.cc < (8, 0):
        # below SM 8.0 these releases run FlexAttention (vllm/platforms/cuda.py v0.11.0)
        return [
            f"kv_cache_dtype: FlexAttention does not support quantized kv-cache. Yet ({kv} on {where}, "
            f"vLLM {vinfo.text}: FlexAttention is its only backend below SM 8.0). Fix: set kv_cache_dtype "
            "auto, or use vllm_version >= 0.12.0 (FlashInfer stores fp8 from SM 7.5)."
        ]
    if v < _TRITON_ONLY_FP8[1] or (arch.is_mla and v < _TRITON_REFUSES_FP8):
        if not e4m3:
            return []
        return [
            f"kv_cache_dtype: {kv} on {where}: vLLM {vinfo.text} stores it with the Triton attention "
            "backend, "
            'which fails with "type fp8e4nv not supported in this architecture. The supported fp8 dtypes are '
            "('fp8e4b15', 'fp8e5')\" (e4m3 needs SM 8.9+). Fix: set kv_cache_dtype fp8_e5m2 (Triton stores "
            "e5m2 here), or auto."
        ]
    if v < _TRITON_REFUSES_FP8 or (g.cc >= _FLASHINFER_FLOOR_027 and not arch.is_mla):
        return []  # FlashInfer serves it
    backend = "Triton MLA" if arch.is_mla else "Triton attention"
    suggested = "float16" if g.cc < (8, 0) else "bfloat16"
    return [
        f"kv_cache_dtype: FP8 KV cache is not supported by the {backend} backend on {g.name} (compute "
        f"capability {g.compute_capability}); native FP8 (fp8e4nv) requires SM89+. Re-run with "
        f"--kv-cache-dtype {suggested}. Fix: set kv_cache_dtype auto or {suggested} (vLLM {vinfo.text} "
        "has no backend storing an fp8 cache on this GPU), or use GPUs with compute capability >= 8.9."
    ]
