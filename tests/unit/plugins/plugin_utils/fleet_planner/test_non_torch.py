"""Non-torch memory by vLLM release: what precedes the baseline snapshot and what the budget pays for."""

from __future__ import annotations

from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_planner import plan
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_planner.config import resolve
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_planner.non_torch import (
    CUDA_CONTEXT,
    CUSTOM_ALLREDUCE,
    NCCL_CONN_BUFF,
    SM90_NVSWITCH_CHANNELS,
    SM100_NVSWITCH_CHANNELS,
    custom_allreduce_topology_ok,
    device_nccl_bytes,
    flashinfer_allreduce_workspace,
    hopper_nvswitch,
    in_budget_non_torch,
    mnnvl_workspace_bytes,
    multicast_capable,
    nccl_bytes,
    pre_snapshot_bytes,
    tp_comm_bytes,
)
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_planner.versions import version_info
from planner_helpers import H100, config

GIB = 1 << 30
MIB = 1 << 20
HOPPER, AMPERE, B200 = (9, 0), (8, 0), (10, 0)
LLAMA8B = resolve(config("meta-llama__Meta-Llama-3.1-8B"))
H = LLAMA8B.hidden_size  # 4096


def test_nccl_moves_out_of_the_budget_in_0_11() -> None:
    v10, v11 = version_info("0.10.1"), version_info("0.11.0")
    # 0.9-0.10: snapshot, then init_worker_distributed_environment: NCCL and custom all-reduce inside
    assert pre_snapshot_bytes(v10, 2) == CUDA_CONTEXT
    assert in_budget_non_torch(v10, 2, 2) - in_budget_non_torch(v10, 1, 1) >= nccl_bytes(2)
    # 0.11+: distributed init first, then the snapshot
    assert pre_snapshot_bytes(v11, 2) == CUDA_CONTEXT + nccl_bytes(2)
    assert in_budget_non_torch(v11, 2, 2, 1, HOPPER, H, 2, 8192) == in_budget_non_torch(v11, 1, 1)


def test_0_11_tp2_non_torch_stays_below_what_vllm_logged() -> None:
    # https://github.com/llm-d/llm-d-benchmark/blob/4f4d44943c39b76b28e30dfa1fb0dfaf1ee894b5/config_explorer/empirical-vllm-memory-results.md
    # vLLM 0.11.0 on H100: "Non-torch memory" 0.13 GiB at TP 1 and 0.55 GiB at TP 2 (Llama-3.3-70B-FP8).
    got = in_budget_non_torch(version_info("0.11.0"), 2, 2, 1, HOPPER, 8192, 2, 8192) / GIB
    assert 0.13 <= got <= 0.55


def _pad(n: int, gran: int) -> int:
    """One SymmDeviceMemory buffer: 16-byte aligned, a 2 KiB signal pad, rounded up to gran."""
    return -(-(-(-n // 16) * 16 + 2048) // gran) * gran


def test_flashinfer_fusion_workspace_from_0_17_on_hopper() -> None:
    v16, v19, v28 = version_info("0.16.0"), version_info("0.19.1"), version_info("0.28.0")
    assert flashinfer_allreduce_workspace(v16, 2, 1, HOPPER, H, 2, 8192) == 0
    # TP 2 on Hopper: 64 MiB inputs, so tokens = 64 MiB / (4096 x 2) = 8192; per rank a 2 x 8192 x 4096 x 2
    # buffer (128 MiB), tp x 256 x 4 bytes of flags and 3 x 128 MiB of Lamport buffers. FlashInfer 0.6.6
    # (vLLM 0.19) rounds each SymmDeviceMemory allocation up to the 512 MiB multicast granularity.
    assert flashinfer_allreduce_workspace(v19, 2, 1, HOPPER, H, 2, 8192) == 3 * 512 * MIB
    # trtllm under FlashInfer 0.6.16 (vLLM 0.28, the fallback where the node has no NVSwitch multicast)
    # rounds only to the 2 MiB allocation granularity, after the signal pad
    want = _pad(128 * MIB, 2 * MIB) + _pad(2 * 256 * 4, 2 * MIB) + _pad(384 * MIB, 2 * MIB)
    assert want == 130 * MIB + 2 * MIB + 386 * MIB
    assert flashinfer_allreduce_workspace(v28, 2, 1, HOPPER, H, 2, 8192, multicast=False) == want
    # capped at max_num_batched_tokens by the fusion pass
    no_mc = {"multicast": False}
    assert (
        flashinfer_allreduce_workspace(v28, 2, 1, HOPPER, H, 2, 2048, **no_mc)
        == 34 * MIB + 2 * MIB + 98 * MIB
    )
    # TP 4 on Hopper: 2 MiB inputs -> 8 MiB buffer, flags, 24 MiB Lamport: each still a 512 MiB block
    assert flashinfer_allreduce_workspace(v19, 4, 1, HOPPER, H, 2, 8192) == 3 * 512 * MIB
    assert (
        flashinfer_allreduce_workspace(v28, 4, 1, HOPPER, H, 2, 8192, **no_mc)
        == 10 * MIB + 2 * MIB + 26 * MIB
    )
    # TP 4 on Blackwell: 32 MiB inputs
    assert (
        flashinfer_allreduce_workspace(v28, 4, 1, B200, H, 2, 8192, **no_mc)
        == 130 * MIB + 2 * MIB + 386 * MIB
    )


def test_mnnvl_workspace_on_one_multicast_node_from_0_27() -> None:
    # vLLM 0.27-0.34 `_resolve_fi_ar_backend` (flashinfer_all_reduce.py): MNNVL on one node, trtllm only
    # where MNNVL cannot create its multicast workspace. MNNVLAllReduceFusionWorkspace (FlashInfer
    # 0.6.16.post3-0.7.4) asks for 3 Lamport buffers of max(one-shot, two-shot) bytes in one McastGPUBuffer,
    # rounded to the 512 MiB multicast granularity.
    v26, v28, v34 = version_info("0.26.0"), version_info("0.28.0"), version_info("0.34.0")
    # TP 2 on Hopper, Llama-3.1-8B (hidden 4096): 8192 tokens, two-shot 2 x 8192 x 4096 x 2 = 128 MiB per
    # buffer, 384 MiB + the 2 KiB signal pad -> one 512 MiB block (trtllm: 518 MiB in three allocations)
    assert mnnvl_workspace_bytes(2, 8192, H, 2) == 512 * MIB
    assert flashinfer_allreduce_workspace(v28, 2, 1, HOPPER, H, 2, 8192) == 512 * MIB
    assert flashinfer_allreduce_workspace(v34, 2, 1, HOPPER, H, 2, 8192) == 512 * MIB
    # TP 4 on Hopper: 2 MiB inputs (256 tokens), 3 x 2 MiB -> still one 512 MiB block (trtllm: 38 MiB)
    assert flashinfer_allreduce_workspace(v34, 4, 1, HOPPER, H, 2, 8192) == 512 * MIB
    assert flashinfer_allreduce_workspace(v34, 4, 1, HOPPER, H, 2, 8192, multicast=False) == 38 * MIB
    # one-shot sizing: 1 MiB of input at most; two-shot dominates from 2 tokens per rank on
    assert mnnvl_workspace_bytes(8, 1, H, 2) == 512 * MIB
    # buffers past 512 MiB take a second block: 3 x 2 x 32768 x 4096 x 2 = 1.5 GiB -> 2 GiB
    assert mnnvl_workspace_bytes(2, 32768, H, 2) == 2048 * MIB
    # 0.26 still plans trtllm's three 512 MiB blocks (FlashInfer 0.6.14, MNNVL through torch symmetric memory)
    assert flashinfer_allreduce_workspace(v26, 2, 1, HOPPER, H, 2, 8192) == 3 * 512 * MIB


def test_fusion_workspace_needs_multicast_before_0_27() -> None:
    # FlashInfer 0.6.4-0.6.14 SymmDeviceMemory raises "Device does not support multicasting" on GPUs
    # without NVLink multicast (vLLM then skips the fusion); 0.6.15+ allocate without multicast.
    v19, v28 = version_info("0.19.0"), version_info("0.28.0")
    assert flashinfer_allreduce_workspace(v19, 2, 1, HOPPER, H, 2, 8192, multicast=False) == 0
    assert flashinfer_allreduce_workspace(v28, 2, 1, HOPPER, H, 2, 8192, multicast=False) == 518 * MIB
    assert multicast_capable("NVIDIA H100 80GB HBM3", HOPPER)
    assert multicast_capable("NVIDIA B200", B200)
    assert not multicast_capable("NVIDIA H100 PCIe", HOPPER)
    assert not multicast_capable("NVIDIA H100 NVL", HOPPER)


def test_no_workspace_on_ampere_with_pp_or_tp1() -> None:
    v19, v34 = version_info("0.19.1"), version_info("0.34.0")
    assert flashinfer_allreduce_workspace(v19, 2, 1, AMPERE, H, 2, 8192) == 0
    assert flashinfer_allreduce_workspace(v19, 1, 1, HOPPER, H, 2, 8192) == 0
    assert flashinfer_allreduce_workspace(v19, 2, 2, HOPPER, H, 2, 8192) == 0  # fusion pass off with PP
    # 0.29+: the standalone FlashInfer all-reduce creates it with PP too, not capped by mnbt (MNNVL's one
    # 512 MiB block on a multicast node, trtllm's 518 MiB without multicast)
    assert flashinfer_allreduce_workspace(v34, 2, 2, HOPPER, H, 2, 2048) == 512 * MIB
    assert flashinfer_allreduce_workspace(v34, 2, 2, HOPPER, H, 2, 2048, multicast=False) == 518 * MIB


def test_planned_kv_budget_pays_for_the_workspace_at_tp2_on_hopper() -> None:
    opts = {
        "vllm_version": "0.19.1",
        "max_model_len": 16000,
        "max_num_seqs": 256,
        "max_num_batched_tokens": 8192,
        "gpu_memory_utilization": 0.9,
    }
    h100 = dict(H100, count=2)
    tp2 = plan(config("meta-llama__Meta-Llama-3.1-70B"), h100, options=dict(opts, tensor_parallel_size=2))
    v16 = plan(
        config("meta-llama__Meta-Llama-3.1-70B"),
        h100,
        options=dict(opts, tensor_parallel_size=2, vllm_version="0.16.0"),
    )
    # Llama-70B: hidden 8192, tokens = 64 MiB / 16 KiB = 4096: a 128 MiB buffer, flags and 384 MiB of
    # Lamport buffers, each a 512 MiB multicast-granularity block with FlashInfer 0.6.6 on an H100 HGX
    gap = tp2["per_gpu"]["non_torch_bytes"] - v16["per_gpu"]["non_torch_bytes"]
    assert gap == 3 * 512 * MIB
    pcie = dict(h100, name="NVIDIA H100 PCIe")
    tp2_pcie = plan(
        config("meta-llama__Meta-Llama-3.1-70B"), pcie, options=dict(opts, tensor_parallel_size=2)
    )
    v16_pcie = plan(
        config("meta-llama__Meta-Llama-3.1-70B"),
        pcie,
        options=dict(opts, tensor_parallel_size=2, vllm_version="0.16.0"),
    )
    # no NVLink multicast on PCIe cards: the workspace cannot be created and the fusion is skipped
    assert tp2_pcie["per_gpu"]["non_torch_bytes"] == v16_pcie["per_gpu"]["non_torch_bytes"]


def test_workspace_tokens_match_vllm_log_at_tp2_and_tp4() -> None:
    # https://github.com/jgchn/llm-d-planner/blob/a95e9f62e5de8cb5d2beb5f5279e7271a231416d/accuracy/results/v0.19.0/logs/meta-llama-llama-3-1-8b---h100-80gb--tp2pp1dp1--8192.log
    # and ...--tp4pp1dp1--8192.log (vLLM 0.19.0, Llama-3.1-8B on H100): "Initialized FlashInfer All Reduce
    # workspace: backend=trtllm, world_size=2, ..., max_token_num=8192, hidden_dim=4096" and world_size=4
    # with max_token_num=256. With FlashInfer 0.6.6 each of the three buffers takes 512 MiB either way.
    v19 = version_info("0.19.0")
    for tp in (2, 4):
        assert flashinfer_allreduce_workspace(v19, tp, 1, HOPPER, H, 2, 8192) == 3 * 512 * MIB
    # The same logs put "non-torch forward increase memory" at 0.25 GiB (TP 1), 2.07 GiB (TP 2) and
    # 2.13 GiB (TP 4): without the TP communicator the planner stays below what vLLM measured.
    for tp, logged in ((1, 0.25), (2, 2.07), (4, 2.13)):
        assert in_budget_non_torch(v19, tp, tp, 1, HOPPER, H, 2, 8192) / GIB <= logged + 0.01


def test_nccl_buffer_constants_follow_nccl_source() -> None:
    # NCCL v2.27.5-1 src/include/device.h and src/init.cc: LL 512 KiB, LL128 4800 KiB, Simple 4 MiB
    assert NCCL_CONN_BUFF == 512 * 1024 + 4800 * 1024 + 4 * MIB
    # 18 NVLink4 links x 20.6 GB/s at 60 GB/s per channel: 6 search channels, doubled twice
    assert SM90_NVSWITCH_CHANNELS == 24
    # 18 NVLink5 links x 40.1 GB/s at 90 GB/s per channel (sm100SpeedArrayIntra): 8, doubled twice
    assert SM100_NVSWITCH_CHANNELS == 32


def test_tp_group_communicator_is_counted_inside_the_budget_from_0_11() -> None:
    v10, v11, v19 = version_info("0.10.1"), version_info("0.11.0"), version_info("0.19.0")

    def nvls(tp: int) -> int:  # 16 channels x 2 x (128 KiB x 8 steps) per head, + 2 MiB of credits
        return 16 * 2 * 128 * 1024 * 8 * tp + 2 * MIB

    # TP 2: ring predecessor and tree child are the same peer, one connection per channel
    assert tp_comm_bytes(v19, 2, True) == 24 * NCCL_CONN_BUFF + nvls(2)
    # TP 4: two peers per channel on rank 0
    assert tp_comm_bytes(v19, 4, True) == 48 * NCCL_CONN_BUFF + nvls(4)
    assert tp_comm_bytes(v11, 2, True) == tp_comm_bytes(v19, 2, True)
    # 0.9-0.10 count NCCL inside the budget already (nccl_bytes); TP 1 and non-NVSwitch GPUs add nothing
    assert tp_comm_bytes(v10, 2, True) == 0
    assert tp_comm_bytes(v19, 1, True) == 0
    assert tp_comm_bytes(v19, 2, False) == 0
    base = in_budget_non_torch(v19, 2, 2, 1, HOPPER, H, 2, 8192)
    assert in_budget_non_torch(v19, 2, 2, 1, HOPPER, H, 2, 8192, True) == base + tp_comm_bytes(v19, 2, True)
    # Blackwell data-center nodes: 32 ring/tree channels and NVLS_NCHANNELS_SM100_NVL 24 on one node
    nvls_b = 24 * 2 * 128 * 1024 * 8 * 4 + 2 * MIB
    assert tp_comm_bytes(v19, 4, True, B200) == 64 * NCCL_CONN_BUFF + nvls_b
    assert tp_comm_bytes(v19, 4, True, (12, 0)) == 0  # RTX PRO Blackwell: PCIe, no NVSwitch


def test_blackwell_tp_communicator_against_red_hat_sweep() -> None:
    """Llama-3.3-70B-Instruct (bf16) at TP 4, gpu_memory_utilization 0.92, vLLM 0.18.0, on 4x B200 and on
    4x H200 (ashishkamra/vllm-memory-estimator test_data/validation_db.json @ 8b0e21d, records b421cf24
    and b118fe40): "Available KV cache memory: 127.02 GiB" and "91.57 GiB". Without the communicator on
    B200 the plan had 127.52 GiB, 0.5 GiB more, while H200 was 0.11 GiB below its log."""
    opts = {"vllm_version": "0.18.0", "gpu_memory_utilization": 0.92, "max_model_len": 131072}
    opts |= {"tensor_parallel_size": 4, "max_num_seqs": 1024, "max_num_batched_tokens": 8192}
    b200 = {"name": "NVIDIA B200", "memory_mib": 183359, "count": 4, "compute_capability": "10.0"}
    h200 = {"name": "NVIDIA H200", "memory_mib": 143771, "count": 4, "compute_capability": "9.0"}
    cfg = config("meta-llama__Meta-Llama-3.1-70B")
    for gpu, logged in ((b200, 127.02), (h200, 91.57)):
        avail = plan(cfg, gpu, options=opts)["available_kv_cache_bytes"] / GIB
        assert abs(avail - logged) < 0.3, (gpu["name"], avail)


def test_nvswitch_from_the_gpu_name() -> None:
    # nvidia-smi names: HGX H100/H200 boards are NVSwitch systems; PCIe cards and NVL pairs are not
    assert hopper_nvswitch("NVIDIA H100 80GB HBM3", HOPPER)
    assert hopper_nvswitch("NVIDIA H200", HOPPER)
    assert not hopper_nvswitch("NVIDIA H100 NVL", HOPPER)
    assert not hopper_nvswitch("NVIDIA H100 PCIe", HOPPER)
    assert not hopper_nvswitch("NVIDIA H200 NVL", HOPPER)
    assert not hopper_nvswitch("NVIDIA A100-SXM4-80GB", AMPERE)


def test_tp_communicator_and_workspace_match_what_vllm_logged() -> None:
    # https://github.com/jgchn/llm-d-planner/blob/a95e9f62e5de8cb5d2beb5f5279e7271a231416d/accuracy/results/v0.19.0/logs/meta-llama-llama-3-1-8b---h100-80gb--tp2pp1dp1--8192.log
    # (and tp4pp1dp1, tp1pp1dp1, tp1pp2dp1): "non-torch forward increase memory" 2.07 GiB at TP 2, 2.13 GiB
    # at TP 4, 0.25 GiB at TP 1 and 0.07 GiB on the first PP stage (no TP group, so no communicator).
    # With the 512 MiB workspace blocks and the communicator the planner lands within 0.2 GiB of both
    # (2.03 GiB at TP 2; 2.31 GiB at TP 4, where the communicator's two connections per channel are high).
    v19 = version_info("0.19.0")
    for tp, logged in ((2, 2.07), (4, 2.13)):
        got = in_budget_non_torch(v19, tp, tp, 1, HOPPER, H, 2, 8192, True)
        assert got > in_budget_non_torch(v19, tp, tp, 1, HOPPER, H, 2, 8192)
        assert abs(got / GIB - logged) <= 0.2
    assert in_budget_non_torch(v19, 1, 1, 1, HOPPER, H, 2, 8192, True) / GIB <= 0.25
    assert in_budget_non_torch(v19, 2, 1, 2, HOPPER, H, 2, 8192, True) == in_budget_non_torch(v19, 1, 1)
    # https://github.com/llm-d/llm-d-benchmark/blob/4f4d44943c39b76b28e30dfa1fb0dfaf1ee894b5/config_explorer/empirical-vllm-memory-results.md
    # vLLM 0.11.0 on H100, Llama-3.3-70B-FP8 TP 2: "Non-torch memory" 0.55 GiB
    got = in_budget_non_torch(version_info("0.11.0"), 2, 2, 1, HOPPER, 8192, 2, 8192, True) / GIB
    assert 0.4 <= got <= 0.55


def test_v0_19_tp2_start_plans_the_logged_kv_memory() -> None:
    # https://github.com/jgchn/llm-d-planner/blob/a95e9f62e5de8cb5d2beb5f5279e7271a231416d/accuracy/results/v0.19.0/logs/meta-llama-llama-3-1-8b---h100-80gb--tp2pp1dp1--8192.log
    # vLLM 0.19.0, Llama-3.1-8B-Instruct, TP 2 on H100 80GB HBM3, gpu_memory_utilization 0.95,
    # max_model_len 8192, serve defaults: "Model loading took 7.51 GiB", "non-torch forward increase
    # memory: 2.07GiB", "Available KV cache memory: 63.76 GiB", "GPU KV cache size: 1,044,688 tokens".
    gpu = dict(H100, count=2, memory_reserved_mib=468)
    opts = {
        "vllm_version": "0.19.0",
        "tensor_parallel_size": 2,
        "gpu_memory_utilization": 0.95,
        "max_model_len": 8192,
        "max_num_seqs": 1024,
        "max_num_batched_tokens": 8192,
    }
    got = plan(config("meta-llama__Meta-Llama-3.1-8B"), gpu, options=opts)
    assert abs(got["available_kv_cache_bytes"] / GIB - 63.76) / 63.76 <= 0.01
    assert abs(got["kv_cache_tokens"] - 1_044_688) / 1_044_688 <= 0.01


def test_without_p2p_nccl_and_custom_allreduce_take_no_device_memory() -> None:
    v10 = version_info("0.10.1")
    assert device_nccl_bytes(2, p2p=True) == nccl_bytes(2)
    assert device_nccl_bytes(2, p2p=False) == 0
    assert device_nccl_bytes(2, p2p=False, nodes=2) == nccl_bytes(2)  # only a one-node group is known
    # 0.9-0.10: NCCL and the custom all-reduce are inside the budget, unless the GPUs lack peer access
    assert in_budget_non_torch(v10, 2, 2, p2p=False) == in_budget_non_torch(v10, 1, 1)
    assert in_budget_non_torch(v10, 2, 2) - in_budget_non_torch(v10, 2, 2, p2p=False) == (
        nccl_bytes(2) + CUSTOM_ALLREDUCE
    )


def test_0_10_tp2_without_p2p_plans_the_logged_kv_memory() -> None:
    # https://github.com/dennislee22/vLLM-benchmarking/blob/b474d1e053c35c9aef8c02aae4efbc0d8675f033/log/vllm-7B-2gpuA10080GB-0.25GRAM-same-node.log
    # vLLM 0.10.1.1, Qwen2-7B-Instruct at TP 2 on two A100 80GB of one pod, gmu 0.25: "Custom allreduce is
    # disabled because your platform lacks GPU P2P capability", "Using FlashInfer for top-p & top-k
    # sampling.", "Model loading took 7.1217 GiB", "Available KV cache memory: 12.02 GiB".
    a100 = {"name": "NVIDIA A100 80GB", "memory_mib": 81920, "count": 2, "compute_capability": "8.0"}
    opts = {
        "vllm_version": "0.10.1",
        "tensor_parallel_size": 2,
        "max_model_len": 16384,
        "max_num_seqs": 256,
        "max_num_batched_tokens": 2048,
        "gpu_memory_utilization": 0.25,
        "sampler_backend": "flashinfer",
    }
    no_p2p = plan(config("Qwen__Qwen2.5-7B"), dict(a100, p2p=False), options=opts)
    assert abs(no_p2p["available_kv_cache_bytes"] / GIB - 12.02) < 0.15
    with_p2p = plan(config("Qwen__Qwen2.5-7B"), a100, options=opts)
    gap = no_p2p["available_kv_cache_bytes"] - with_p2p["available_kv_cache_bytes"]
    assert gap == nccl_bytes(2) + CUSTOM_ALLREDUCE


def test_more_than_two_pcie_only_gpus_get_no_custom_allreduce() -> None:
    """CustomAllreduce.__init__ returns before its IPC buffers when world_size > 2 and the GPUs are not
    NVLink-connected pairwise ("not supported on more than two PCIe-only GPUs"), P2P or not."""
    assert custom_allreduce_topology_ok("NVIDIA A10", 2)
    assert not custom_allreduce_topology_ok("NVIDIA A10", 4)
    assert not custom_allreduce_topology_ok("NVIDIA GeForce RTX 4090", 4)
    assert not custom_allreduce_topology_ok("NVIDIA H100 PCIe", 4)
    assert not custom_allreduce_topology_ok("NVIDIA H100 NVL", 4)
    assert custom_allreduce_topology_ok("NVIDIA A100-SXM4-80GB", 8)
    assert custom_allreduce_topology_ok("NVIDIA A100 80GB", 4)  # A100 is not A10
    assert custom_allreduce_topology_ok("NVIDIA H100 80GB HBM3", 8)
    v085 = version_info("0.8.5")
    assert in_budget_non_torch(v085, 4, 4) - in_budget_non_torch(v085, 4, 4, custom_ar_topology=False) == (
        CUSTOM_ALLREDUCE
    )


def test_4x_a10_tp4_plans_no_custom_allreduce() -> None:
    # https://github.com/vllm-project/vllm/issues/17469: Qwen3-30B-A3B, vLLM 0.8.5, 4x A10, TP 4,
    # max_model_len 8192: "Model loading took 14.2474 GiB", "GPU KV cache size: 198,784 tokens".
    a10 = {
        "name": "NVIDIA A10",
        "memory_mib": 23028,
        "count": 4,
        "compute_capability": "8.6",
        "memory_reserved_mib": 512,
    }
    opts = {"vllm_version": "0.8.5", "tensor_parallel_size": 4, "max_model_len": 8192}
    four = plan(config("Qwen__Qwen3-30B-A3B"), a10, options=opts)
    assert abs(four["per_gpu"]["weights_bytes"] / GIB - 14.2474) < 0.01
    # the same GPUs as an NVLink board would have the 32 MiB of IPC buffers inside the 0.8.x budget
    sxm = plan(config("Qwen__Qwen3-30B-A3B"), dict(a10, name="NVIDIA NVLink board"), options=opts)
    assert four["available_kv_cache_bytes"] - sxm["available_kv_cache_bytes"] == CUSTOM_ALLREDUCE
    assert four["kv_cache_tokens"] < 198784  # still short of the log (NCCL on PCIe, see the README)
