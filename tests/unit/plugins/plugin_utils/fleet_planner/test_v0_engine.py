"""The V0 engine's memory accounting (vLLM before 0.8) against vLLM's own startup logs."""

from __future__ import annotations

import pytest
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_planner import GpuSpec, plan
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_planner.config import resolve
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_planner.memory import (
    CUDA_CONTEXT,
    stage_memory,
)
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_planner.sampler import (
    SORT_BYTES,
    sampler_path,
)
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_planner.v0_engine import (
    v0_available_kv,
    v0_family,
    v0_mla_token_bytes,
)
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_planner.versions import version_info
from planner_helpers import A100_40, H100, H200, RTX4090, T4, config, gpu

GIB = 1 << 30
MIB = 1 << 20

# https://github.com/vllm-project/vllm/issues/10517 (kaspersiminski, 2024-12-02): v0.6.4, one RTX 3090
RTX3090 = {
    "name": "NVIDIA GeForce RTX 3090",
    "memory_mib": 24576,
    "count": 1,
    "compute_capability": "8.6",
    "memory_reserved_mib": 430,
}
# OCI AI Quick Actions troubleshooting guide (A10, vLLM 0.7, Llama-3.1-8B at 131072 tokens):
# https://github.com/oracle-samples/oci-data-science-ai-samples/blob/03135b92e0d7488b40f81f19d2da77d287846b6e/ai-quick-actions/troubleshooting-tips.md
A10 = {
    "name": "NVIDIA A10",
    "memory_mib": 23028,
    "count": 1,
    "compute_capability": "8.6",
    "memory_reserved_mib": 428,
}
V0_ERROR = (
    "max_model_len: The model's max seq len ({}) is larger than the maximum number of tokens that can be "
    "stored in KV cache ("
)


@pytest.mark.parametrize(
    ("version", "family"),
    [
        ((0, 4, 3), "V0-init-free"),  # worker.py: peak_memory = self.init_gpu_memory - free_gpu_memory
        ((0, 5, 5), "V0-init-free"),
        ((0, 6, 3), "V0-init-free"),
        ((0, 6, 4), "V0-peak-nontorch"),  # allocated peak + (total - free - allocated), all of the GPU
        ((0, 6, 5), "V0-snapshot"),  # memory_profiling from the init_device baseline
        ((0, 7, 3), "V0-snapshot"),
    ],
)
def test_budget_family_by_release(version: tuple[int, int, int], family: str) -> None:
    assert v0_family(version) == family


def test_snapshot_budget_reproduces_the_a10_log() -> None:
    # 'total_gpu_memory (22.07GiB) x gpu_memory_utilization (0.90) = 19.86GiB; model weights take 14.99GiB;
    # non_torch_memory takes 0.05GiB; PyTorch activation peak memory takes 0.22GiB; the rest of the memory
    # reserved for KV Cache is 4.60GiB': the CUDA context and other processes are not subtracted.
    requested = int(22.07 * GIB * 0.90)
    args = (requested, int(14.99 * GIB), int(0.22 * GIB), int(0.05 * GIB), 512 * MIB, 428 * MIB)
    assert round(v0_available_kv((0, 7, 3), *args) / GIB, 2) == 4.60
    # the same measurement under 0.6.4 would have charged the context and the other processes as well
    assert v0_available_kv((0, 6, 4), *args) == v0_available_kv((0, 7, 3), *args) - 940 * MIB


def test_a10_budget_leaves_out_the_cuda_context() -> None:
    spec = GpuSpec.from_any(A10)
    w, a = 14.99 * GIB, 0.22 * GIB
    snap = stage_memory(spec, version_info("0.7.3"), 0.9, w, a, 0.0, 1, 1)
    peak = stage_memory(spec, version_info("0.6.4"), 0.9, w, a, 0.0, 1, 1)
    v1 = stage_memory(spec, version_info("0.8.5"), 0.9, w, a, 0.0, 1, 1)
    # 0.6.4 and 0.8 charge the context and the other processes against total x gmu; 0.6.5-0.7 do not
    assert snap.available_kv - peak.available_kv == CUDA_CONTEXT + spec.used_bytes
    assert snap.available_kv > v1.available_kv
    # the single-GPU non-torch share is of the size vLLM logged ('non_torch_memory takes 0.05GiB')
    assert round(snap.non_torch / GIB, 2) == 0.06
    # TP 2: NCCL communicators are created after the baseline, inside the budget
    tp2 = stage_memory(spec, version_info("0.7.3"), 0.9, w, a, 0.0, 2, 2)
    assert tp2.non_torch > snap.non_torch + 512 * MIB
    opts = {"vllm_version": "0.7.3", "max_model_len": 131072, "gpu_memory_utilization": 0.9}
    result = plan(config("meta-llama__Meta-Llama-3.1-8B"), A10, options=opts)
    assert not result["feasible"]
    assert result["errors"][0].startswith(V0_ERROR.format(131072))


@pytest.mark.parametrize(("max_len", "tokens", "starts"), [(20000, 31232, True), (29000, 23648, False)])
def test_rtx3090_v064_blocks_and_failure(max_len: int, tokens: int, starts: bool) -> None:
    # '# GPU blocks: 1952' at --max-model-len 20000 and the KV-cache error with 23648 tokens at 29000
    opts = {"vllm_version": "0.6.4", "max_model_len": max_len, "gpu_memory_utilization": 0.9}
    result = plan(config("meta-llama__Meta-Llama-3.1-8B"), RTX3090, options=opts)
    predicted = result["kv_cache_blocks"] * result["block_size"]
    assert result["block_size"] == 16
    assert abs(predicted - tokens) / tokens < 0.03
    assert result["feasible"] is starts
    if not starts:
        assert result["errors"][0].startswith(V0_ERROR.format(max_len))


def test_tp2_rtx4090_v07_fails_with_the_v0_error() -> None:
    # https://github.com/vllm-project/vllm/issues/13061: R1-Distill-Qwen-14B, TP 2, gmu 0.98, 131072 tokens:
    # 'maximum number of tokens that can be stored in KV cache (81536)'
    opts = {
        "vllm_version": "0.7.2",
        "tensor_parallel_size": 2,
        "gpu_memory_utilization": 0.98,
        "max_model_len": 131072,
    }
    result = plan(config("Qwen__Qwen2.5-14B"), gpu(RTX4090, count=2), options=opts)
    assert not result["feasible"]
    err = result["errors"][0]
    assert err.startswith(V0_ERROR.format(131072))
    tokens = int(err.split("KV cache (")[1].split(")")[0])
    assert abs(tokens - 81536) / 81536 < 0.03


def test_v0_profile_samples_with_the_sort_path() -> None:
    # https://github.com/vllm-project/vllm/issues/13882: Qwen2.5-7B, 4096 tokens, 256 sequences, 0.7.3:
    # 'PyTorch activation peak memory takes 1.42GiB', mostly the sampler's sort over 256 x 152064 logits
    cfg = config("Qwen__Qwen2.5-7B")
    opts = {
        "vllm_version": "0.7.3",
        "max_model_len": 4096,
        "max_num_seqs": 256,
        "max_num_batched_tokens": 4096,
        "gpu_memory_utilization": 0.9,
    }
    act = plan(cfg, RTX4090, options=opts)["per_gpu"]["activation_peak_bytes"]
    assert sampler_path(version_info("0.7.3"), 256, (8, 9)) == "sort"
    assert act >= 256 * cfg["vocab_size"] * SORT_BYTES
    assert abs(act - 1.42 * GIB) < 0.05 * 1.42 * GIB
    v08 = plan(cfg, RTX4090, options={**opts, "vllm_version": "0.8.5"})["per_gpu"]["activation_peak_bytes"]
    assert act > v08  # 0.8's V1 sampler runs FlashInfer's fused kernels


def test_deepseek_cache_entries_by_release() -> None:
    arch = resolve(config("deepseek-ai__DeepSeek-V3"))
    assert arch.mla is not None
    # 0.6: MHA with 128 KV heads of head_size 256 (192 padded): 2 x 16 x 256 x 2 bytes at TP 8
    assert v0_mla_token_bytes(arch, (0, 6, 6), 8, 2, 2) == 16384
    # 0.7.1+: latent 512 + rope 64 = 576 elements padded to 640 (256-byte alignment of bf16)
    assert v0_mla_token_bytes(arch, (0, 7, 3), 8, 2, 2) == 1280
    assert v0_mla_token_bytes(arch, (0, 7, 3), 8, 1, 2) == 640  # fp8 cache, alignment in the model dtype
    result = plan(
        config("deepseek-ai__DeepSeek-V3"),
        gpu(H200, count=8),
        options={"vllm_version": "0.7.3", "tensor_parallel_size": 8, "max_model_len": 4096},
    )
    assert result["block_size"] == 16
    per_block = result["per_gpu"]["kv_cache_bytes"] // result["kv_cache_blocks"]
    assert per_block == 16 * 1280 * arch.num_layers


def test_older_than_modelled_warns_but_plans_v0() -> None:
    result = plan(config("Qwen__Qwen3-0.6B"), H200, options={"vllm_version": "0.3.3"})
    assert result["vllm_family"] == "V0-init-free"
    assert any("predates the 0.4 V0 engine" in w for w in result["warnings"])
    spec = GpuSpec.from_any(H200)
    assert result["per_gpu"]["total_bytes"] == spec.cuda_total_bytes


@pytest.mark.parametrize(
    ("gpu_spec", "kv_dtype", "family"),
    [
        (T4, "auto", "V0-snapshot"),  # 'Compute Capability < 8.0'
        (A100_40, "fp8", "V0-snapshot"),  # fp8 KV cache needs FlashAttention 3 (Hopper) in V1
        (H100, "fp8", "V1-early"),
        (A100_40, "auto", "V1-early"),
    ],
)
def test_v08_falls_back_to_v0_where_the_oracle_says(gpu_spec: dict, kv_dtype: str, family: str) -> None:
    opts = {"vllm_version": "0.8.5", "max_model_len": 4096, "kv_cache_dtype": kv_dtype, "dtype": "float16"}
    result = plan(config("Qwen__Qwen2.5-1.5B"), gpu(gpu_spec, count=1), options=opts)
    assert result["vllm_family"] == family
    assert any("falls back to the V0 engine" in w for w in result["warnings"]) is (family == "V0-snapshot")


def test_v08_v0_fallback_uses_the_v0_budget_and_error() -> None:
    opts = {"vllm_version": "0.8.5", "max_model_len": 131072, "dtype": "float16"}
    result = plan(config("meta-llama__Llama-3.2-3B"), gpu(T4, count=1), options=opts)
    assert not result["feasible"]
    assert result["errors"][0].startswith(V0_ERROR.format(131072))
    v1 = plan(
        config("Qwen__Qwen2.5-1.5B"),
        gpu(A100_40, count=1),
        options={"vllm_version": "0.8.5", "max_model_len": 16384},
    )
    v0 = plan(
        config("Qwen__Qwen2.5-1.5B"),
        gpu(A100_40, count=1),
        options={"vllm_version": "0.8.5", "kv_cache_dtype": "fp8", "max_model_len": 16384},
    )
    # V0's scheduler: one prefill of the whole context (no chunked prefill), where V1 chunks it
    assert v0["max_num_batched_tokens"] == v0["max_model_len"] > v1["max_num_batched_tokens"]
    assert v0["kv_cache_blocks"] * v0["block_size"] > 1.9 * v1["kv_cache_blocks"] * v1["block_size"]
