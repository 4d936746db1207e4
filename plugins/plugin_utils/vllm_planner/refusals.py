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
