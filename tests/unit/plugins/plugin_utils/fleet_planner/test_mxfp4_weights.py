"""MXFP4 expert bytes per backend and release, from vLLM's own allocation.

Shapes follow Mxfp4MoEMethod.create_weights (vllm/model_executor/layers/quantization/mxfp4.py, and
from 0.14 fused_moe/oracle/mxfp4.py `mxfp4_round_up_hidden_size_and_intermediate_size`): per rank
w13 (E, 2I, H/2) uint8 with scales (E, 2I, H/32) and bias (E, 2I) bf16; w2 (E, H, I/2) uint8 with
scales (E, H, I/32) and bias (E, H). Marlin pads I to 128 and H to 256, FlashInfer TRT-LLM both to
256, Triton I to 64. After loading the Triton path swizzles weights and scales into new tensors
(`_swizzle_mxfp4`, mxfp4_utils.py; HopperMXScaleLayout pads scale rows to 2*num_warps*2*8 = 256),
deletes the original weights but not the original scales, and casts the biases to fp32; TRT-LLM
also keeps fp32 biases. Releases before 0.10.2 ship torch 2.7.1, below the Triton path's torch 2.8,
so Hopper runs Marlin there (vllm#23278's log: "Your GPU does not have native support for FP4").

The logged "Model loading took" figures are from the public logs the accuracy cases cite.
"""

from __future__ import annotations

import pytest
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_planner import plan, resolve
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_planner.quant import (
    NONE,
    for_release,
    resolve_quant,
)
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_planner.versions import (
    version_info,
)
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_planner.weights import (
    checkpoint_bytes,
    mxfp4_backend,
    mxfp4_expert_bytes,
)
from planner_helpers import H100, config, gpu

GIB = 1 << 30
A100 = {"name": "NVIDIA A100-SXM4-80GB", "memory_mib": 81920, "count": 4, "compute_capability": "8.0"}
HOPPER, AMPERE, BLACKWELL = (9, 0), (8, 0), (10, 0)
E, H, INTER = 32, 2880, 2880  # gpt-oss-20b: num_local_experts, hidden_size, intermediate_size


def test_backend_per_capability_and_release() -> None:
    assert mxfp4_backend(HOPPER) == "triton"
    assert mxfp4_backend(HOPPER, "marlin") == "marlin"
    assert mxfp4_backend(AMPERE) == "marlin"
    assert mxfp4_backend((8, 9)) == "marlin"
    assert mxfp4_backend((12, 0)) == "marlin"
    assert mxfp4_backend(BLACKWELL) == "trtllm"
    q = resolve_quant({"quant_method": "mxfp4"}, None)
    assert for_release(q, version_info("0.10.1").torch_28).mxfp4_hopper == "marlin"
    assert for_release(q, version_info("0.10.2").torch_28) is q
    assert for_release(q, version_info("0.19.0").torch_28).mxfp4_hopper == "triton"
    # the variant is cached, so plans keep hitting the stage-bytes cache
    assert for_release(q, False) is for_release(q, False)


def test_triton_tp1_holds_the_scales_twice_and_fp32_biases() -> None:
    i = 2880  # round_up(2880, 64)
    weights = E * (2 * i * H // 2 + H * i // 2)
    scales = E * (2 * i * H // 32 + H * i // 32)
    swizzled_scales = E * (5888 * 90 + 3072 * 90)  # rows padded to 256: 5760 -> 5888, 2880 -> 3072
    bias = E * (2 * i + H) * 4
    assert mxfp4_expert_bytes(E, H, INTER, HOPPER) == weights + scales + swizzled_scales + bias


def test_triton_tp2_pads_the_intermediate_to_64() -> None:
    i = 1472  # 1440 -> 1472
    weights = E * 3 * i * H // 2
    scales = E * 3 * i * H // 32
    swizzled_scales = E * (3072 * 90 + 3072 * 46)  # rows 2944 -> 3072 and 2880 -> 3072; I/32 = 46
    bias = E * (2 * i + H) * 4
    assert mxfp4_expert_bytes(E, H, INTER // 2, HOPPER) == weights + scales + swizzled_scales + bias


def test_marlin_pads_hidden_to_256_and_intermediate_to_128() -> None:
    h, i = 3072, 1536  # TP 2: 1440 -> 1536
    got = mxfp4_expert_bytes(E, H, INTER // 2, AMPERE)
    assert got == E * (3 * i * h // 2 + 3 * i * h // 32 + (2 * i + h) * 2)
    assert mxfp4_expert_bytes(E, H, INTER // 2, HOPPER, "marlin") == got


def test_trtllm_pads_both_to_256_with_fp32_biases() -> None:
    h, i = 3072, 3072
    got = mxfp4_expert_bytes(E, H, INTER, BLACKWELL)
    assert got == E * (3 * i * h // 2 + 3 * i * h // 32 + (2 * i + h) * 4)


# (model, gpu, tp, release, logged GiB, source)
LOGGED = [
    # Marlin on Hopper (torch 2.7.1): 'Model loading took 65.9651 GiB'
    ("openai__gpt-oss-120b", H100, 1, "0.10.1", 65.9651, "https://github.com/vllm-project/vllm/issues/23278"),
    # Triton on Hopper: 'Model loading took 64.38 GiB' on 0.11.0 and again on 0.14.1
    (
        "openai__gpt-oss-120b",
        H100,
        1,
        "0.11.0",
        64.38,
        "https://github.com/llm-d/llm-d-benchmark/blob/4f4d44943c39b76b28e30dfa1fb0dfaf1ee894b5/"
        "config_explorer/empirical-vllm-memory-results.md",
    ),
    ("openai__gpt-oss-120b", H100, 1, "0.14.1", 64.38, "https://github.com/vllm-project/vllm/issues/33155"),
    (
        "openai__gpt-oss-20b",
        H100,
        1,
        "0.11.0",
        13.47,
        "https://github.com/llm-d/llm-d-benchmark/blob/4f4d44943c39b76b28e30dfa1fb0dfaf1ee894b5/"
        "config_explorer/empirical-vllm-memory-results.md",
    ),
    # Marlin on Ampere
    (
        "openai__gpt-oss-120b",
        A100,
        4,
        "0.10.1",
        17.2217,
        "https://github.com/dennislee22/vLLM-benchmarking/blob/b474d1e053c35c9aef8c02aae4efbc0d8675f033/"
        "log/vllm-120B-4gpuA10080GB-0.8GRAM-diff-nodes.log",
    ),
    ("openai__gpt-oss-20b", A100, 1, "0.19.0", 13.72, "https://myoceane.fr/index.php/ai-vllm-a100-gemma-4/"),
]


@pytest.mark.parametrize(("model", "card", "tp", "release", "logged", "source"), LOGGED)
def test_weights_match_vllm_model_loading_took(
    model: str, card: dict, tp: int, release: str, logged: float, source: str
) -> None:
    r = plan(
        config(model),
        gpu(card, count=max(tp, 1)),
        options={
            "vllm_version": release,
            "tensor_parallel_size": tp,
            "max_model_len": 4096,
            "gpu_memory_utilization": 0.95,
        },
    )
    got = r["per_gpu"]["weights_bytes"] / GIB
    assert got == pytest.approx(logged, rel=0.005), source


def test_hopper_release_before_torch_28_loads_more_than_after() -> None:
    """Marlin's hidden padding (2880 -> 3072) outweighs Triton's second copy of the scales."""

    def weights(release: str) -> float:
        r = plan(
            config("openai__gpt-oss-120b"),
            gpu(H100, count=1),
            options={"vllm_version": release, "max_model_len": 4096, "gpu_memory_utilization": 0.95},
        )
        return r["per_gpu"]["weights_bytes"] / GIB

    assert weights("0.10.1") > weights("0.11.0") + 1.0


def test_checkpoint_bytes_are_the_unpadded_blocks_and_scales() -> None:
    """What the safetensors hold (a weights-index total is compared with this): FP4 blocks and e8m0
    scales at the config's shapes, biases bf16; none of the per-backend padding or copies."""
    arch = resolve(config("openai__gpt-oss-20b"))
    q = resolve_quant(config("openai__gpt-oss-20b")["quantization_config"], None)
    layers = 24
    saved = layers * E * 3 * H * INTER * (2 - (0.5 + 1 / 32))
    assert checkpoint_bytes(arch, NONE, 2) - checkpoint_bytes(arch, q, 2) == pytest.approx(saved, rel=1e-12)
