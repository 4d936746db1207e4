"""bitsandbytes 4-bit weight bytes, from vLLM's bitsandbytes loader.

vllm/model_executor/model_loader/bitsandbytes_loader.py (`_unquantized_generator`): an unquantised
checkpoint is quantised at load with `quantize_4bit(loaded_weight, compress_statistics=True,
quant_type="nf4")`: two weights per uint8, one absmax per 64-weight block, and with
compress_statistics (double quantisation) the absmax stored as uint8 with one fp32 absmax per 256
blocks. Pre-quantised checkpoints (`_quantized_4bit_generator`) keep the quant state they were saved
with (bnb_4bit_use_double_quant). Only LinearBase layers with a quant_config are targets
(`_get_bnb_target_modules`): embeddings, the LM head (a vocab-parallel embedding), norms and biases
stay in the model dtype.
"""

from __future__ import annotations

import pytest
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_planner import plan, resolve
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_planner.quant import (
    NONE,
    resolve_quant,
)
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_planner.weights import stage_bytes
from planner_helpers import config

GIB = 1 << 30
DOUBLE = 0.5 + 1 / 64 + 4 / (64 * 256)
SINGLE = 0.5 + 4 / 64
RTX4060 = {
    "name": "NVIDIA GeForce RTX 4060",
    "memory_mib": 8188,
    "count": 1,
    "compute_capability": "8.9",
    "memory_reserved_mib": 0,
}


def test_in_flight_quantisation_is_double_quantised() -> None:
    assert resolve_quant(None, "bitsandbytes").linear_bpp == DOUBLE


@pytest.mark.parametrize(("double", "bpp"), [(True, DOUBLE), (False, SINGLE)])
def test_pre_quantised_checkpoint_keeps_its_quant_state(double: bool, bpp: float) -> None:
    q = {"quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_use_double_quant": double}
    assert resolve_quant(q, None).linear_bpp == bpp


def test_8bit_is_one_byte() -> None:
    q = {"quant_method": "bitsandbytes", "load_in_8bit": True}
    assert resolve_quant(q, None).linear_bpp == 1.0


def test_only_linear_weights_are_quantised() -> None:
    """Qwen2.5-7B: 28 layers of q/k/v/o (28 heads, 4 KV heads of 128) and gate/up/down (18944); the
    152064 x 3584 embedding and LM head, norms and q/k/v biases stay bf16."""
    arch = resolve(config("Qwen__Qwen2.5-7B"))
    h, inter, layers = 3584, 18944, 28
    linear = layers * (2 * h * 28 * 128 + 2 * h * 4 * 128 + 3 * h * inter)
    (bf16,) = stage_bytes(arch, NONE, 2, 1, 1)
    (bnb,) = stage_bytes(arch, resolve_quant(None, "bitsandbytes"), 2, 1, 1)
    assert bf16 - bnb == pytest.approx(linear * (2 - DOUBLE), rel=1e-9)


def test_weights_match_vllm_loading_model_weights_took() -> None:
    """vllm-project/vllm#13882: Qwen2.5-7B-Instruct bitsandbytes 4-bit on an RTX 4060, 0.7.3 (V0):
    'Loading model weights took 5.2032 GB' (GiB, as V0 divides by 2**30)."""
    r = plan(
        config("Qwen__Qwen2.5-7B"),
        RTX4060,
        options={
            "vllm_version": "0.7.3",
            "quantization": "bitsandbytes",
            "max_model_len": 1024,
            "gpu_memory_utilization": 0.95,
            "workload": "batch",
        },
    )
    assert r["per_gpu"]["weights_bytes"] / GIB == pytest.approx(5.2032, rel=0.005)
