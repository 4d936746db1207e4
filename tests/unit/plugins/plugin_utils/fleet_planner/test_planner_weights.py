"""Parameter counts and weight bytes from config.json, against published figures.

Published parameter counts are the totals Hugging Face shows from each repository's safetensors
metadata (model cards: Llama-3.1 8,030,261,248 / 70,553,706,496 / 405,853,388,800; Qwen2.5-7B
7,615,616,512; Qwen3 8B 8,190,735,360 and 32B 32,762,123,264; Mixtral-8x7B 46,702,792,704;
gpt-oss-20b 20,914,757,184 and gpt-oss-120b 116,829,156,672; DeepSeek-V3 671B main model plus
14B MTP module per its model card). `metadata.total_size` of the bf16 checkpoints' index files
is 2 bytes per parameter; DeepSeek-V3's FP8 index records 688,586,727,753 bytes.
"""

from __future__ import annotations

import pytest
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_planner import plan, resolve
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_planner.quant import (
    NONE,
    resolve_quant,
)
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_planner.weights import (
    checkpoint_bytes,
    get_pp_indices,
    mla_absorbed_bytes,
    parameter_count,
    stage_bytes,
)
from planner_helpers import H100, H200, config, gpu

PUBLISHED_PARAMS = [
    ("meta-llama__Meta-Llama-3.1-8B", 8_030_261_248, 0.0),
    ("meta-llama__Meta-Llama-3.1-70B", 70_553_706_496, 0.0),
    ("meta-llama__Meta-Llama-3.1-405B", 405_853_388_800, 0.0),
    ("Qwen__Qwen2.5-7B", 7_615_616_512, 0.0),
    ("Qwen__Qwen3-8B", 8_190_735_360, 0.0),
    ("Qwen__Qwen3-32B", 32_762_123_264, 0.0),
    ("mistralai__Mixtral-8x7B-v0.1", 46_702_792_704, 0.0),
    ("openai__gpt-oss-20b", 20_914_757_184, 0.0005),
    ("openai__gpt-oss-120b", 116_829_156_672, 0.0005),
    ("deepseek-ai__DeepSeek-V3", 671_000_000_000, 0.002),
]


@pytest.mark.parametrize(("fixture", "published", "tolerance"), PUBLISHED_PARAMS)
def test_parameter_count_matches_published(fixture: str, published: int, tolerance: float) -> None:
    count = parameter_count(resolve(config(fixture)))
    assert abs(count - published) <= published * tolerance


INDEX_TOTAL_SIZE = [
    ("meta-llama__Meta-Llama-3.1-8B", 16_060_522_496, 0.0),
    ("meta-llama__Meta-Llama-3.1-70B", 141_107_412_992, 0.0),
    ("mistralai__Mixtral-8x7B-v0.1", 93_405_585_408, 0.0),
    ("deepseek-ai__DeepSeek-V3", 688_586_727_753, 0.001),  # FP8 blocks + fp32 scales + MTP module
]


@pytest.mark.parametrize(("fixture", "total_size", "tolerance"), INDEX_TOTAL_SIZE)
def test_checkpoint_bytes_match_index_total_size(fixture: str, total_size: int, tolerance: float) -> None:
    arch = resolve(config(fixture))
    est = checkpoint_bytes(arch, resolve_quant(arch.quant_config, None), 2)
    assert abs(est - total_size) <= max(total_size * tolerance, 1)


@pytest.mark.parametrize(
    ("layers", "pp", "expected"),
    [
        (80, 2, [(0, 40), (40, 80)]),
        (61, 4, [(0, 15), (15, 30), (30, 46), (46, 61)]),  # remainder to the stages before the last
        (126, 4, [(0, 31), (31, 63), (63, 95), (95, 126)]),
    ],
)
def test_pp_split_follows_get_pp_indices(layers: int, pp: int, expected: list[tuple[int, int]]) -> None:
    assert [get_pp_indices(layers, r, pp) for r in range(pp)] == expected


def test_tp_shards_weights_and_replicates_norms() -> None:
    arch = resolve(config("meta-llama__Meta-Llama-3.1-70B"))
    (one,) = stage_bytes(arch, NONE, 2, 1, 1)
    (eight,) = stage_bytes(arch, NONE, 2, 8, 1)
    assert one / 8 < eight < one / 8 * 1.01  # norms, rotary cache replicated


def test_tied_embeddings_duplicate_on_last_pp_stage() -> None:
    arch = resolve(config("Qwen__Qwen2.5-1.5B"))  # tie_word_embeddings true
    first, last = stage_bytes(arch, NONE, 2, 1, 2)
    embed = 151936 * 1536 * 2
    assert last > embed  # the last stage builds the embedding for its LM head
    assert abs(first - last) < embed * 0.05


def test_fp8_checkpoint_halves_weights() -> None:
    bf16 = plan(config("Qwen__Qwen3-32B"), H200, options={"max_model_len": 8192})
    fp8 = plan(config("Qwen__Qwen3-32B-FP8"), H200, options={"max_model_len": 8192})
    ratio = fp8["per_gpu"]["weights_bytes"] / bf16["per_gpu"]["weights_bytes"]
    assert 0.5 < ratio < 0.53  # embeddings and LM head stay bf16


def test_online_fp8_quantization_of_bf16_checkpoint() -> None:
    base = plan(
        config("meta-llama__Meta-Llama-3.1-70B"),
        gpu(H100, count=2),
        options={"tensor_parallel_size": 2, "max_model_len": 8192},
    )
    q = plan(
        config("meta-llama__Meta-Llama-3.1-70B"),
        gpu(H100, count=2),
        options={"tensor_parallel_size": 2, "max_model_len": 8192, "quantization": "fp8"},
    )
    assert q["quantization"] == "fp8" and "--quantization" in q["vllm_args"]
    assert q["per_gpu"]["weights_bytes"] < 0.55 * base["per_gpu"]["weights_bytes"]


@pytest.mark.parametrize(
    ("fixture", "cc", "low", "high"),
    [
        # MXFP4 experts on Ampere use Marlin: intermediate padded to 128 and hidden to 256.
        ("openai__gpt-oss-20b", "8.0", 13.6, 13.8),
        # Hopper uses the Triton kernels: the scales are held twice (original and swizzled copy) and
        # the biases cast to fp32; vLLM 0.11 logged 'Model loading took 13.47 GiB' (llm-d-benchmark).
        ("openai__gpt-oss-20b", "9.0", 13.3, 13.6),
    ],
)
def test_mxfp4_weights_by_gpu_generation(fixture: str, cc: str, low: float, high: float) -> None:
    result = plan(config(fixture), gpu(H100, count=1, compute_capability=cc), options={"max_model_len": 8192})
    assert low < result["per_gpu"]["weights_bytes"] / 2**30 < high


def test_safetensors_index_total_size_scales_estimate() -> None:
    cfg = config("meta-llama__Meta-Llama-3.1-8B")
    index = {"metadata": {"total_size": 16_060_522_496 * 2}, "weight_map": {}}  # fp32 checkpoint
    result = plan(cfg, H200, safetensors_index=index, options={"max_model_len": 8192})
    assert result["weights_source"] == "safetensors index metadata.total_size"
    assert any("differs from the config-based estimate" in w for w in result["warnings"])


def test_safetensors_index_parameter_count_is_detected() -> None:
    cfg = config("meta-llama__Meta-Llama-3.1-8B")
    index = {"metadata": {"total_size": 8_030_261_248}}  # a tool wrote the parameter count
    result = plan(cfg, H200, safetensors_index=index, options={"max_model_len": 8192})
    assert result["weights_source"] == "config"
    assert any("looks like a parameter count" in w for w in result["warnings"])


def test_safetensors_headers_give_exact_bytes() -> None:
    cfg = config("Qwen__Qwen3-VL-8B-Instruct")
    headers = {
        "model.language_model.embed_tokens.weight": {"dtype": "BF16", "shape": [151936, 4096]},
        "model.visual.blocks.0.attn.qkv.weight": {"dtype": "BF16", "shape": [3456, 1152]},
        "__metadata__": {"format": "pt"},
    }
    result = plan(cfg, H200, safetensors_index=headers, options={"max_model_len": 8192})
    assert result["weights_source"] == "safetensors headers"
    assert result["per_gpu"]["weights_bytes"] > 0


def test_config_without_dtype_is_planned_as_16_bit() -> None:
    """gpt-oss configs carry no torch_dtype: vLLM resolves float32 to bfloat16, the tensors are 16-bit."""
    cfg = config("openai__gpt-oss-120b")
    assert "torch_dtype" not in cfg and "dtype" not in cfg
    index = {"metadata": {"total_size": 65_248_815_744}}
    result = plan(cfg, gpu(H100, count=8), safetensors_index=index, options={"max_model_len": 8192})
    assert result["dtype"] == "bfloat16"
    assert not any(
        "float32" in w or "differs from the config-based estimate" in w for w in result["warnings"]
    )


def test_mla_keeps_a_dequantized_kv_b_proj_for_its_absorbed_matmuls() -> None:
    """DeepSeek-R1-0528 (FP8 blocks) at TP 8, vLLM 0.18.0 on H200: "Model loading took 79.74 GiB" (Red Hat
    sweep, ashishkamra/vllm-memory-estimator @ 8b0e21d test_data/validation_db.json, record 68f57fee).
    MLA's process_weights_after_loading keeps W_UK_T / W_UV as a bf16 copy of the FP8 kv_b_proj: 512 x
    (128 / 8) heads x (128 + 128) x 2 B per layer, 0.24 GiB over 61 layers; a bf16 kv_b_proj is only
    viewed, and the checkpoint does not hold the copy."""
    cfg = config("deepseek-ai__DeepSeek-R1")
    arch = resolve(cfg)
    q = resolve_quant(arch.quant_config, None)
    assert mla_absorbed_bytes(arch, q, 2, 8) == 512 * 16 * 256 * 2
    assert mla_absorbed_bytes(arch, NONE, 2, 8) == 0
    (w,) = stage_bytes(arch, q, 2, 8, 1, cc=(9, 0))
    assert w / (1 << 30) == pytest.approx(79.74, rel=0.003)
