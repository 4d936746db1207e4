"""Per-GPU memory accounting by vLLM version family, on the real H200 numbers of the spec (§1.6, §8)."""

from __future__ import annotations

import pytest
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_planner import GpuSpec, plan
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_planner.gpu import (
    estimate_reserved_mib,
    gpu_spec_from_facts,
)
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_planner.versions import (
    parse_version,
    version_info,
)
from planner_helpers import H100, H200, config, gpu

GIB = 1 << 30
H200_CUDA_TOTAL = (
    150_109_880_320  # torch.cuda total_memory measured on the H200 (nvidia-smi 143771 MiB, 616 reserved)
)


def test_cuda_total_is_smi_total_minus_reserved() -> None:
    spec = GpuSpec.from_any(H200)
    assert abs(spec.cuda_total_bytes - H200_CUDA_TOTAL) < 1 << 20
    assert round(spec.cuda_total_gib, 2) == 139.80


@pytest.mark.parametrize(
    ("total", "low", "high"), [(143771, 550, 700), (81559, 450, 600), (24564, 300, 400), (16384, 200, 320)]
)
def test_reserved_estimate_is_in_the_range_of_captured_cards(total: int, low: int, high: int) -> None:
    assert low <= estimate_reserved_mib(total) <= high


LLAMA8B = {
    "vllm_version": None,
    "max_model_len": 131072,
    "max_num_seqs": 1024,
    "max_num_batched_tokens": 8192,
}


def _run(version: str, **extra: object) -> dict:
    opts = dict(LLAMA8B, vllm_version=version)
    opts.update(extra)
    return plan(config("meta-llama__Meta-Llama-3.1-8B"), H200, options=opts)


def test_worked_example_llama_8b_on_h200() -> None:
    r11, r20, r34 = _run("0.11.0"), _run("0.20.1"), _run("0.34.0")
    for r in (r11, r20, r34):
        assert r["feasible"]
        assert r["kv_bytes_per_token"] == 128 * 1024
        assert abs(r["per_gpu"]["weights_bytes"] / GIB - 14.99) < 0.02  # 14.96 GiB weights + rotary cache
    assert (
        r11["per_gpu_budget_bytes"] == int(H200_CUDA_TOTAL * 0.9)
        or abs(r11["per_gpu_budget_bytes"] - 0.9 * GpuSpec.from_any(H200).cuda_total_bytes) < 2
    )
    assert abs(r20["per_gpu_budget_bytes"] - 0.92 * GpuSpec.from_any(H200).cuda_total_bytes) < 2
    # 0.20+: the V1 runner's graph estimate comes out of the budget, but the budget grew from 0.9 to 0.92
    # (the sampler's profile peak also differs between the two releases)
    a11, a20 = r11["per_gpu"]["activation_peak_bytes"], r20["per_gpu"]["activation_peak_bytes"]
    assert r20["available_kv_cache_bytes"] == pytest.approx(
        r11["available_kv_cache_bytes"]
        + 0.02 * GpuSpec.from_any(H200).cuda_total_bytes
        - r20["per_gpu"]["cuda_graph_reserved_bytes"]
        + a11
        - a20,
        rel=1e-6,
    )
    # 0.34: extensible cache takes what is left after warmup (budget = whole GPU)
    assert r34["available_kv_cache_bytes"] > r20["available_kv_cache_bytes"]
    assert r11["block_size"] == 16 and r34["block_size"] == 64
    # concurrency = blocks / blocks per request; tokens logged by the release's formula
    assert r11["kv_cache_tokens"] == r11["kv_cache_blocks"] * 16
    assert r20["kv_cache_tokens"] == int(r20["kv_cache_blocks"] / (131072 // 16) * 131072)
    assert 6.0 < r11["max_concurrency"] < 7.6 and 6.0 < r34["max_concurrency"] < 8.0


def test_enforce_eager_drops_cuda_graphs_from_the_budget() -> None:
    graphs, eager = _run("0.20.1"), _run("0.20.1", enforce_eager=True)
    assert eager["per_gpu"]["cuda_graph_bytes"] == 0
    assert eager["per_gpu"]["cuda_graph_reserved_bytes"] == 0
    # what eager frees inside the budget is the estimate vLLM subtracted, not the captured pool
    assert (
        eager["available_kv_cache_bytes"]
        == graphs["available_kv_cache_bytes"] + graphs["per_gpu"]["cuda_graph_reserved_bytes"]
    )
    assert "--enforce-eager" in eager["vllm_args"]


def test_graphs_outside_budget_before_0_20() -> None:
    graphs, eager = _run("0.11.0"), _run("0.11.0", enforce_eager=True)
    assert graphs["available_kv_cache_bytes"] == eager["available_kv_cache_bytes"]


def test_nccl_inside_budget_only_in_0_9_to_0_10() -> None:
    cfg = config("meta-llama__Meta-Llama-3.1-70B")
    opts = {
        "tensor_parallel_size": 4,
        "max_model_len": 8192,
        "max_num_seqs": 256,
        "max_num_batched_tokens": 8192,
    }
    a = plan(cfg, H100, options=dict(opts, vllm_version="0.10.2"))
    b = plan(cfg, H100, options=dict(opts, vllm_version="0.11.0"))
    assert a["available_kv_cache_bytes"] < b["available_kv_cache_bytes"]


def test_activation_grows_with_profile_batch() -> None:
    small = _run("0.20.1", max_num_batched_tokens=2048, max_num_seqs=256)
    big = _run("0.20.1")
    assert small["per_gpu"]["activation_peak_bytes"] < big["per_gpu"]["activation_peak_bytes"]
    assert small["kv_cache_tokens"] > big["kv_cache_tokens"]


def test_tp_reduces_per_gpu_weights_and_kv_per_token() -> None:
    cfg = config("meta-llama__Meta-Llama-3.1-70B")
    r2 = plan(cfg, H100, options={"tensor_parallel_size": 2, "max_model_len": 8192})
    r8 = plan(cfg, H100, options={"tensor_parallel_size": 8, "max_model_len": 8192})
    assert r8["per_gpu"]["weights_bytes"] < r2["per_gpu"]["weights_bytes"] / 3.5
    assert r8["kv_bytes_per_token"] == r2["kv_bytes_per_token"] // 4


@pytest.mark.parametrize(
    ("text", "expected"),
    [("0.11.2", (0, 11, 2)), ("v0.8.5.post1", (0, 8, 5)), ("0.20.0rc1", (0, 20, 0)), ("0.34", (0, 34, 0))],
)
def test_version_parsing(text: str, expected: tuple[int, int, int]) -> None:
    assert parse_version(text) == expected


@pytest.mark.parametrize(
    ("version", "family"),
    [
        ("0.4.3", "V0-init-free"),
        ("0.6.3", "V0-init-free"),
        ("0.6.4", "V0-peak-nontorch"),
        ("0.6.5", "V0-snapshot"),
        ("0.7.3", "V0-snapshot"),
        ("0.8.5", "V1-early"),
        ("0.9.2", "V1-snapshot-A"),
        ("0.19.1", "V1-snapshot-B"),
        ("0.20.0", "V1-cg-profiled"),
        ("0.33.0", "V1-cg-profiled"),
        ("0.34.0", "V1-extensible"),
        ("0.40.1", "V1-extensible"),
    ],
)
def test_version_families(version: str, family: str) -> None:
    assert version_info(version).family == family


FACTS = {
    "present": True,
    "count": 3,
    "driver_version": "580.159.04",
    "cuda_version": "13.0",
    "gpus": [
        {
            "index": 0,
            "uuid": "GPU-a",
            "name": "NVIDIA H100 80GB HBM3",
            "memory_total_mib": 81559,
            "compute_capability": "9.0",
            "mig_mode": "Disabled",
        },
        {
            "index": 1,
            "uuid": "GPU-b",
            "name": "NVIDIA H100 80GB HBM3",
            "memory_total_mib": 81559,
            "compute_capability": "9.0",
            "mig_mode": "Disabled",
        },
        {
            "index": 2,
            "uuid": "GPU-c",
            "name": "NVIDIA L4",
            "memory_total_mib": 23034,
            "compute_capability": "8.9",
            "mig_mode": "Disabled",
        },
    ],
    "topology": {},
}


def test_gpu_spec_from_facts_skips_mig_gpus() -> None:
    facts = dict(
        FACTS, gpus=[dict(g, mig_mode="Enabled") if g["index"] == 0 else g for g in FACTS["gpus"][:2]]
    )
    spec = gpu_spec_from_facts(facts)
    assert spec["count"] == 1 and "MIG mode enabled" in spec["excluded"][0]


def test_shared_gpu_lowers_budget_on_older_releases() -> None:
    r = plan(config("Qwen__Qwen3-0.6B"), gpu(H200, shared=True), options={"vllm_version": "0.11.0"})
    assert r["gpu_memory_utilization"] == 0.5 and "--gpu-memory-utilization" in r["vllm_args"]


# --- LoRA slots -----------------------------------------------------------------------------------

TINY_LLAMA = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 128,
    "intermediate_size": 256,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 32,
    "num_hidden_layers": 2,
    "vocab_size": 512,
    "max_position_embeddings": 512,
    "tie_word_embeddings": False,
    "dtype": "float32",
}


def test_lora_buffers_of_a_tiny_llama_by_hand() -> None:
    from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_planner.config import resolve
    from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_planner.lora import lora_bytes

    arch = resolve(TINY_LLAMA)
    r = 8
    # per layer: qkv A 3*r*128 + B (128+64+64)*r; o A r*128 + B 128*r; gate_up A 2*r*128 + B 512*r;
    # down A r*256 + B 128*r
    layer = 3 * r * 128 + 256 * r + r * 128 + 128 * r + 2 * r * 128 + 512 * r + r * 256 + 128 * r
    ends = (512 * r + 128 * r) + (r * 128 + 512 * r)  # embed_tokens, lm_head
    assert lora_bytes(arch, 2, r, 1, 4, 2) == (2 * layer + ends) * 2 * 4
    # tensor parallel halves the sharded sides only; a middle stage has neither end
    assert lora_bytes(arch, 1, r, 2, 4, 1, False, False) < layer * 4
    assert lora_bytes(arch, 0, r, 1, 4, 2) == 0


def test_lora_slots_are_counted_with_the_weights_and_shrink_the_kv_cache() -> None:
    base = plan(config("meta-llama__Meta-Llama-3.1-8B"), gpu(H100, count=1))
    lora = plan(
        config("meta-llama__Meta-Llama-3.1-8B"),
        gpu(H100, count=1),
        options={"max_loras": 4, "max_lora_rank": 64},
    )
    grown = lora["per_gpu"]["weights_bytes"] - base["per_gpu"]["weights_bytes"]
    # 32 layers of 4096 hidden, 14336 intermediate, 8 KV heads; bf16; 4 slots of rank 64
    layer = (
        3 * 64 * 4096
        + 6144 * 64
        + 64 * 4096
        + 4096 * 64
        + 2 * 64 * 4096
        + 2 * 14336 * 64
        + 64 * 14336
        + 4096 * 64
    )
    ends = 2 * (128256 * 64 + 4096 * 64)
    assert grown == pytest.approx((32 * layer + ends) * 4 * 2, rel=1e-6)
    assert lora["per_gpu"]["kv_cache_bytes"] < base["per_gpu"]["kv_cache_bytes"]
    assert lora["vllm_args"][-5:] == ["--max-loras", "4", "--max-lora-rank", "64", "--enable-lora"]


def test_a_lora_rank_vllm_does_not_accept_is_refused_with_the_fix() -> None:
    with pytest.raises(ValueError, match="max_lora_rank: vLLM accepts 1, 8, 16"):
        plan(config("meta-llama__Meta-Llama-3.1-8B"), gpu(H100, count=1), options={"max_lora_rank": 12})
