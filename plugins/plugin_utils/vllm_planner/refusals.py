"""Refusals: what the planned vLLM release refuses to start with, before any memory is sized.

Gathered from the model's architectures (architectures.py), the GPU's compute capability against the
platform, the quantization method and the KV-cache dtype (capability.py).
"""

from __future__ import annotations

from .architectures import architecture_problems
from .capability import kv_dtype_problems, platform_problems, quant_problems, vllm_method
from .settings import Notes, Settings


def refusals(s: Settings, notes: Notes) -> None:
    """Add vLLM's refusals (each naming its input and the fix) to ``notes``."""
    ctx, opts = s.ctx, s.opts
    arch, g, vinfo = ctx.arch, ctx.gpu, ctx.vinfo
    errors, warnings = architecture_problems(arch, vinfo)
    notes.warnings.extend(warnings)
    notes.errors.extend(platform_problems(g) + errors)
    option = opts.quantization if opts.quantization not in (None, "", "none", "auto") else None
    method = vllm_method(ctx.quant, arch.quant_config, option)
    variable = "quantization" if option else "model_config.quantization_config.quant_method"
    notes.errors.extend(quant_problems(method, variable, g, vinfo))
    notes.errors.extend(kv_dtype_problems(opts.kv_cache_dtype, arch, g, vinfo))
    kv_bytes = opts.kv_cache_memory_bytes
    if kv_bytes is not None and kv_bytes < 1 << 20:
        notes.warnings.append(  # vLLM takes it (and then has no room for a request): a warning
            f"kv_cache_memory_bytes: {kv_bytes} bytes is implausible for a KV cache (vLLM reads a bare "
            f"number as bytes); it looks like GiB or MiB. Fix: write the unit, e.g. {kv_bytes}G for "
            f"{kv_bytes} GiB or {kv_bytes}M for {kv_bytes} MiB."
        )
