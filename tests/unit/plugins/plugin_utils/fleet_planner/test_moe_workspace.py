"""The fused-MoE workspace that vLLM 0.13+ keeps through the memory profile (WorkspaceManager).

vLLM sources (the PyPI wheels): vllm/model_executor/layers/fused_moe/modular_kernel.py
(_allocate_buffers, get_simultaneous), fused_moe.py (TritonExperts.workspace_shapes),
unquantized_fused_moe_method.py and oracle/fp8.py (which experts run), vllm/v1/worker/workspace.py.
Logs: jgchn/llm-d-planner @ a95e9f6, accuracy/results/v0.19.0/logs (the gpu_worker DEBUG line "torch peak
memory increase"), and ashishkamra/vllm-memory-estimator @ 8b0e21d test_data/validation_db.json.
"""

from __future__ import annotations

import pytest
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_planner import plan
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_planner.config import resolve
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_planner.memory import (
    moe_workspace_bytes,
)
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_planner.quant import resolve_quant
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_planner.versions import version_info
from planner_helpers import config

GIB = 1 << 30
MIB = 1 << 20
HOPPER, BLACKWELL = (9, 0), (10, 0)


def _h100(count: int) -> dict:
    return {"name": "NVIDIA H100 80GB HBM3", "memory_mib": 81559, "count": count, "compute_capability": "9.0"}


def _serve(tp: int) -> dict:
    return {
        "vllm_version": "0.19.0",
        "tensor_parallel_size": tp,
        "gpu_memory_utilization": 0.95,
        "max_model_len": 8192,
        "max_num_seqs": 1024,
        "max_num_batched_tokens": 8192,
    }


def test_triton_experts_workspace_shapes() -> None:
    """Qwen3-30B-A3B (hidden 2048, 768-wide experts, top 8) at 8192 tokens: (M, 8, max(768, 2048)) and
    (M, 8, max(1536, 2048)) in bf16, 256 MiB each."""
    arch = resolve(config("Qwen__Qwen3-30B-A3B"))
    ws = moe_workspace_bytes(arch, 8192, 1, 2, version_info("0.19.0"), None, HOPPER, ("moe",))
    assert ws == 2 * 8192 * 8 * 2048 * 2
    # 0.13 still runs fused_experts with per-call caches; a layer without MoE has no workspace
    assert moe_workspace_bytes(arch, 8192, 1, 2, version_info("0.13.0"), None, HOPPER, ("moe",)) == 0
    assert moe_workspace_bytes(arch, 8192, 1, 2, version_info("0.19.0"), None, HOPPER, ("dense",)) == 0


@pytest.mark.parametrize(
    ("name", "tp", "logged_gib"),
    [
        # "torch peak memory increase: 2.68GiB" (qwen-qwen3-30b-a3b--h100-80gb--tp1pp1dp1--8192.log), where
        # the dense Qwen3-8B / Qwen2.5-7B with the same vocabulary log 2.21: the workspace is the difference
        ("Qwen__Qwen3-30B-A3B", 1, 2.68),
        # "torch peak memory increase: 1.21GiB" (mistralai-mixtral-8x7b-i--h100-80gb--tp2pp1dp1--8192.log)
        ("mistralai__Mixtral-8x7B-v0.1", 2, 1.21),
    ],
)
def test_unquantized_moe_profile_peak_holds_the_workspace(name: str, tp: int, logged_gib: float) -> None:
    r = plan(config(name), _h100(tp), options=_serve(tp))
    assert r["per_gpu"]["activation_peak_bytes"] / GIB == pytest.approx(logged_gib, abs=0.03)


def test_block_fp8_moe_workspace_on_hopper_not_blackwell() -> None:
    """DeepSeek-R1-0528 at TP 8, vLLM 0.18.0, gpu_memory_utilization 0.92 (Red Hat sweep records 68f57fee,
    H200: "Available KV cache memory: 42.79 GiB"; dcea7fc0, B200: 79.81 GiB). Hopper runs block-FP8 MoE at
    TP through the Triton experts (two 8192 x 8 x 7168 bf16 workspaces, 1.75 GiB, held through the
    sampler pass); Blackwell through FlashInfer's TRT-LLM kernel. Without the workspace the H200 plan had
    44.91 GiB (+5.0 %)."""
    arch = resolve(config("deepseek-ai__DeepSeek-R1"))
    q = resolve_quant(arch.quant_config, None)
    v18 = version_info("0.18.0")
    assert moe_workspace_bytes(arch, 8192, 8, 2, v18, q, HOPPER, ("moe",)) == 2 * 8192 * 8 * 7168 * 2
    assert moe_workspace_bytes(arch, 8192, 8, 2, v18, q, BLACKWELL, ("moe",)) == 0
    assert moe_workspace_bytes(arch, 8192, 8, 2, version_info("0.16.0"), q, HOPPER, ("moe",)) == 0
    opts = {"vllm_version": "0.18.0", "tensor_parallel_size": 8, "gpu_memory_utilization": 0.92}
    opts |= {"max_model_len": 163840, "max_num_seqs": 1024, "max_num_batched_tokens": 8192}
    h200 = {"name": "NVIDIA H200", "memory_mib": 143771, "count": 8, "compute_capability": "9.0"}
    b200 = {"name": "NVIDIA B200", "memory_mib": 183359, "count": 8, "compute_capability": "10.0"}
    for gpu, logged in ((h200, 42.79), (b200, 79.81)):
        avail = plan(config("deepseek-ai__DeepSeek-R1"), gpu, options=opts)["available_kv_cache_bytes"] / GIB
        assert avail == pytest.approx(logged, rel=0.015), gpu["name"]
