"""Non-torch memory by vLLM release: what precedes the baseline snapshot and what the budget pays for."""

from __future__ import annotations

from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.vllm_planner import plan
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.vllm_planner.config import resolve
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.vllm_planner.non_torch import (
    CUDA_CONTEXT,
    NCCL_CONN_BUFF,
    SM90_NVSWITCH_CHANNELS,
    flashinfer_allreduce_workspace,
    hopper_nvswitch,
    in_budget_non_torch,
    nccl_bytes,
    pre_snapshot_bytes,
    tp_comm_bytes,
)
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.vllm_planner.versions import version_info
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


def test_flashinfer_fusion_workspace_from_0_17_on_hopper() -> None:
    v16, v19 = version_info("0.16.0"), version_info("0.19.1")
    assert flashinfer_allreduce_workspace(v16, 2, 1, HOPPER, H, 2, 8192) == 0
    # TP 2 on Hopper: 64 MiB inputs, so tokens = 64 MiB / (4096 x 2) = 8192; per rank 2 x 8192 x 4096 x 2
    # (buffer) + 2 MiB of flags + 3 x that (Lamport) = 4 x 128 MiB + 2 MiB
    assert flashinfer_allreduce_workspace(v19, 2, 1, HOPPER, H, 2, 8192) == 4 * 128 * MIB + 2 * MIB
    # capped at max_num_batched_tokens by the fusion pass
    assert flashinfer_allreduce_workspace(v19, 2, 1, HOPPER, H, 2, 2048) == 4 * 32 * MIB + 2 * MIB
    # TP 4 on Hopper: 2 MiB inputs -> 8 MiB buffer, 2 MiB flags, 24 MiB Lamport
    assert flashinfer_allreduce_workspace(v19, 4, 1, HOPPER, H, 2, 8192) == 34 * MIB
    # TP 4 on Blackwell: 32 MiB inputs
    assert flashinfer_allreduce_workspace(v19, 4, 1, B200, H, 2, 8192) == 4 * 4 * 32 * MIB + 2 * MIB


def test_no_workspace_on_ampere_with_pp_or_tp1() -> None:
    v19, v34 = version_info("0.19.1"), version_info("0.34.0")
    assert flashinfer_allreduce_workspace(v19, 2, 1, AMPERE, H, 2, 8192) == 0
    assert flashinfer_allreduce_workspace(v19, 1, 1, HOPPER, H, 2, 8192) == 0
    assert flashinfer_allreduce_workspace(v19, 2, 2, HOPPER, H, 2, 8192) == 0  # fusion pass off with PP
    # 0.29+: the standalone FlashInfer all-reduce creates it with PP too, not capped by mnbt
    assert flashinfer_allreduce_workspace(v34, 2, 2, HOPPER, H, 2, 2048) == 4 * 128 * MIB + 2 * MIB


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
    # Llama-70B: hidden 8192, tokens = 64 MiB / 16 KiB = 4096: 4 x 2 x 4096 x 8192 x 2 + 2 MiB = 514 MiB
    gap = tp2["per_gpu"]["non_torch_bytes"] - v16["per_gpu"]["non_torch_bytes"]
    assert gap == 514 * MIB


def test_workspace_tokens_match_vllm_log_at_tp2_and_tp4() -> None:
    # https://github.com/jgchn/llm-d-planner/blob/a95e9f62e5de8cb5d2beb5f5279e7271a231416d/accuracy/results/v0.19.0/logs/meta-llama-llama-3-1-8b---h100-80gb--tp2pp1dp1--8192.log
    # and ...--tp4pp1dp1--8192.log (vLLM 0.19.0, Llama-3.1-8B on H100): "Initialized FlashInfer All Reduce
    # workspace: backend=trtllm, world_size=2, ..., max_token_num=8192, hidden_dim=4096" and world_size=4
    # with max_token_num=256. The workspace is tp x tokens x hidden x 2 x 4 (+ flags) per rank.
    v19 = version_info("0.19.0")
    for tp, tokens in ((2, 8192), (4, 256)):
        want = tp * tokens * H * 2 * 4 + 2 * MIB
        assert flashinfer_allreduce_workspace(v19, tp, 1, HOPPER, H, 2, 8192) == want
    # The same logs put "non-torch forward increase memory" at 0.25 GiB (TP 1), 2.07 GiB (TP 2) and
    # 2.13 GiB (TP 4): the workspace is part of it; the planner stays below what vLLM measured.
    for tp, logged in ((1, 0.25), (2, 2.07), (4, 2.13)):
        assert in_budget_non_torch(v19, tp, tp, 1, HOPPER, H, 2, 8192) / GIB <= logged + 0.01


def test_nccl_buffer_constants_follow_nccl_source() -> None:
    # NCCL v2.27.5-1 src/include/device.h and src/init.cc: LL 512 KiB, LL128 4800 KiB, Simple 4 MiB
    assert NCCL_CONN_BUFF == 512 * 1024 + 4800 * 1024 + 4 * MIB
    # 18 NVLink4 links x 20.6 GB/s at 60 GB/s per channel: 6 search channels, doubled twice
    assert SM90_NVSWITCH_CHANNELS == 24


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


def test_nvswitch_from_the_gpu_name() -> None:
    # nvidia-smi names: HGX H100/H200 boards are NVSwitch systems; PCIe cards and NVL pairs are not
    assert hopper_nvswitch("NVIDIA H100 80GB HBM3", HOPPER)
    assert hopper_nvswitch("NVIDIA H200", HOPPER)
    assert not hopper_nvswitch("NVIDIA H100 NVL", HOPPER)
    assert not hopper_nvswitch("NVIDIA H100 PCIe", HOPPER)
    assert not hopper_nvswitch("NVIDIA H200 NVL", HOPPER)
    assert not hopper_nvswitch("NVIDIA A100-SXM4-80GB", AMPERE)


def test_tp_communicator_stays_below_what_vllm_logged() -> None:
    # https://github.com/jgchn/llm-d-planner/blob/a95e9f62e5de8cb5d2beb5f5279e7271a231416d/accuracy/results/v0.19.0/logs/meta-llama-llama-3-1-8b---h100-80gb--tp2pp1dp1--8192.log
    # (and tp4pp1dp1, tp1pp1dp1, tp1pp2dp1): "non-torch forward increase memory" 2.07 GiB at TP 2, 2.13 GiB
    # at TP 4, 0.25 GiB at TP 1 and 0.07 GiB on the first PP stage (no TP group, so no communicator).
    v19 = version_info("0.19.0")
    for tp, logged in ((2, 2.07), (4, 2.13)):
        got = in_budget_non_torch(v19, tp, tp, 1, HOPPER, H, 2, 8192, True)
        assert got > in_budget_non_torch(v19, tp, tp, 1, HOPPER, H, 2, 8192)
        assert got / GIB <= logged
    assert in_budget_non_torch(v19, 1, 1, 1, HOPPER, H, 2, 8192, True) / GIB <= 0.25
    assert in_budget_non_torch(v19, 2, 1, 2, HOPPER, H, 2, 8192, True) == in_budget_non_torch(v19, 1, 1)
    # https://github.com/llm-d/llm-d-benchmark/blob/4f4d44943c39b76b28e30dfa1fb0dfaf1ee894b5/config_explorer/empirical-vllm-memory-results.md
    # vLLM 0.11.0 on H100, Llama-3.3-70B-FP8 TP 2: "Non-torch memory" 0.55 GiB
    got = in_budget_non_torch(version_info("0.11.0"), 2, 2, 1, HOPPER, 8192, 2, 8192, True) / GIB
    assert 0.4 <= got <= 0.55
