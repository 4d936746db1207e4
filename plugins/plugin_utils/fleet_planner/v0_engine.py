"""The V0 engine's KV-cache budget (vLLM before 0.8), family by family.

V0 sizes the cache in vllm/worker/worker.py `Worker.determine_num_available_blocks` as
total x gpu_memory_utilization minus what its profile measured. What that measurement covers
changed three times:

* "V0-init-free" (0.2-0.6.3): `peak_memory = self.init_gpu_memory - free_gpu_memory`, where
  `init_gpu_memory` is the free memory `init_device` read after `torch.cuda.set_device` (the CUDA
  context already exists, other processes are already there) and before
  `init_worker_distributed_environment`. The budget therefore holds the weights, the activation
  peak (no `empty_cache` after `profile_run`, so the allocator keeps it) and every non-torch
  allocation since then (NCCL, custom all-reduce, attention workspaces), but neither the context
  nor other processes. (worker.py at v0.4.3, v0.5.5, v0.6.0, v0.6.3.post1.)
* "V0-peak-nontorch" (0.6.4): `peak_memory = allocated_bytes.all.peak` plus
  `non_torch_allocations = (total - free) - allocated_bytes.all.current`, all of the GPU: the CUDA
  context and other processes count against the budget, as in 0.8's V1 engine.
  (worker.py at v0.6.4.post1.)
* "V0-snapshot" (0.6.5-0.8.x): `memory_profiling` (vllm/utils.py) with a baseline taken in
  `init_device` after `set_device` (v0.6.6: `baseline_memory_in_bytes = total - init_gpu_memory`;
  v0.7.3: `self.baseline_snapshot = MemorySnapshot()`), before the distributed init:
  non_kv = weights + torch peak increase + non-torch increase since the baseline. Context and
  other processes are again outside the budget; NCCL buffers are inside.

The profile itself (vllm/worker/model_runner.py `profile_run` / `_dummy_run`, v0.7.3) runs
max_num_seqs dummy prompts totalling max_num_batched_tokens and samples one token from each with
top_p=0.99, top_k=vocab-1, which takes the PyTorch sort path of
vllm/model_executor/layers/sampler.py `_apply_top_k_top_p` (`logits.sort`, the same ATen sort that
sampler.py's "sort" path sizes; FlashInfer sampling only with VLLM_USE_FLASHINFER_SAMPLER=1, vllm/envs.py
default None), so VersionInfo.flashinfer_sampler is off before 0.8.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .errors import MIB

if TYPE_CHECKING:  # annotations only: versions.py imports this module, and config.py is large
    from .config import ModelArch

# Non-torch memory a single-GPU V0 worker adds after its baseline: attention-backend workspaces and
# allocator slack. cuBLAS workspaces come from PyTorch's caching allocator in the torch releases V0
# ran on (2.1-2.6), so they are torch memory, measured in the activation peak.
V0_MISC_NON_TORCH = 64 * MIB
# Before MLA (0.7.1) DeepSeek-V2/V3 ran as multi-head attention with one KV head per query head and
# head_size padded from 192 to 256 for FlashAttention (vllm/config.py ModelConfig.get_head_size, v0.6.6).
V0_DEEPSEEK_HEAD_SIZE = 256
V0_MLA_FIRST = (0, 7, 1)
# VLLM_CUDA_MEM_ALIGN_KV_CACHE (default 1, vllm/envs.py v0.7.3): MLA cache entries are rounded up to
# 256 bytes of the model dtype (vllm/worker/cache_engine.py get_cache_block_size, align_to_256bytes).
V0_MLA_ALIGN_BYTES = 256


def v0_family(version: tuple[int, int, int]) -> str:
    if version < (0, 6, 4):
        return "V0-init-free"
    if version < (0, 6, 5):
        return "V0-peak-nontorch"
    return "V0-snapshot"


def v0_non_torch(nccl: int, custom_allreduce: int) -> int:
    """Non-torch memory inside the V0 budget: NCCL communicators and custom all-reduce buffers are
    created by `init_worker_distributed_environment`, after the baseline, in every V0 family."""
    return V0_MISC_NON_TORCH + nccl + custom_allreduce


def v0_available_kv(
    version: tuple[int, int, int],
    requested: int,
    weights: int,
    activation: int,
    non_torch: int,
    context: int,
    other_processes: int,
) -> int:
    """`available_kv_cache_memory` of V0's determine_num_available_blocks (bytes, may be negative)."""
    used = weights + activation + non_torch
    if v0_family(version) == "V0-peak-nontorch":
        used += context + other_processes
    return requested - used


def v0_mla_token_bytes(
    arch: ModelArch, version: tuple[int, int, int], tp: int, kv_bytes: int, dtype_bytes: int
) -> int:
    """KV bytes per token of one attention layer on one GPU of a DeepSeek-MLA model in V0."""
    mla = arch.mla
    if mla is None:
        raise ValueError(f"{arch.model_type}: not an MLA model")
    if version < V0_MLA_FIRST:
        heads = max(1, (arch.num_kv_heads or arch.num_heads) // tp)
        return 2 * heads * V0_DEEPSEEK_HEAD_SIZE * kv_bytes
    per = V0_MLA_ALIGN_BYTES // dtype_bytes
    entry = mla.kv_lora_rank + mla.qk_rope_head_dim
    return -(-entry // per) * per * kv_bytes


def v1_unsupported(
    version: tuple[int, int, int],
    cc: tuple[int, int],
    dtype: str | None,
    kv_cache_dtype: str,
    quantization: str | None,
) -> str:
    """What makes a 0.8.x engine fall back to V0 (EngineArgs._is_v1_supported_oracle, arg_utils.py v0.8.5);
    empty when V1 runs. Only the checks a plan can see: the GPU, the dtype, the KV-cache dtype (V1 takes
    fp8 only through FlashAttention 3, which flash_attn_supports_fp8 allows on Hopper) and GGUF."""
    if not (0, 8) <= version < (0, 9):
        return ""
    if cc[0] < 8:
        return "Compute Capability < 8.0"
    if dtype in ("float32", "float"):
        return f"--dtype {dtype}"
    if kv_cache_dtype != "auto" and not (kv_cache_dtype.startswith("fp8") and cc == (9, 0)):
        return "--kv-cache-dtype"
    if quantization == "gguf":
        return "--quantization gguf"
    return ""


# EngineArgs.create_engine_config (vllm/engine/arg_utils.py at v0.5.3 and v0.7.3): with
# enable_chunked_prefill unset, a max_model_len above 32K turns chunked prefill on, for `vllm serve` and
# LLM() alike (the usage context plays no part), except for models with a sliding window and (v0.7.3)
# multimodal models; 0.7.1+ turn it off again for MLA ("MLA is enabled; forcing chunked prefill and prefix
# caching to be disabled", vllm/config.py VllmConfig.__post_init__).
V0_LONG_CONTEXT = 32 * 1024
V0_LONG_CONTEXT_CHUNKED_FIRST = (0, 5, 3)


def v0_long_context_chunked(
    version: tuple[int, int, int], max_model_len: int, arch: ModelArch | None
) -> bool:
    """Whether V0 turns chunked prefill on by itself for this length and model."""
    if version < V0_LONG_CONTEXT_CHUNKED_FIRST or max_model_len <= V0_LONG_CONTEXT:
        return False
    if arch is None:
        return True
    # a window vLLM uses (ModelConfig.get_sliding_window: Qwen2's use_sliding_window false leaves none)
    if arch.is_multimodal or "sliding" in arch.layer_kinds:
        return False
    return not (arch.is_mla and version >= V0_MLA_FIRST)
