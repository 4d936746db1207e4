"""vLLM mechanisms the planner models, each checked against a public startup log (source in each test)."""

from __future__ import annotations

import pytest
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_planner import (
    GpuSpec,
    PlanInputError,
    plan,
    version_from_image,
    version_info,
)
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_planner.config import resolve
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_planner.settings import (
    vllm_scheduler_defaults,
)
from planner_helpers import config

GIB = 1 << 30
H100 = {"name": "NVIDIA H100 80GB HBM3", "memory_mib": 81559, "count": 1, "compute_capability": "9.0"}
A100 = {"name": "NVIDIA A100-SXM4-80GB", "memory_mib": 81920, "count": 1, "compute_capability": "8.0"}
RTX3090 = {"name": "NVIDIA GeForce RTX 3090", "memory_mib": 24576, "count": 1, "compute_capability": "8.6"}


# --- vLLM's own defaults, predicted apart from the planner's sizing ------------------------------------


def test_serve_defaults_by_gpu_class_and_usage_context() -> None:
    """EngineArgs.get_batch_defaults: H100 serve 8192/1024, LLM() 16384/1024; A100 (excluded since 0.9)
    2048/256 and 8192/256."""
    h100, a100 = GpuSpec.from_any(H100), GpuSpec.from_any(A100)
    v = version_info("0.11.0")
    assert vllm_scheduler_defaults(h100, v, "chat", 131072) == (8192, 1024)
    assert vllm_scheduler_defaults(h100, v, "batch", 131072) == (16384, 1024)
    assert vllm_scheduler_defaults(a100, v, "chat", 131072) == (2048, 256)
    assert vllm_scheduler_defaults(a100, v, "batch", 131072) == (8192, 256)
    # 0.8.x had no A100 exclusion
    assert vllm_scheduler_defaults(a100, version_info("0.8.5"), "chat", 131072) == (8192, 1024)
    # a passed value is kept; max_num_seqs never exceeds the batch
    assert vllm_scheduler_defaults(h100, v, "chat", 131072, user_mnbt=1024) == (1024, 1024)
    assert vllm_scheduler_defaults(h100, v, "chat", 4) == (4096, 1024)


def test_v0_defaults_whole_prompt_or_chunked_above_32k() -> None:
    """V0: without chunked prefill one prefill of max_model_len (vllm#10517, 0.6.4 at --max-model-len
    29000 profiled 29000 tokens); above 32K chunked prefill at 2048 (vllm#13061, 0.7.2), for `vllm serve`
    and LLM() alike (EngineArgs.create_engine_config), from 0.5.3, not for multimodal or (0.7.1+) MLA
    models."""
    g = GpuSpec.from_any(RTX3090)
    llama = resolve(config("meta-llama__Meta-Llama-3.1-8B"))
    assert vllm_scheduler_defaults(g, version_info("0.6.4"), "chat", 29000) == (29000, 256)
    assert vllm_scheduler_defaults(g, version_info("0.7.2"), "chat", 131072) == (2048, 256)
    assert vllm_scheduler_defaults(g, version_info("0.6.4"), "batch", 131072, arch=llama) == (512, 256)
    assert vllm_scheduler_defaults(g, version_info("0.5.2"), "chat", 131072, arch=llama) == (131072, 256)
    vl = resolve(config("Qwen__Qwen3-VL-8B-Instruct"))
    assert vllm_scheduler_defaults(g, version_info("0.7.3"), "chat", 131072, arch=vl) == (131072, 256)
    dsv3 = resolve(config("deepseek-ai__DeepSeek-V3"))
    assert vllm_scheduler_defaults(g, version_info("0.7.3"), "chat", 131072, arch=dsv3) == (131072, 256)
    assert vllm_scheduler_defaults(g, version_info("0.6.6"), "chat", 131072, arch=dsv3) == (512, 256)


def test_plan_reports_vllm_without_args_failing_where_its_own_plan_starts() -> None:
    """vllm-project/vllm#23278: gpt-oss-120b on one H100, vLLM 0.10.1, no flags: 'Model loading took
    65.9651 GiB', 'Available KV cache memory: -2.14 GiB', EngineCore failed to start. At gmu 0.9 the
    planner refuses too (the Marlin-padded weights leave too little); at gmu 0.98 its own plan caps the
    length and starts, while its prediction for vLLM's defaults (131072 tokens, 1024 sequences, 8192
    batched) still fails."""
    r = plan(config("openai__gpt-oss-120b"), H100, options={"vllm_version": "0.10.1"})
    assert r["feasible"] is False
    assert r["vllm_defaults"]["starts"] is False
    r = plan(
        config("openai__gpt-oss-120b"),
        H100,
        options={"vllm_version": "0.10.1", "gpu_memory_utilization": 0.98},
    )
    assert r["feasible"] is True
    d = r["vllm_defaults"]
    assert (d["max_model_len"], d["max_num_seqs"], d["max_num_batched_tokens"]) == (131072, 1024, 8192)
    assert d["starts"] is False
    assert "max seq len (131072)" in d["error"] or "No available memory" in d["error"]
    # each prediction is profiled at its own batch: vLLM's 1024 sequences put a larger sampler pass
    # into the peak than the planner's own max_num_seqs
    assert r["max_num_seqs"] < 1024
    assert d["activation_peak_bytes"] > r["per_gpu"]["activation_peak_bytes"]


def test_defaults_keep_what_the_options_pass() -> None:
    """vllm-project/vllm#27508 (0.11.0): `--gpu-memory-utilization 0.95 --max-num-batched-tokens 1024`
    on gpt-oss-120b fails with the max-seq-len error at the model's 131072: the options' mnbt is kept."""
    r = plan(
        config("openai__gpt-oss-120b"),
        H100,
        options={"vllm_version": "0.11.0", "gpu_memory_utilization": 0.95, "max_num_batched_tokens": 1024},
    )
    d = r["vllm_defaults"]
    assert (d["max_model_len"], d["max_num_batched_tokens"], d["max_num_seqs"]) == (131072, 1024, 1024)


def test_v0_failure_uses_v0_wording() -> None:
    """vllm-project/vllm#10517 (0.6.4, RTX 3090, Llama-3.1-8B, --max-model-len 29000): 'The model's max
    seq len (29000) is larger than the maximum number of tokens that can be stored in KV cache (23648).'"""
    r = plan(
        config("meta-llama__Meta-Llama-3.1-8B"),
        RTX3090,
        options={"vllm_version": "0.6.4", "max_model_len": 29000, "gpu_memory_utilization": 0.9},
    )
    assert r["feasible"] is False
    d = r["vllm_defaults"]
    assert d["starts"] is False
    assert d["error"].startswith(
        "The model's max seq len (29000) is larger than the maximum number of tokens"
    )


# --- the release to plan for ------------------------------------------------------------------------


def test_unset_version_warns_loudly() -> None:
    r = plan(config("Qwen__Qwen3-8B"), H100)
    assert any(w.startswith("VLLM VERSION UNKNOWN") and "vllm_version" in w for w in r["warnings"])


def test_release_from_image_tag() -> None:
    assert version_from_image("vllm/vllm-openai:v0.11.0") == "0.11.0"
    assert version_from_image("registry.local:5000/vllm/vllm-openai:0.10.1.1-cu128") == "0.10.1.1"
    assert version_from_image("vllm/vllm-openai:v0.20.0rc1") == "0.20.0rc1"
    assert version_from_image("vllm/vllm-openai:latest") is None
    assert version_from_image("vllm/vllm-openai@sha256:" + "a" * 64) is None
    assert version_from_image("registry.local:5000/vllm") is None
    r = plan(config("Qwen__Qwen3-8B"), H100, options={"vllm_image": "vllm/vllm-openai:v0.11.0"})
    assert r["vllm_version"] == "0.11.0"
    assert not any("VLLM VERSION" in w for w in r["warnings"])


def test_image_without_release_is_refused() -> None:
    with pytest.raises(
        PlanInputError, match=r"^vllm_version: unset, and the tag of vllm_image .*Fix: set vllm_version"
    ):
        plan(config("Qwen__Qwen3-8B"), H100, options={"vllm_image": "vllm/vllm-openai:nightly"})


def test_commit_is_refused_and_dev_build_warned() -> None:
    with pytest.raises(PlanInputError, match=r"^vllm_version: '3babc05a' is a commit"):
        plan(config("Qwen__Qwen3-8B"), H100, options={"vllm_version": "3babc05a"})
    r = plan(config("Qwen__Qwen3-8B"), H100, options={"vllm_version": "0.11.1.dev123+g3babc05a"})
    assert r["vllm_family"] == version_info("0.11.0").family
    assert any(
        w.startswith("VLLM DEVELOPMENT BUILD: vllm_version 0.11.1.dev123+g3babc05a") for w in r["warnings"]
    )


# --- driver-reserved memory and other processes ---------------------------------------------------


def test_driver_reserve_from_measured_cards() -> None:
    """H100 80GB HBM3: vLLM 0.11 logged 79.18 GiB CUDA total (llm-d-benchmark empirical results);
    RTX 3090: 'total_gpu_memory=23.58GiB' (vllm#10517); H200: torch total 139.80 GiB (fixture)."""
    assert round(GpuSpec.from_any(H100).cuda_total_gib, 2) == 79.18
    assert round(GpuSpec.from_any(RTX3090).cuda_total_gib, 2) == 23.58
    h200 = {"name": "NVIDIA H200", "memory_mib": 143771, "count": 1, "compute_capability": "9.0"}
    assert round(GpuSpec.from_any(h200).cuda_total_gib, 2) == 139.80
    # an unmeasured card keeps the estimate; a passed value wins
    assert GpuSpec.from_any({**H100, "memory_reserved_mib": 500}).reserved_mib == 500


def test_other_processes_fail_the_startup_free_memory_check() -> None:
    """pytorch/pytorch#175666: 'Free memory on device cuda:1 (19.77/22.05 GiB) on startup is less than
    desired GPU memory utilization (0.9, 19.84 GiB).' A 22.05 GiB card with 1.78 GiB held elsewhere."""
    l4 = {
        "name": "NVIDIA L4",
        "memory_mib": 23034,
        "memory_reserved_mib": 455,
        "count": 1,
        "compute_capability": "8.9",
        "memory_used_mib": 1823,
    }
    r = plan(
        config("Qwen__Qwen3-0.6B"), l4, options={"vllm_version": "0.15.1", "gpu_memory_utilization": 0.9}
    )
    assert r["feasible"] is False
    err = r["errors"][0]
    assert err.startswith("gpu_memory_utilization: Free memory on device (19.77/22.05 GiB) on startup")
    assert "desired GPU memory utilization (0.9, 19.84 GiB)" in err
    assert "free the 1823 MiB other processes hold" in err
    # the same GPU idle starts
    idle = {k: v for k, v in l4.items() if k != "memory_used_mib"}
    assert plan(config("Qwen__Qwen3-0.6B"), idle, options={"vllm_version": "0.15.1"})["feasible"] is True


def test_vocabulary_split_over_tensor_parallel_ranks() -> None:
    """VocabParallelEmbedding pads the vocabulary to a multiple of 64 and divides it over the ranks.
    https://github.com/jgchn/llm-d-planner/blob/a95e9f62e5de8cb5d2beb5f5279e7271a231416d/accuracy/results/v0.19.0/logs/qwen-qwen3-14b--h100-80gb--tp5pp1dp1--8192.FAILED.log
    Qwen3-14B at tensor_parallel_size 5 on vLLM 0.19.0: the 40 heads pass the config check, then every
    worker raises 'AssertionError: 151936 is not divisible by 5' building the embedding."""
    result = plan(
        config("Qwen__Qwen3-14B"),
        dict(H100, count=5),
        options={"vllm_version": "0.19.0", "tensor_parallel_size": 5, "max_model_len": 8192},
    )
    assert result["feasible"] is False
    assert result["errors"][0].startswith("tensor_parallel_size: 151936 is not divisible by 5")
    assert "Fix: set tensor_parallel_size to one of 1, 2, 4." in result["errors"][0]
    # a vocabulary that is not a multiple of 64 is padded first: 32,001 -> 32,064 = 64 x 3 x 167
    odd = dict(
        config("meta-llama__Meta-Llama-3.1-8B"),
        vocab_size=32001,
        num_attention_heads=60,
        num_key_value_heads=60,
    )
    five = plan(odd, dict(H100, count=8), options={"vllm_version": "0.19.0", "tensor_parallel_size": 5})
    assert five["errors"][0].startswith("tensor_parallel_size: 32064 is not divisible by 5")
    three = plan(odd, dict(H100, count=8), options={"vllm_version": "0.19.0", "tensor_parallel_size": 3})
    assert not any("32064" in e or "32001" in e for e in three["errors"])


def test_torch_cublas_workspace_counts_in_the_profile_peak() -> None:
    """PyTorch allocates a cuBLAS workspace from its caching allocator at the first GEMM, inside the profile
    run: 32 MiB on compute capability 9.0, 8.125 MiB elsewhere (CublasHandlePool.cpp's defaults).
    https://github.com/jgchn/llm-d-planner/blob/a95e9f62e5de8cb5d2beb5f5279e7271a231416d/accuracy/results/v0.19.0/logs/meta-llama-llama---h100-80gb--tp1pp1dp1--8192-dtbf16.log
    Llama-3.1-8B on an H100, vLLM 0.19.0 serve defaults at max_model_len 8192, gmu 0.95: 'torch peak memory
    increase: 1.89GiB; non-torch forward increase memory: 0.25GiB', 'Available KV cache memory: 58.11 GiB'."""
    h100 = dict(H100, memory_reserved_mib=468)
    opts = {"vllm_version": "0.19.0", "max_model_len": 8192, "gpu_memory_utilization": 0.95}
    vllm = plan(config("meta-llama__Meta-Llama-3.1-8B"), h100, options=opts)["vllm_defaults"]
    assert abs(vllm["activation_peak_bytes"] / GIB - 1.89) < 0.01
    assert abs(vllm["available_kv_cache_bytes"] / GIB - 58.11) < 0.01
    # the same start on an sm_89 card takes the smaller default; releases after 0.19 leave it to cuBLAS
    l40s = {"name": "NVIDIA L40S", "memory_mib": 46068, "count": 1, "compute_capability": "8.9"}
    peak = {
        (g["name"], v): plan(config("meta-llama__Meta-Llama-3.1-8B"), g, options=dict(opts, vllm_version=v))[
            "vllm_defaults"
        ]["activation_peak_bytes"]
        for g in (h100, l40s)
        for v in ("0.19.0", "0.20.1")
    }
    assert peak[H100["name"], "0.19.0"] - peak[H100["name"], "0.20.1"] == 32 << 20
    assert peak["NVIDIA L40S", "0.19.0"] - peak["NVIDIA L40S", "0.20.1"] == (4096 * 2 + 16 * 8) << 10
