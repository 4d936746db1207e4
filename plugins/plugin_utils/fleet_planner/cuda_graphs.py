"""CUDA graphs by model runner: which runner a release picks, what it reserves inside the budget,
and what the capture really takes.

vLLM captures the graphs after the KV cache is allocated (they hold pointers into it). Whatever the
runner did not reserve inside gpu_memory_utilization is then taken from the memory left outside it;
when that is too small the server starts cleanly and runs out of memory later.

* Which runner (``VllmConfig.use_v2_model_runner``, vllm/config/vllm.py): before 0.22 always V1.
  0.22-0.28 pick the V2 runner by default for a list of architectures (and from 0.25 for every dense
  model); 0.29+ for every model; 0.34 has no V1 GPU runner left.
* What is reserved: 0.20-0.33 subtract ``model_runner.profile_cudagraph_memory()`` from the KV budget
  (``Worker.determine_available_memory``, vllm/v1/worker/gpu_worker.py). The V1 runner's estimate
  captures the two largest sizes of each mode and extrapolates; the V2 runner returned 0 until 0.28
  and measures a full capture from 0.29. 0.34's extensible KV cache measures after the capture.
* What is captured: piecewise graphs keep each piece's outputs for the largest capture size alive in
  the shared pool, plus the intermediates of one piece and a small per-graph cost.
"""

from __future__ import annotations

import math

from .config import ATTENTION_KINDS, ModelArch
from .errors import MIB
from .memory import StageMemory, _mlp_activation
from .quant import QuantSpec
from .versions import VersionInfo

GRAPH_EXEC_BYTES = 32 * 1024  # device memory of one instantiated CUDA graph
# profile_cudagraph_memory: "Use at least 1 MiB per graph for driver overhead" (gpu_model_runner.py,
# v0.20.0-v0.33.0: per_graph = max(mem_samples[1], 1 << 20)).
V1_MIN_PER_GRAPH = 1 << 20
# AttentionConfig.flash_attn_max_num_splits_for_cuda_graph (vllm/config/attention.py, 0.11.0-0.34.0).
FA3_GRAPH_SPLITS = 32
FA3_MAX_HEAD_DIM = 256  # FA3 has no SM90 kernel above it (fa_utils.get_flash_attn_version)

# DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES of vllm/config/vllm.py, by the first release that lists them.
_V2_ARCHS: tuple[tuple[tuple[int, int], frozenset[str]], ...] = (
    ((0, 22), frozenset({"Qwen3ForCausalLM"})),
    ((0, 23), frozenset({"LlamaForCausalLM", "MistralForCausalLM", "Qwen3ForCausalLM"})),
    (
        (0, 24),
        frozenset(
            {
                "Qwen3ForCausalLM",
                "DeepseekV2ForCausalLM",
                "Qwen2MoeForCausalLM",
                "GraniteMoeForCausalLM",
                "LlamaForCausalLM",
                "MistralForCausalLM",
            }
        ),
    ),
    ((0, 25), frozenset({"DeepseekV2ForCausalLM", "Qwen2MoeForCausalLM", "GraniteMoeForCausalLM"})),
    (
        (0, 26),
        frozenset(
            {
                "DeepseekV2ForCausalLM",
                "GraniteMoeForCausalLM",
                "InklingForCausalLM",
                "InklingForConditionalGeneration",
                "LongcatFlashNgramForCausalLM",
                "Qwen2MoeForCausalLM",
            }
        ),
    ),
    (
        (0, 27),
        frozenset(
            {
                "DeepseekV2ForCausalLM",
                "GraniteMoeForCausalLM",
                "InklingForCausalLM",
                "InklingForConditionalGeneration",
                "KimiK3ForConditionalGeneration",
                "LongcatFlashNgramForCausalLM",
                "Qwen2MoeForCausalLM",
            }
        ),
    ),
    (
        (0, 28),
        frozenset(
            {
                "DeepseekV2ForCausalLM",
                "DeepseekV4ForCausalLM",
                "GraniteMoeForCausalLM",
                "InklingForCausalLM",
                "InklingForConditionalGeneration",
                "KimiK3ForConditionalGeneration",
                "LongcatFlashNgramForCausalLM",
                "Qwen2MoeForCausalLM",
            }
        ),
    ),
)


def model_capture_max(arch: ModelArch, version: tuple[int, ...]) -> int | None:
    """The largest capture size a model's own config hook imposes, or None.

    ``GptOssForCausalLMConfig.verify_and_update_config`` (vllm/model_executor/models/config.py) raises
    the capture list of gpt-oss "from 512 to 1024 for performance" when the user set no sizes:
    0.10.1-0.10.2 write the list [1, 2, 4] + 8..248 step 8 + 256..1024 step 16 into
    ``scheduler_config.cuda_graph_sizes``, 0.11.0 the same list up to 992 ("When using full cuda graph
    with FA3, the max supported size is 992"), and 0.12.0-0.34.0 set
    ``compilation_config.max_cudagraph_capture_size = 1024``. Either way the list no longer depends on
    max_num_seqs; ``_set_cudagraph_sizes`` still drops sizes above max_num_batched_tokens.
    """
    if "GptOssForCausalLM" not in arch.architectures or tuple(version[:3]) < (0, 10, 1):
        return None
    return 992 if tuple(version[:2]) == (0, 11) else 1024


def capture_sizes(max_num_seqs: int, mnbt: int, cap: int, fixed_max: int | None = None) -> list[int]:
    """vLLM's default capture list: [1, 2, 4] + 8..248 step 8 + 256..cap step 16, up to
    min(2 x max_num_seqs, cap, max_num_batched_tokens) (``VllmConfig._set_cudagraph_sizes``), or up to
    min(fixed_max, max_num_batched_tokens) where the model's config hook sets the largest size
    (model_capture_max)."""
    top = min(fixed_max, mnbt) if fixed_max is not None else min(2 * max_num_seqs, cap, mnbt)
    sizes = [s for s in (1, 2, 4) if s <= top]
    sizes += list(range(8, min(top, 248) + 1, 8))
    sizes += list(range(256, top + 1, 16))
    return sizes or [1]


def full_decode_sizes(sizes: list[int], max_num_seqs: int) -> int:
    """How many FULL decode graphs FULL_AND_PIECEWISE (the default mode since 0.11) adds: the capture
    sizes up to max_num_seqs x (1 + speculative tokens) (``CudagraphDispatcher.initialize_cudagraph_keys``,
    vllm/v1/cudagraph_dispatcher.py)."""
    return sum(1 for s in sizes if s <= max_num_seqs)


def _listed(version: tuple[int, int, int]) -> frozenset[str]:
    listed: frozenset[str] = frozenset()
    for first, archs in _V2_ARCHS:
        if version[:2] >= first:
            listed = archs
    return listed


def model_runner(arch: ModelArch, vinfo: VersionInfo, quant: QuantSpec) -> str:
    """'v2' or 'v1': the GPU model runner vLLM picks by default (VLLM_USE_V2_MODEL_RUNNER unset).

    Per release, ``VllmConfig._is_default_v2_model_runner_model`` (vllm/config/vllm.py):
    0.22-0.23 a listed architecture, neither MoE nor quantized (0.22 also no hybrid); 0.24 a listed
    architecture; 0.25-0.28 a generative model that is neither hybrid (0.27+: unless listed) nor
    attention-free, and either listed or not MoE; 0.29+ every model (the feature exclusions of
    ``_get_v2_model_runner_unsupported_features`` concern options the planner does not take).
    """
    v = vinfo.version
    if v < (0, 22):
        return "v1"
    if v >= (0, 29):
        return "v2"
    archs = set(arch.architectures)
    listed = bool(archs & _listed(v))
    hybrid = arch.mamba is not None
    if v < (0, 24):
        ok = listed and not arch.is_moe and quant.method is None and not (v < (0, 23) and hybrid)
    elif v < (0, 25):
        ok = listed
    else:
        attention_free = not any(k in ATTENTION_KINDS for k in arch.layer_kinds)
        if hybrid and (v < (0, 27) or not listed):
            ok = False
        else:
            ok = not attention_free and (listed or not arch.is_moe)
    return "v2" if ok else "v1"


def fa3_split_buffers(
    arch: ModelArch, tp: int, tokens: int, cc: tuple[int, int], version: tuple[int, ...]
) -> float:
    """FlashAttention 3's split-KV buffers in the largest FULL decode graph, in bytes (0 where none).

    On Hopper the default attention backend is FLASH_ATTN (FLASH_ATTN_MLA for MLA models from 0.12) on
    FA3 (``_get_backend_priorities``, vllm/platforms/cuda.py). With FULL graphs its metadata builder
    fixes ``num_splits`` at 32 for every batch up to the largest capture size "so that large enough
    intermediate buffers are pre-allocated during capture" (v1/attention/backends/flash_attn.py and
    mla/flashattn_mla.py, 0.11.0-0.34.0), and FA3 allocates them inside the graph:
    out_accum [splits, heads, tokens, head_size_v] and softmax_lse_accum [splits, heads, tokens], fp32.
    Each layer frees them for the next, so the pool holds one set at the largest FULL size. The 0.19
    logs' "Estimated FULL CUDA graph memory: X MiB first-capture" agree: 260 MiB logged for
    Llama-3.1-8B (258 MiB here), 328 for Phi-4 (322), 132 / 70 at TP 2 / 4 (129 / 64.5).
    """
    if tokens <= 0 or cc[0] != 9 or arch.num_heads <= 0:
        return 0.0
    if arch.mla is not None:
        if tuple(version[:2]) < (0, 12):  # 0.11 picks FLASHMLA on Hopper
            return 0.0
        head_v = arch.mla.kv_lora_rank
    else:
        if tuple(version[:2]) < (0, 11) or arch.head_dim > FA3_MAX_HEAD_DIM:
            return 0.0
        head_v = arch.head_dim
    return float(FA3_GRAPH_SPLITS * (arch.num_heads // tp) * tokens * (head_v + 1) * 4)


def _pool_outputs(
    arch: ModelArch, largest: int, tp: int, d: int, attn_layers: int, stage_mlp: tuple[str, ...]
) -> float:
    """The piecewise pool at the largest size: every piece's outputs plus one piece's intermediates."""
    s = largest
    H = arch.hidden_size
    if arch.mla is not None:
        q_width = arch.num_heads / tp * (arch.mla.kv_lora_rank + arch.mla.qk_rope_head_dim)
        kv_width = arch.mla.kv_lora_rank + arch.mla.qk_rope_head_dim
    else:
        kvh = max(1, arch.num_kv_heads // tp) if arch.num_kv_heads else 0
        q_width = arch.num_heads / tp * arch.head_dim
        kv_width = kvh * arch.head_dim
    pieces = attn_layers + 1
    outputs = pieces * s * (2 * q_width + 2 * kv_width + H) * d
    inner = _mlp_activation(arch, s, tp, d, stage_mlp) + s * H * d * 2
    return outputs + inner


def graph_pools(
    arch: ModelArch,
    n_sizes: int,
    largest: int,
    tp: int,
    d: int,
    attn_layers: int,
    stage_mlp: tuple[str, ...],
    n_full: int,
    v1: bool,
    full_buffers: float = 0.0,
) -> tuple[float, float]:
    """(the CUDA-graph pool a capture takes, what the V1 runner's estimate returns, or 0.0 when not v1).

    The pool: the piecewise graphs of every size (the largest size's piece outputs dominate; FULL decode
    graphs reuse that pool) plus each graph's own memory.

    The V1 estimate, ``profile_cudagraph_memory`` (gpu_model_runner.py, v0.20.0-v0.33.0): per mode
    (PIECEWISE, FULL) it captures the largest size into a fresh pool (first_capture), then the second
    largest, whose increase is the per-graph cost (at least 1 MiB), and returns max(first_capture) +
    sum(per_graph x (n - 1)). The second size reuses the blocks the first freed, so its increase is its
    graphs' own memory: one graph per piece, or one FULL graph.

    ``full_buffers``: what the largest FULL decode graph allocates on top of the piecewise pool (its
    attention's split-KV buffers, fa3_split_buffers); it is also that mode's first capture.
    """
    if n_sizes <= 0 or largest <= 0:
        return 0.0, 0.0
    base = _pool_outputs(arch, largest, tp, d, attn_layers, stage_mlp)
    extra = full_buffers if n_full > 0 else 0.0
    captured = base + extra + (n_sizes * (attn_layers + 2) + n_full) * GRAPH_EXEC_BYTES
    if not v1:
        return captured, 0.0
    first = base + (attn_layers + 2) * GRAPH_EXEC_BYTES
    if n_full > 0:
        first = max(first, extra + GRAPH_EXEC_BYTES)
    per_piecewise = max((attn_layers + 2) * GRAPH_EXEC_BYTES, V1_MIN_PER_GRAPH)
    per_full = max(GRAPH_EXEC_BYTES, V1_MIN_PER_GRAPH)
    return captured, first + per_piecewise * (n_sizes - 1) + per_full * max(n_full - 1, 0)


def reserved_bytes(runner: str, vinfo: VersionInfo, captured: float, v1_estimate: float) -> float:
    """Bytes subtracted from the KV budget for CUDA graphs.

    0.20-0.33: ``available = requested - non_kv - cudagraph_memory_estimate`` (gpu_worker.py). The V2
    runner's ``profile_cudagraph_memory`` returns 0 through 0.28 and measures a whole capture from 0.29
    (gpu/cudagraph_utils.py). Before 0.20 nothing is reserved; 0.34's extensible cache measures the
    real pool after capture.
    """
    if vinfo.extensible:
        return captured
    if not vinfo.cudagraph_in_budget:
        return 0.0
    if runner == "v1":
        return v1_estimate
    return captured if vinfo.version >= (0, 29) else 0.0


# vLLM's own allowance for what profiling misses ("leave a small buffer (=150MiB) to avoid OOM",
# Worker.compile_or_warm_up_model, vllm/v1/worker/gpu_worker.py, v0.11.0-v0.34.0).
CAPTURE_MARGIN = 150 * MIB


def gmu_leaving_room(mem: StageMemory, vinfo: VersionInfo, used_bytes: int) -> float:
    """The highest gpu_memory_utilization (two decimals) whose outside memory holds the graphs the
    budget does not reserve, with CAPTURE_MARGIN to spare."""
    outside_need = mem.cuda_graphs - (0 if vinfo.absolute_budget else mem.cuda_graphs_reserved)
    fixed = 0 if vinfo.absolute_budget else mem.pre_snapshot + used_bytes
    room = mem.total - fixed - max(outside_need, 0) - CAPTURE_MARGIN
    return max(math.floor(room / mem.total * 100) / 100, 0.0)
