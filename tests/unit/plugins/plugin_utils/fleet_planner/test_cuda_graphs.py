"""CUDA graphs by model runner: which runner a release picks, what the KV budget reserves, and the
warning when the memory outside gpu_memory_utilization cannot hold the graphs that are not reserved.

vLLM sources read per release (the PyPI wheels, identical to the repository tags):
vllm/config/vllm.py (VllmConfig.use_v2_model_runner, DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES),
vllm/v1/worker/gpu_worker.py (determine_available_memory), vllm/v1/worker/gpu_model_runner.py and
vllm/v1/worker/gpu/model_runner.py (profile_cudagraph_memory of the V1 and V2 runners).
"""

from __future__ import annotations

import pytest
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_planner import plan
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_planner.config import resolve
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_planner.cuda_graphs import (
    V1_MIN_PER_GRAPH,
    capture_sizes,
    fa3_split_buffers,
    full_decode_sizes,
    graph_pools,
    model_capture_max,
    model_runner,
    reserved_bytes,
)
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_planner.quant import resolve_quant
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_planner.versions import version_info
from planner_helpers import H100, H200, config

GIB = 1 << 30


def _runner(name: str, version: str) -> str:
    arch = resolve(config(name))
    return model_runner(arch, version_info(version), resolve_quant(arch.quant_config, None))


@pytest.mark.parametrize(
    ("name", "version", "runner"),
    [
        # before 0.22 there is no default-V2 path
        ("meta-llama__Meta-Llama-3.1-8B", "0.21.0", "v1"),
        # 0.22: only Qwen3ForCausalLM, dense and unquantized
        ("meta-llama__Meta-Llama-3.1-8B", "0.22.1", "v1"),
        ("Qwen__Qwen3-8B", "0.22.1", "v2"),
        # 0.23: Llama / Mistral / Qwen3, dense and unquantized
        ("meta-llama__Meta-Llama-3.1-8B", "0.23.0", "v2"),
        ("Qwen__Qwen3-32B-FP8", "0.23.0", "v1"),
        # 0.24: the listed architectures, quantized or MoE too; nothing else
        ("Qwen__Qwen3-32B-FP8", "0.24.0", "v2"),
        ("meta-llama__Meta-Llama-3.1-8B", "0.24.0", "v2"),
        ("Qwen__Qwen3-30B-A3B", "0.24.0", "v1"),
        ("deepseek-ai__DeepSeek-V3", "0.24.0", "v1"),
        ("Qwen__Qwen3-VL-8B-Instruct", "0.24.0", "v1"),
        # 0.25-0.28: every dense model, MoE only when listed
        ("Qwen__Qwen3-VL-8B-Instruct", "0.25.1", "v2"),
        ("mistralai__Mixtral-8x7B-v0.1", "0.25.1", "v1"),
        ("Qwen__Qwen3-30B-A3B", "0.28.0", "v1"),
        ("openai__gpt-oss-20b", "0.27.1", "v1"),
        # 0.29+: every model
        ("Qwen__Qwen3-30B-A3B", "0.29.0", "v2"),
        ("deepseek-ai__DeepSeek-V3", "0.33.0", "v2"),
    ],
)
def test_model_runner_by_release(name: str, version: str, runner: str) -> None:
    assert _runner(name, version) == runner


def test_capture_list_matches_vllm_log() -> None:
    """max_num_seqs 256: "Profiling CUDA graph memory: PIECEWISE=51 (largest=512), FULL=35 (largest=256)"
    (https://github.com/vllm-project/vllm/pull/39559, a V1-runner startup log)."""
    sizes = capture_sizes(256, 8192, 512)
    assert (len(sizes), sizes[-1]) == (51, 512)
    assert full_decode_sizes(sizes, 256) == 35
    assert max(s for s in sizes if s <= 256) == 256
    # capped by max_num_batched_tokens
    assert capture_sizes(256, 100, 512)[-1] == 96


def test_gpt_oss_capture_list_against_vllm_log() -> None:
    """GptOssForCausalLMConfig.verify_and_update_config raises gpt-oss's largest capture size to 1024
    whatever max_num_seqs is. vLLM 0.19.0, gpt-oss-20b, 2x H100, serve defaults (max_num_seqs 1024):
    "Overriding max cuda graph capture size to 1024 for performance." and "Profiling CUDA graph memory:
    PIECEWISE=83 (largest=1024), FULL=83 (largest=1024)" (https://github.com/jgchn/llm-d-planner/blob/
    56dc5b76ca535960998bdf9fd4a3077d98fdf60a/accuracy/results/v0.19.0/logs/
    openai-gpt-oss-20b--h100-80gb--tp2pp1dp1--8192.log)."""
    arch = resolve(config("openai__gpt-oss-20b"))
    top = model_capture_max(arch, version_info("0.19.0").version)
    assert top == 1024
    sizes = capture_sizes(1024, 8192, 512, top)
    assert (len(sizes), sizes[-1]) == (83, 1024)
    assert full_decode_sizes(sizes, 1024) == 83
    # vllm#33155 (0.14.1, gpt-oss-120b, --max_num_seqs 1 --max-model-len 5120, compile range (1, 5120)):
    # still 83 piecewise graphs up to 1024 tokens, one FULL decode graph
    big = resolve(config("openai__gpt-oss-120b"))
    sizes = capture_sizes(1, 5120, 512, model_capture_max(big, version_info("0.14.1").version))
    assert (len(sizes), sizes[-1], full_decode_sizes(sizes, 1)) == (83, 1024, 1)
    # 0.11.0 wrote the list up to 992 ("from 512 to 992 ... from 67 to 81" graphs); 0.10.1 up to 1024
    assert model_capture_max(arch, version_info("0.11.0").version) == 992
    assert len(capture_sizes(1, 8192, 512, 992)) == 81
    assert model_capture_max(arch, version_info("0.10.1").version) == 1024
    # other models keep min(2 x max_num_seqs, 512)
    assert model_capture_max(resolve(config("meta-llama__Meta-Llama-3.1-8B")), (0, 19, 0)) is None


def test_gpt_oss_graphs_do_not_shrink_with_max_num_seqs() -> None:
    """The vllm#33155 command on one H100 (0.14.1, gpu_memory_utilization 0.97, max_num_seqs 1): the
    graphs captured outside the budget are those of 83 sizes up to 1024 tokens, not of sizes 1 and 2."""
    gpu = {"name": "NVIDIA H100 80GB HBM3", "memory_mib": 81559, "count": 1, "compute_capability": "9.0"}
    opts = {"vllm_version": "0.14.1", "gpu_memory_utilization": 0.97, "max_model_len": 5120}
    one = plan(config("openai__gpt-oss-120b"), gpu, options={**opts, "max_num_seqs": 1})
    many = plan(config("openai__gpt-oss-120b"), gpu, options={**opts, "max_num_seqs": 512})
    assert one["per_gpu"]["cuda_graph_bytes"] > 256 << 20
    # max_num_seqs only changes the FULL decode graphs (one per size up to it) and the size of FA3's
    # split buffers in the largest of them (1 token -> 512 tokens)
    arch = resolve(config("openai__gpt-oss-120b"))
    split = fa3_split_buffers(arch, 1, 512, HOPPER, (0, 14, 1)) - fa3_split_buffers(
        arch, 1, 1, HOPPER, (0, 14, 1)
    )
    grown = many["per_gpu"]["cuda_graph_bytes"] - one["per_gpu"]["cuda_graph_bytes"] - split
    assert 0 < grown < 8 << 20


def test_v1_estimate_is_first_capture_plus_per_graph_extrapolation() -> None:
    """profile_cudagraph_memory (gpu_model_runner.py, 0.20-0.33): max(first capture) + per mode
    max(second capture, 1 MiB) x (n - 1)."""
    arch = resolve(config("Qwen__Qwen3-8B"))
    shape = (arch, 51, 512, 1, 2, arch.attention_layers, arch.layer_mlp)
    first, _ = graph_pools(arch, 1, 512, 1, 2, arch.attention_layers, arch.layer_mlp, 0, False)
    captured, est = graph_pools(*shape, 35, True)
    piecewise = max((arch.attention_layers + 2) * 32 * 1024, V1_MIN_PER_GRAPH)
    assert est == first + 50 * piecewise + 34 * V1_MIN_PER_GRAPH
    assert captured == first + (50 * (arch.attention_layers + 2) + 35) * 32 * 1024
    # PIECEWISE only: no FULL term
    assert graph_pools(*shape, 0, True)[1] == first + 50 * piecewise


MIB = 1 << 20
HOPPER, AMPERE, BLACKWELL = (9, 0), (8, 0), (10, 0)


@pytest.mark.parametrize(
    ("name", "tp", "logged_mib"),
    [
        # vLLM 0.19.0 on H100 80GB at the serve defaults (largest FULL decode graph: 512 tokens), the
        # gpu_model_runner line "Estimated FULL CUDA graph memory: X MiB first-capture + (51-1) x ..."
        # (jgchn/llm-d-planner @ a95e9f6, accuracy/results/v0.19.0/logs; the files named in the
        # tests/accuracy cases h100-v0.19-llama-3.1-8b, -qwen2.5-7b, -phi-4, -llama-3.1-8b-tp2/-tp4,
        # -qwen2.5-7b-tp2/-tp4, 2xh100-v0.19-qwen2.5-72b-tp2)
        ("meta-llama__Meta-Llama-3.1-8B", 1, 260),
        ("Qwen__Qwen2.5-7B", 1, 228),
        ("microsoft__phi-4", 1, 328),
        ("meta-llama__Meta-Llama-3.1-8B", 2, 132),
        ("meta-llama__Meta-Llama-3.1-8B", 4, 70),
        ("Qwen__Qwen2.5-7B", 2, 116),
        ("Qwen__Qwen2.5-7B", 4, 60),
        ("Qwen__Qwen2.5-72B", 2, 266),
    ],
)
def test_fa3_split_buffers_are_the_full_graph_first_capture(name: str, tp: int, logged_mib: int) -> None:
    """FA3's out_accum + softmax_lse_accum at 32 splits fill the FULL mode's first capture; what the
    log adds on top is that graph's own memory (its per-graph figure is 4-10 MiB in the same logs)."""
    split = fa3_split_buffers(resolve(config(name)), tp, 512, HOPPER, (0, 19, 0)) / MIB
    assert 0 <= logged_mib - split <= 10


def test_fa3_split_buffers_only_where_fa3_runs_full_graphs() -> None:
    llama = resolve(config("meta-llama__Meta-Llama-3.1-8B"))
    r1 = resolve(config("deepseek-ai__DeepSeek-R1"))
    assert fa3_split_buffers(llama, 1, 512, HOPPER, (0, 34, 0)) == 32 * 32 * 512 * 129 * 4
    # FA2 on Ampere, FlashInfer on Blackwell; no FULL graphs by default before 0.11
    assert fa3_split_buffers(llama, 1, 512, AMPERE, (0, 19, 0)) == 0
    assert fa3_split_buffers(llama, 1, 512, BLACKWELL, (0, 19, 0)) == 0
    assert fa3_split_buffers(llama, 1, 512, HOPPER, (0, 10, 2)) == 0
    assert fa3_split_buffers(llama, 1, 0, HOPPER, (0, 19, 0)) == 0
    # MLA: FLASH_ATTN_MLA from 0.12, head_size_v = kv_lora_rank (512); 0.11 picks FLASHMLA
    assert fa3_split_buffers(r1, 8, 512, HOPPER, (0, 19, 0)) == 32 * 16 * 512 * 513 * 4
    assert fa3_split_buffers(r1, 8, 512, HOPPER, (0, 11, 0)) == 0


def test_full_graph_buffers_enter_the_pool_and_the_v1_estimate() -> None:
    """The captured pool holds the FULL graph's split buffers next to the piecewise outputs; the V1
    estimate takes the larger first capture of the two modes."""
    arch = resolve(config("meta-llama__Meta-Llama-3.1-8B"))
    shape = (arch, 51, 512, 1, 2, arch.attention_layers, arch.layer_mlp, 51, True)
    split = fa3_split_buffers(arch, 1, 512, HOPPER, (0, 20, 0))
    captured0, est0 = graph_pools(*shape)
    captured, est = graph_pools(*shape, split)
    assert captured - captured0 == split
    piecewise_first, _ = graph_pools(arch, 1, 512, 1, 2, arch.attention_layers, arch.layer_mlp, 0, False)
    assert est == est0 + max(split + 32 * 1024 - piecewise_first, 0)
    # a FULL first capture above the piecewise one sets the estimate
    big = 2 * piecewise_first
    assert graph_pools(*shape, big)[1] == pytest.approx(est0 + big + 32 * 1024 - piecewise_first)
    # no FULL graphs (PIECEWISE mode): the buffers are never allocated
    assert (
        graph_pools(arch, 51, 512, 1, 2, arch.attention_layers, arch.layer_mlp, 0, True, split)[0]
        == (graph_pools(arch, 51, 512, 1, 2, arch.attention_layers, arch.layer_mlp, 0, True)[0])
    )


def test_hopper_plan_graph_pool_against_vllm_log() -> None:
    """Llama-3.1-8B, vLLM 0.19.0, H100 at the serve defaults: "Graph capturing finished in 3 secs,
    took 0.91 GiB" (case h100-v0.19-llama-3.1-8b). The FA3 term brings the plan from 0.55 to 0.81 GiB;
    the rest is the per-graph driver memory, which is not modelled (tests/accuracy/README.md)."""
    opts = {"vllm_version": "0.19.0", "gpu_memory_utilization": 0.95, "max_model_len": 8192}
    opts |= {"tensor_parallel_size": 1, "max_num_seqs": 1024, "max_num_batched_tokens": 8192}
    pool = (
        plan(config("meta-llama__Meta-Llama-3.1-8B"), H100, options=opts)["per_gpu"]["cuda_graph_bytes"] / GIB
    )
    assert 0.91 * 0.85 <= pool <= 0.91


def test_qwen3_8b_v1_estimate_against_vllm_log() -> None:
    """Qwen3-8B, vLLM 0.21.0, RTX A5000, offline LLM() (max_num_seqs 256, max_num_batched_tokens 8192):
    "Estimated CUDA graph memory: 0.52 GiB total" (https://github.com/LMCache/LMCache/issues/3430).
    The shape model of the first capture is not exact; this pins how far it is."""
    r = plan(
        config("Qwen__Qwen3-8B"),
        {"name": "NVIDIA RTX A5000", "memory_mib": 24564, "count": 1, "compute_capability": "8.6"},
        options={
            "vllm_version": "0.21.0",
            "gpu_memory_utilization": 0.9764,
            "max_model_len": 16384,
            "max_num_seqs": 256,
            "max_num_batched_tokens": 8192,
            "workload": "batch",
        },
    )
    reserved = r["per_gpu"]["cuda_graph_reserved_bytes"] / GIB
    assert reserved == pytest.approx(0.52, rel=0.25)


def test_reserved_by_runner_and_release() -> None:
    captured, estimate = 10.0, 8.0
    assert reserved_bytes("v1", version_info("0.19.1"), captured, estimate) == 0  # graphs outside
    assert reserved_bytes("v1", version_info("0.24.0"), captured, estimate) == estimate
    assert reserved_bytes("v2", version_info("0.24.0"), captured, estimate) == 0  # returns 0
    assert reserved_bytes("v2", version_info("0.28.0"), captured, estimate) == 0
    assert reserved_bytes("v2", version_info("0.29.0"), captured, estimate) == captured  # measured
    assert reserved_bytes("v2", version_info("0.34.0"), captured, estimate) == captured  # after capture


def _plan(name: str, version: str, **options: object) -> dict:
    return plan(config(name), H200, options={"vllm_version": version, **options})


def test_v2_runner_leaves_the_graphs_outside_the_budget() -> None:
    """0.24 with the V2 runner (Llama) subtracts nothing for graphs; the V1 runner (the same model
    forced off the default list by its architecture name) subtracts its estimate."""
    v2 = _plan("meta-llama__Meta-Llama-3.1-8B", "0.24.0", max_num_seqs=256, max_model_len=32768)
    cfg = config("meta-llama__Meta-Llama-3.1-8B")
    cfg["architectures"] = ["Olmo2ForCausalLM"]  # dense, not in DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES
    assert model_runner(resolve(cfg), version_info("0.24.0"), resolve_quant(None, None)) == "v1"
    v1 = plan(cfg, H200, options={"vllm_version": "0.24.0", "max_num_seqs": 256, "max_model_len": 32768})
    assert v2["per_gpu"]["cuda_graph_reserved_bytes"] == 0
    assert v1["per_gpu"]["cuda_graph_reserved_bytes"] > 256 << 20
    assert v2["per_gpu"]["cuda_graph_bytes"] == v1["per_gpu"]["cuda_graph_bytes"]
    assert v2["available_kv_cache_bytes"] - v1["available_kv_cache_bytes"] == pytest.approx(
        v1["per_gpu"]["cuda_graph_reserved_bytes"], abs=1
    )


def _graph_warnings(r: dict) -> list[str]:
    return [w for w in r["warnings"] if "CUDA graphs" in w]


def test_warning_when_outside_memory_cannot_hold_unreserved_graphs() -> None:
    """H200 at gpu_memory_utilization 0.995 leaves ~0.2 GiB outside the budget once the CUDA context is
    counted: the V2 runner's unreserved graphs do not fit; the V1 runner of 0.21 reserved all but
    ~0.07 GiB of them (what its estimate misses: FA3's split buffers sit next to the piecewise pool,
    while the estimate takes the larger of the two first captures; 0.19 logs: 0.91 GiB captured against
    0.84 estimated), which fits at 0.994 but not with vLLM's 150 MiB margin at 0.995."""
    v2 = _plan("meta-llama__Meta-Llama-3.1-8B", "0.24.0", gpu_memory_utilization=0.995)
    (line,) = _graph_warnings(v2)
    assert "gpu_memory_utilization 0.995" in line and "V2 model runner" in line
    assert "lower gpu_memory_utilization to 0.99 or set enforce_eager" in line
    # the suggested value is enough, and eager needs no room
    assert (
        _graph_warnings(_plan("meta-llama__Meta-Llama-3.1-8B", "0.24.0", gpu_memory_utilization=0.99)) == []
    )
    assert (
        _graph_warnings(
            _plan("meta-llama__Meta-Llama-3.1-8B", "0.24.0", gpu_memory_utilization=0.995, enforce_eager=True)
        )
        == []
    )
    assert (
        _graph_warnings(_plan("meta-llama__Meta-Llama-3.1-8B", "0.21.0", gpu_memory_utilization=0.994)) == []
    )
    assert _graph_warnings(_plan("meta-llama__Meta-Llama-3.1-8B", "0.24.0", gpu_memory_utilization=0.994))
    # before 0.20 the V1 runner reserved nothing either
    (old,) = _graph_warnings(_plan("meta-llama__Meta-Llama-3.1-8B", "0.19.1", gpu_memory_utilization=0.995))
    assert "V1 model runner" in old


def test_extensible_cache_measures_the_graphs() -> None:
    r = _plan("meta-llama__Meta-Llama-3.1-8B", "0.34.0")
    assert r["per_gpu"]["cuda_graph_reserved_bytes"] == r["per_gpu"]["cuda_graph_bytes"] > 0
    assert _graph_warnings(r) == []
