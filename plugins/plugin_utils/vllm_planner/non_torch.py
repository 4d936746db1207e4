"""Memory outside PyTorch's allocator: before vLLM's baseline snapshot, or inside the budget.

vLLM's budget covers what grows after `Worker.init_device` takes its `MemorySnapshot`
(vllm/v1/worker/gpu_worker.py); `memory_profiling` (vllm/utils/mem_utils.py; vllm/utils/__init__.py
<= 0.11) counts as non-torch the rise of `cuda used - torch.memory_reserved()` from that snapshot to after
the profile run. Where each non-torch allocation falls, per family:

* 0.8.x: the budget is absolute (`total * gmu - everything on the GPU`): CUDA context, NCCL, vLLM's custom
  all-reduce IPC buffers and cuBLAS all count.
* 0.9-0.10: the snapshot precedes `init_worker_distributed_environment`, so NCCL communicators and the custom
  all-reduce buffers are allocated inside the budget.
* 0.11+: `init_worker_distributed_environment` runs first ("Initialize the distributed environment BEFORE
  taking memory snapshot", gpu_worker.py 0.11.0-0.34.0): the PyNccl communicator and its warm-up all-reduce,
  `CustomAllreduce` (`create_shared_buffer(meta_size() + max_size)` and `max_size` = 8 MiB,
  custom_all_reduce.py) and the symmetric-memory buffers (symm_mem.py) are all outside the budget.
* 0.17+: on Hopper and Blackwell at TP 2/4/8 the default -O2 pass config turns on the FlashInfer
  all-reduce + RMSNorm fusion (`enable_allreduce_rms_fusion`, vllm/config/vllm.py: TP > 1, capability 9.0
  or 10.x, FlashInfer installed, no PP or DP), whose pass creates FlashInfer's trtllm IPC workspace when
  the model is compiled, that is inside the profile run and after the snapshot. 0.29+ creates the same
  workspace for the standalone FlashInfer all-reduce (VLLM_ALLREDUCE_USE_FLASHINFER defaults to 1) on the
  first all-reduce, also inside the profile, with PP too.
* 0.34: cuBLAS/cuBLASLt handles are created explicitly before the snapshot.
"""

from __future__ import annotations

from .errors import MIB
from .versions import VersionInfo

CUDA_CONTEXT = 512 * MIB  # measured 527 MiB on H200 / torch 2.11 (lazy module loading)
CUBLAS_WORKSPACE = 192 * MIB  # cuBLAS + cuBLASLt handles (bf16 matmul + linear), measured on H200
NCCL_BASE = 512 * MIB  # communicator buffers of a multi-GPU worker
NCCL_PER_PEER = 32 * MIB
CUSTOM_ALLREDUCE = 32 * MIB  # IPC buffers of vLLM's custom all-reduce (TP > 1, single node)
MISC_NON_TORCH = 64 * MIB  # attention-backend workspaces and allocator slack

# FlashInfer all-reduce fusion: largest input (MiB) per compute capability and TP size
# (FI_ALLREDUCE_FUSION_MAX_SIZE_MB, vllm/compilation/passes/fusion/allreduce_rms_fusion.py 0.17.1-0.34.0;
# 10.3 from 0.20, TP 8 on 10.3 is 4 MiB from 0.34).
FI_AR_MAX_SIZE_MB: dict[tuple[int, int], dict[int, float]] = {
    (9, 0): {2: 64, 4: 2, 8: 0.5},
    (10, 0): {2: 64, 4: 32, 8: 1},
    (10, 3): {2: 64, 4: 64, 8: 2},
}
# trtllm_create_ipc_workspace_for_all_reduce_fusion (flashinfer/comm/trtllm_ar.py, 0.6.8): per rank a
# buffer of tp x tokens x hidden x 2, a flag buffer of tp x BarrierFlagCount(256) x 4 and three Lamport
# buffers of tp x tokens x hidden x 2 (x 4 with fp32 Lamport), each rounded up to 2 MiB.
FI_BARRIER_FLAGS = 256
FI_ALIGN = 1 << 21


def nccl_bytes(world: int) -> int:
    return 0 if world <= 1 else NCCL_BASE + NCCL_PER_PEER * (world - 1)


def _round_up(n: int, to: int) -> int:
    return -(-n // to) * to


def flashinfer_allreduce_workspace(
    vinfo: VersionInfo, tp: int, pp: int, cc: tuple[int, int], hidden: int, d: int, mnbt: int
) -> int:
    """Bytes of FlashInfer's trtllm all-reduce workspace on one GPU (0 where the release creates none)."""
    if tp <= 1 or hidden <= 0 or not (vinfo.allreduce_rms_fusion or vinfo.flashinfer_allreduce):
        return 0
    if pp > 1 and not vinfo.flashinfer_allreduce:
        return 0  # the fusion pass is off with pipeline parallelism
    # the table is looked up by exact capability (capability.to_int()); others get no workspace
    max_mb = FI_AR_MAX_SIZE_MB.get(cc, {}).get(tp)
    if max_mb is None or (cc == (10, 3) and vinfo.version < (0, 20)):
        return 0
    if cc == (10, 3) and tp == 8 and vinfo.version >= (0, 34):
        max_mb = 4
    tokens = int(max_mb * MIB) // (hidden * d)
    if not vinfo.flashinfer_allreduce:
        tokens = min(tokens, mnbt)  # the fusion pass caps it at max_num_batched_tokens
    lamport_elem = 4 if d == 4 else 2
    buffer = _round_up(tp * tokens * hidden * 2, FI_ALIGN)
    flags = _round_up(tp * FI_BARRIER_FLAGS * 4, FI_ALIGN)
    lamport = _round_up(3 * tp * tokens * hidden * lamport_elem, FI_ALIGN)
    return buffer + flags + lamport


def pre_snapshot_bytes(vinfo: VersionInfo, world: int) -> int:
    """Used before the baseline snapshot (outside the budget of the snapshot families)."""
    if vinfo.absolute_budget:
        return 0
    pre = CUDA_CONTEXT if vinfo.nccl_in_budget else CUDA_CONTEXT + nccl_bytes(world)
    if vinfo.cublas_before_snapshot:
        pre += CUBLAS_WORKSPACE
    return pre


def in_budget_non_torch(
    vinfo: VersionInfo,
    world: int,
    tp: int,
    pp: int = 1,
    cc: tuple[int, int] = (9, 0),
    hidden: int = 0,
    d: int = 2,
    mnbt: int = 0,
) -> int:
    """Non-torch growth that vLLM counts inside the budget (0.8.x: without the context and NCCL, which
    stage_memory adds to its absolute budget)."""
    non_torch = MISC_NON_TORCH + (0 if vinfo.cublas_before_snapshot else CUBLAS_WORKSPACE)
    if tp > 1 and (vinfo.nccl_in_budget or vinfo.absolute_budget):
        non_torch += CUSTOM_ALLREDUCE
    if vinfo.nccl_in_budget:
        non_torch += nccl_bytes(world)
    non_torch += flashinfer_allreduce_workspace(vinfo, tp, pp, cc, hidden, d, mnbt)
    return non_torch
