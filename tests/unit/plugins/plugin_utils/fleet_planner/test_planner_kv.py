"""KV-cache geometry per architecture, on the real config.json fixtures."""

from __future__ import annotations

import pytest
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_planner import plan, resolve
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_planner.gpu import GpuSpec
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_planner.kv import (
    attention_token_bytes,
    build_layout,
    mamba_state_bytes,
)
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_planner.versions import version_info
from planner_helpers import H100, H200, config, gpu

# (fixture, tp, kv dtype bytes, expected KV bytes per token per GPU summed over attention layers)
KV_PER_TOKEN = [
    ("meta-llama__Meta-Llama-3.1-8B", 1, 2, 32 * 2 * 8 * 128 * 2),  # GQA 8 KV heads
    ("meta-llama__Meta-Llama-3.1-70B", 1, 2, 80 * 2 * 8 * 128 * 2),
    ("meta-llama__Meta-Llama-3.1-70B", 4, 2, 80 * 2 * 2 * 128 * 2),  # KV heads split by TP
    ("meta-llama__Meta-Llama-3.1-70B", 8, 2, 80 * 2 * 1 * 128 * 2),
    ("meta-llama__Meta-Llama-3.1-70B", 8, 1, 80 * 2 * 1 * 128 * 1),  # fp8 KV cache
    ("Qwen__Qwen2.5-1.5B", 1, 2, 28 * 2 * 2 * 128 * 2),
    ("Qwen__Qwen2.5-1.5B", 4, 2, 28 * 2 * 1 * 128 * 2),  # TP > KV heads: one replicated head per GPU
    ("Qwen__Qwen3-8B", 1, 2, 36 * 2 * 8 * 128 * 2),  # explicit head_dim
    ("Qwen__Qwen3-0.6B", 1, 2, 28 * 2 * 8 * 128 * 2),  # head_dim 128 != hidden 1024 / 16 heads
    ("Qwen__Qwen3-235B-A22B", 4, 2, 94 * 2 * 1 * 128 * 2),  # MoE, 4 KV heads
    ("Qwen__Qwen3-VL-8B-Instruct", 1, 2, 36 * 2 * 8 * 128 * 2),  # text_config nesting
    ("mistralai__Mixtral-8x7B-v0.1", 2, 2, 32 * 2 * 4 * 128 * 2),
    ("deepseek-ai__DeepSeek-V3", 1, 2, 61 * (512 + 64) * 2),  # MLA latent, not x2
    ("deepseek-ai__DeepSeek-V3", 8, 2, 61 * (512 + 64) * 2),  # MLA is never split by TP
    ("deepseek-ai__DeepSeek-R1", 8, 1, 61 * (512 + 64) * 1),
    ("openai__gpt-oss-120b", 1, 2, 36 * 2 * 8 * 64 * 2),  # 18 sliding + 18 full layers, head_dim 64
    ("meta-llama__Llama-4-Scout-17B-16E-Instruct", 1, 2, 48 * 2 * 8 * 128 * 2),  # chunked-local as full
]


@pytest.mark.parametrize(("fixture", "tp", "kvb", "expected"), KV_PER_TOKEN)
def test_kv_bytes_per_token(fixture: str, tp: int, kvb: int, expected: int) -> None:
    arch = resolve(config(fixture))
    vinfo = version_info("0.20.1")
    lay = build_layout(
        arch,
        0,
        arch.num_layers,
        tp,
        kvb,
        "fp8" if kvb == 1 else "auto",
        2,
        GpuSpec.from_any(H200),
        vinfo,
        None,
    )
    assert lay.per_token_bytes == expected


@pytest.mark.parametrize(
    ("fixture", "kv_dtype", "expected"),
    [
        ("meta-llama__Meta-Llama-3.1-8B", "auto", 131072),
        ("meta-llama__Meta-Llama-3.1-8B", "fp8", 65536),
        ("deepseek-ai__DeepSeek-V3", "auto", 70272),
        (
            "nvidia__Llama-3.1-70B-Instruct-FP8",
            "auto",
            163840,
        ),  # ModelOpt checkpoint declares an FP8 KV cache
    ],
)
def test_plan_reports_kv_bytes_per_token(fixture: str, kv_dtype: str, expected: int) -> None:
    opts = {"kv_cache_dtype": kv_dtype, "vllm_version": "0.20.1", "max_model_len": 8192}
    if "70B" in fixture:
        opts["tensor_parallel_size"] = 1
    result = plan(config(fixture), gpu(H200, count=8), options=opts)
    assert result["kv_bytes_per_token"] == expected


def test_mla_token_bytes_with_fp8_ds_mla() -> None:
    arch = resolve(config("deepseek-ai__DeepSeek-V3"))
    assert attention_token_bytes(arch, 8, 1, "fp8_ds_mla") == 656


@pytest.mark.parametrize(
    ("version", "cc", "expected"),
    [
        ("0.11.0", "9.0", 64),  # FlashMLA on Hopper
        ("0.11.0", "10.0", 128),  # CUTLASS MLA on data-centre Blackwell
        ("0.11.0", "8.0", 16),  # Triton MLA takes vLLM's default
        ("0.34.0", "8.0", 64),
    ],
)
def test_mla_block_size(version: str, cc: str, expected: int) -> None:
    result = plan(
        config("deepseek-ai__DeepSeek-V3"),
        gpu(H200, count=8, compute_capability=cc),
        options={"vllm_version": version, "max_model_len": 4096},
    )
    assert result["block_size"] == expected


@pytest.mark.parametrize(("version", "expected"), [("0.11.0", 16), ("0.33.0", 16), ("0.34.0", 64)])
def test_default_block_size_by_version(version: str, expected: int) -> None:
    result = plan(config("meta-llama__Meta-Llama-3.1-8B"), H200, options={"vllm_version": version})
    assert result["block_size"] == expected


def test_gpt_oss_sliding_and_full_groups() -> None:
    """18 sliding + 18 full layers -> two groups of 18; a request needs ceil(L/B) + window blocks."""
    arch = resolve(config("openai__gpt-oss-120b"))
    vinfo = version_info("0.26.0")
    lay = build_layout(arch, 0, arch.num_layers, 1, 2, "auto", 2, GpuSpec.from_any(H100), vinfo, None)
    kinds = sorted(g.kind for g in lay.groups)
    assert kinds == ["full", "sliding"]
    assert lay.bytes_per_block == 18 * 16 * 2 * 8 * 64 * 2
    inflight = 8192 * 2  # max_num_batched_tokens x (PP + 1) with async scheduling
    bpr = lay.blocks_per_request(131072, inflight, 1)
    assert bpr == 131072 // 16 + (-(-(128 - 1 + inflight) // 16) + 1)


def test_sliding_window_ignored_when_qwen_disables_it() -> None:
    arch = resolve(config("Qwen__Qwen2.5-7B"))  # sliding_window set, use_sliding_window false
    assert set(arch.layer_kinds) == {"full"}


def test_hybrid_manager_disabled_for_chunked_local_attention() -> None:
    arch = resolve(config("meta-llama__Llama-4-Scout-17B-16E-Instruct"))
    assert "chunked" in arch.layer_kinds
    lay = build_layout(
        arch, 0, arch.num_layers, 1, 2, "auto", 2, GpuSpec.from_any(H100), version_info("0.20.1"), None
    )
    assert [g.kind for g in lay.groups] == ["full"]


# Gated-DeltaNet hybrid with the published Qwen3-Next-80B-A3B shapes (12 full-attention + 36 linear layers).
QWEN3_NEXT_LIKE = {
    "architectures": ["Qwen3NextForCausalLM"],
    "model_type": "qwen3_next",
    "hidden_size": 2048,
    "num_hidden_layers": 48,
    "num_attention_heads": 16,
    "num_key_value_heads": 2,
    "head_dim": 256,
    "intermediate_size": 5120,
    "vocab_size": 151936,
    "max_position_embeddings": 262144,
    "full_attention_interval": 4,
    "linear_num_key_heads": 16,
    "linear_num_value_heads": 32,
    "linear_key_head_dim": 128,
    "linear_value_head_dim": 128,
    "linear_conv_kernel_dim": 4,
    "num_experts": 512,
    "num_experts_per_tok": 10,
    "moe_intermediate_size": 512,
    "shared_expert_intermediate_size": 512,
    "torch_dtype": "bfloat16",
}


def test_mamba_block_size_raised_to_cover_state_page() -> None:
    arch = resolve(QWEN3_NEXT_LIKE)
    assert arch.layer_kinds.count("full") == 12 and arch.layer_kinds.count("mamba") == 36
    state = mamba_state_bytes(arch, 1, 2)
    assert state == ((2 * 16 * 128 + 32 * 128) * 3 + 32 * 128 * 128) * 2
    lay = build_layout(arch, 0, 48, 1, 2, "auto", 2, GpuSpec.from_any(H100), version_info("0.20.1"), None)
    # 16 * ceil(state / (16 * attention bytes per token per layer)) -> 544 tokens
    assert lay.block_size == 544 and lay.block_size_raised
    assert lay.page_bytes == 544 * 2 * 2 * 256 * 2
    # one attention group plus three Mamba groups of 12 layers
    assert sorted(g.kind for g in lay.groups) == ["full", "mamba", "mamba", "mamba"]
