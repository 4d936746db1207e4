"""Refusals: what the planned vLLM release refuses to start with, before any memory is sized.

Gathered from the model's architectures (architectures.py), the GPU's compute capability against the
platform, the quantization method and the KV-cache dtype (capability.py).
"""

from __future__ import annotations

from .architectures import architecture_problems
from .capability import kv_dtype_problems, platform_problems, quant_problems, vllm_method
from .identity_cache import IdentityCache
from .settings import Notes, Settings


def refusals(s: Settings, notes: Notes) -> None:
    """Add vLLM's refusals (each naming its input and the fix) to ``notes``."""
    ctx, opts = s.ctx, s.opts
    objects = (ctx.arch, ctx.vinfo, ctx.quant)
    # of the GPUs only the model and compute capability matter (not their count or memory)
    values = (ctx.gpu.name, ctx.gpu.compute_capability, opts.quantization, opts.kv_cache_dtype)
    found = _REFUSALS.get(objects, values)
    if found is None:
        found = _REFUSALS.put(objects, values, _refusals(s))
    errors, warnings = found
    notes.warnings.extend(warnings)
    notes.errors.extend(errors)
    kv_bytes = opts.kv_cache_memory_bytes
    if kv_bytes is not None and kv_bytes < 1 << 20:
        notes.warnings.append(  # vLLM takes it (and then has no room for a request): a warning
            f"kv_cache_memory_bytes: {kv_bytes} bytes is implausible for a KV cache (vLLM reads a bare "
            f"number as bytes); it looks like GiB or MiB. Fix: write the unit, e.g. {kv_bytes}G for "
            f"{kv_bytes} GiB or {kv_bytes}M for {kv_bytes} MiB."
        )


# Refusals depend only on the model, the GPU model, the release and two options: a fleet asks the same
# ones for every host.
_REFUSALS: IdentityCache[tuple[tuple[str, ...], tuple[str, ...]]] = IdentityCache(2048)


def _refusals(s: Settings) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(errors, warnings) of the architecture, platform, quantization method and KV-cache dtype."""
    ctx, opts = s.ctx, s.opts
    arch, g, vinfo = ctx.arch, ctx.gpu, ctx.vinfo
    arch_errors, warnings = architecture_problems(arch, vinfo)
    option = opts.quantization if opts.quantization not in (None, "", "none", "auto") else None
    method = vllm_method(ctx.quant, arch.quant_config, option)
    variable = "quantization" if option else "model_config.quantization_config.quant_method"
    errors = (
        platform_problems(g)
        + arch_errors
        + quant_problems(method, variable, g, vinfo)
        + kv_dtype_problems(opts.kv_cache_dtype, arch, g, vinfo)
    )
    return tuple(errors), tuple(warnings)
