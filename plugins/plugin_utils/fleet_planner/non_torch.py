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
  first all-reduce, also inside the profile, with PP too. Each of its three buffers is a `SymmDeviceMemory`
  (flashinfer/comm/mnnvl.py, `use_symm_dev_mem=True` in `create_allreduce_fusion_workspace`), whose
  physical allocation FlashInfer 0.6.4-0.6.14 (vLLM 0.17-0.26) rounds up to the recommended multicast
  granularity even though the workspace never binds a multicast object, and which needs a GPU with
  NVLink multicast (an NVSwitch board) or it raises and vLLM runs without the fusion; FlashInfer 0.6.15+
  (vLLM 0.27+) rounds only when multicast is enabled, so to the 2 MiB allocation granularity.
* 0.11+ at TP > 1: the tensor-parallel group's torch.distributed NCCL communicator (`device_group`) is
  created lazily by ProcessGroupNCCL on its first collective, the logits all-gather
  (LogitsProcessor._gather_logits -> DeviceCommunicatorBase.all_gather -> all_gather_into_tensor on the
  device group), which first runs in the profile's sampler pass, inside the budget. vLLM sets
  NCCL_CUMEM_ENABLE=0 (vllm/env_override.py) and NCCL connects at runtime only with cuMem
  (`runtimeConn = cuMemSupport && NCCL_RUNTIME_CONNECT`, src/init.cc v2.27.5-1/v2.28.9-1), so that
  communicator connects all its ring, tree and NVLS buffers at creation (tp_comm_bytes). The PyNccl
  communicator connects the same way, but at init, before the snapshot.
* 0.34: cuBLAS/cuBLASLt handles are created explicitly before the snapshot.
"""

from __future__ import annotations

import re

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
# trtllm_create_ipc_workspace_for_all_reduce_fusion (flashinfer/comm/trtllm_ar.py, 0.6.4-0.7.4): per rank
# a buffer of tp x tokens x hidden x 2, a flag buffer of tp x BarrierFlagCount(256) x 4 and three Lamport
# buffers of tp x tokens x hidden x 2 (x 4 with fp32 Lamport). SymmDeviceMemory allocates each with a
# 2 KiB signal pad (SIGNAL_PAD_SIZE) at the 2 MiB allocation granularity, and FlashInfer 0.6.4-0.6.14
# rounds that up to the recommended multicast granularity (`_get_allocation_prop`), 512 MiB on NVSwitch
# GPUs ("the recommended buffer size for NVLS, returned by cuMulticastGetGranularity", DefaultNvlsBufferSize
# = 1 << 29 in microsoft/mscclpp include/mscclpp/nvls.hpp; the per-rank mappings of sglang#18341's
# FlashInfer workspace log are 0x20000000 apart).
FI_BARRIER_FLAGS = 256
# MNNVLAllReduceFusionWorkspace (flashinfer/comm/trtllm_mnnvl_ar.py, 0.6.16.post3-0.7.4): NUM_LAMPORT_BUFFERS
# Lamport buffers of max(one-shot, two-shot) bytes, each a multiple of TWOSHOT_NUM_STAGES x
# PACKED_ALIGNMENT_BYTES, in one McastGPUBuffer; one-shot holds up to MNNVL_ONE_SHOT_THRESHOLD bytes.
MNNVL_LAMPORT_BUFFERS = 3
MNNVL_ONE_SHOT_THRESHOLD = 64 * 1024 * 8 * 2
MNNVL_BUFFER_ALIGN = 2 * 16
FI_ALIGN = 1 << 21
FI_SIGNAL_PAD = 2048
MC_GRANULARITY = 1 << 29


# NCCL buffer sizes (NCCL v2.27.5-1 = torch 2.10 cu12.x, which vLLM 0.17-0.19 pin; v2.27.3-1 for torch
# 2.8 / vLLM 0.11; unchanged in v2.28.9-1): src/include/device.h NCCL_STEPS 8, LL 8 lines/thread x 512
# threads x 16-byte lines x steps, LL128 120 elements/thread x 640 threads x 8 bytes x steps; Simple
# DEFAULT_BUFFSIZE 4 MiB (src/init.cc, NCCL_BUFFSIZE). p2p.cc allocates all three per connection.
NCCL_STEPS = 8
NCCL_LL_BUFF = 8 * 512 * 16 * NCCL_STEPS
NCCL_LL128_BUFF = 120 * 640 * 8 * NCCL_STEPS
NCCL_SIMPLE_BUFF = 4 * MIB
NCCL_CONN_BUFF = NCCL_LL_BUFF + NCCL_LL128_BUFF + NCCL_SIMPLE_BUFF
# Ring/tree channels on an NVSwitch Hopper node (18 NVLink4 links per H100/H200 SXM GPU):
# SM90_NVLINK_BW 20.6 GB/s per link (src/graph/topo.h); the search's first sm90 speed, 60 GB/s
# (sm90SpeedArrayIntra, src/graph/search.cc), fits floor(18 x 20.6 / 60) = 6 channels; ncclTopoDupChannels
# doubles them (bw >= 50) and ncclTopoPostset doubles again (src/graph/connect.cc): 24.
SM90_NVSWITCH_CHANNELS = (18 * 206 // 600) * 2 * 2
# Blackwell data-center GPUs (B200/GB200, 18 NVLink5 links): SM100_NVLINK_BW 40.1 GB/s (40.0 in v2.27.3),
# sm100SpeedArrayIntra's first speed 90 GB/s: floor(18 x 40.1 / 90) = 8, doubled twice as above: 32.
SM100_NVSWITCH_CHANNELS = (18 * 401 // 900) * 2 * 2
# NVLS (NVLink SHARP) buffers, src/transport/nvls.cc: NVLS_NCHANNELS_SM90 16 channels, step
# NCCL_NVLS_CHUNKSIZE 128 KiB x NCCL_STEPS, 2 buffers per channel per head, one head per local rank; the
# credit buffer is one more allocation at the 2 MiB NVLS_MEM_ALIGN_SIZE granularity.
NVLS_CHANNELS_SM90 = 16
# NVLS_NCHANNELS_SM100_NVL: Blackwell within one node (or one NVLink domain), NCCL v2.27.3+.
NVLS_CHANNELS_SM100_NODE = 24
NVLS_CHUNK = 128 * 1024
NVLS_ALIGN = 1 << 21
# Hopper SXM boards sit on NVSwitch (HGX); PCIe cards and the NVL (bridged pairs) variants do not.
_NVSWITCH_HOPPER = ("H100 80GB HBM3", "H100 SXM", "H200")
_NO_NVSWITCH = ("PCIE", "NVL")


def hopper_nvswitch(name: str, cc: tuple[int, int]) -> bool:
    """Whether the GPU is a Hopper SXM part on an NVSwitch board (the case tp_comm_bytes models)."""
    upper = name.upper()
    return (
        cc == (9, 0)
        and any(k.upper() in upper for k in _NVSWITCH_HOPPER)
        and not any(k in upper for k in _NO_NVSWITCH)
    )


# PCIe-only products: no NVLink, or NVLink bridges joining pairs only (A30/A40/L-series/RTX, H100/H200 NVL).
_PCIE_ONLY = re.compile(r"\b(PCIE|NVL|GEFORCE|RTX|QUADRO|T4|A2|A10G?|A16|A30|A40|L4|L20|L40S?)\b")


def custom_allreduce_topology_ok(name: str, tp: int) -> bool:
    """Whether vLLM's custom all-reduce passes its topology check for a TP group of these GPUs.

    `CustomAllreduce.__init__` (vllm/distributed/device_communicators/custom_all_reduce.py; the same in
    0.7.3, whose log in vllm#13719 prints it, 0.9.2 and later) returns before allocating its IPC buffers
    when `world_size > 2 and not fully_connected` ("Custom allreduce is disabled because it's not
    supported on more than two PCIe-only GPUs"), fully_connected being NVML's NVLink P2P status between
    every pair (`current_platform.is_fully_connected`). This check comes before the P2P test, so it holds
    whether or not the GPUs have CUDA peer access. GPUs not known to be PCIe-only (SXM/HGX boards) are
    taken as fully connected."""
    return tp <= 2 or not _PCIE_ONLY.search(name.upper())


def tp_comm_bytes(vinfo: VersionInfo, tp: int, nvswitch: bool, cc: tuple[int, int] = (9, 0)) -> int:
    """Device memory of the tensor-parallel torch.distributed NCCL communicator on rank 0, created inside
    the profile (0.11+; 0 where it is not modelled: not an NVSwitch node of Hopper or Blackwell
    data-center GPUs)."""
    if tp <= 1 or not nvswitch or vinfo.nccl_in_budget or vinfo.absolute_budget or cc[0] not in (9, 10):
        return 0
    blackwell = cc[0] == 10
    # Per channel rank 0 receives from its ring predecessor and its tree child (src/transport.cc
    # connects one buffer set per peer and connIndex): at TP 2 both are rank 1, so one connection.
    conns = 1 if tp == 2 else 2
    channels = SM100_NVSWITCH_CHANNELS if blackwell else SM90_NVSWITCH_CHANNELS
    ring_tree = channels * conns * NCCL_CONN_BUFF
    nvls_channels = NVLS_CHANNELS_SM100_NODE if blackwell else NVLS_CHANNELS_SM90
    nvls = nvls_channels * 2 * NVLS_CHUNK * NCCL_STEPS * tp
    return ring_tree + _round_up(nvls, NVLS_ALIGN) + NVLS_ALIGN


def nccl_bytes(world: int) -> int:
    return 0 if world <= 1 else NCCL_BASE + NCCL_PER_PEER * (world - 1)


def device_nccl_bytes(world: int, p2p: bool, nodes: int = 1) -> int:
    """NCCL's device memory on one GPU of a single-node group: nccl_bytes, or nothing without CUDA P2P.

    vLLM's `CustomAllreduce.__init__` (custom_all_reduce.py, 0.4-0.34) disables itself when
    `gpu_p2p_access_check` fails ("Custom allreduce is disabled because your platform lacks GPU P2P
    capability"), so its IPC buffers are never allocated; NCCL then connects the GPUs with its SHM
    transport (src/transport/shm.cc: P2P's canConnect fails without peer access), whose send and receive
    buffers are host shared memory mapped into the device (cudaHostRegister), not device allocations."""
    if world <= 1:
        return 0
    return nccl_bytes(world) if p2p or nodes > 1 else 0


def _round_up(n: int, to: int) -> int:
    return -(-n // to) * to


def multicast_capable(name: str, cc: tuple[int, int]) -> bool:
    """Whether the GPUs share NVLink multicast (an NVSwitch board): Hopper SXM/HGX parts and every
    Blackwell data-center part (cc 10.x, HGX/NVL72 only)."""
    return hopper_nvswitch(name, cc) or cc[0] == 10


def flashinfer_allreduce_workspace(
    vinfo: VersionInfo,
    tp: int,
    pp: int,
    cc: tuple[int, int],
    hidden: int,
    d: int,
    mnbt: int,
    multicast: bool = True,
) -> int:
    """Bytes of FlashInfer's all-reduce workspace on one GPU (0 where the release creates none): trtllm's,
    or from 0.27 on a multicast-capable node MNNVL's (mnnvl_workspace_bytes).

    multicast: whether the GPUs support NVLink multicast; FlashInfer 0.6.4-0.6.14 (vLLM 0.17-0.26) creates
    no workspace without it."""
    if tp <= 1 or hidden <= 0 or not (vinfo.allreduce_rms_fusion or vinfo.flashinfer_allreduce):
        return 0
    if vinfo.fi_workspace_mc_rounded and not multicast:
        return 0  # SymmDeviceMemory raises "Device does not support multicasting"; the fusion is skipped
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
    if vinfo.fi_ar_mnnvl and multicast:
        # one node with NVSwitch multicast: the MNNVL backend (trtllm is the fallback without multicast)
        return mnnvl_workspace_bytes(tp, tokens, hidden, d)
    lamport_elem = 4 if d == 4 else 2
    gran = MC_GRANULARITY if vinfo.fi_workspace_mc_rounded else FI_ALIGN
    sizes = (tp * tokens * hidden * 2, tp * FI_BARRIER_FLAGS * 4, 3 * tp * tokens * hidden * lamport_elem)
    return sum(_round_up(_round_up(n, 16) + FI_SIGNAL_PAD, gran) for n in sizes)


def mnnvl_workspace_bytes(tp: int, tokens: int, hidden: int, d: int) -> int:
    """Bytes of FlashInfer's MNNVL all-reduce workspace on one GPU (FlashInfer 0.6.16+).

    `MNNVLAllReduceFusionWorkspace.__init__` sizes one Lamport buffer as the larger of the one-shot
    (min(threshold / (tp x elem x hidden), tokens) x hidden x tp x elem) and two-shot
    (2 x ceil(tokens / tp) x tp x hidden x elem) needs, rounds it to 32 bytes and asks `McastGPUBuffer` for
    three; `SymmDeviceMemory._get_allocation_prop` (flashinfer/comm/mnnvl.py) adds the 2 KiB signal pad,
    rounds to the 2 MiB allocation granularity and then, multicast being on, to the recommended multicast
    granularity (512 MiB on NVSwitch GPUs): one 512 MiB block per GPU whatever the TP size, unless the
    buffers need more."""
    if tp <= 1 or tokens <= 0 or hidden <= 0:
        return 0
    one_shot_tokens = min(MNNVL_ONE_SHOT_THRESHOLD // (tp * d * hidden), tokens)
    one_shot = one_shot_tokens * hidden * tp * d
    two_shot = 2 * -(-tokens // tp) * tp * hidden * d
    buf = _round_up(max(one_shot, two_shot), MNNVL_BUFFER_ALIGN)
    alloc = _round_up(MNNVL_LAMPORT_BUFFERS * buf + FI_SIGNAL_PAD, FI_ALIGN)
    return _round_up(alloc, MC_GRANULARITY)


def pre_snapshot_bytes(vinfo: VersionInfo, world: int, p2p: bool = True, nodes: int = 1) -> int:
    """Used before the baseline snapshot (outside the budget of the snapshot families)."""
    if vinfo.absolute_budget:
        return 0
    pre = CUDA_CONTEXT if vinfo.nccl_in_budget else CUDA_CONTEXT + device_nccl_bytes(world, p2p, nodes)
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
    nvswitch: bool = False,
    multicast: bool = True,
    p2p: bool = True,
    custom_ar_topology: bool = True,
) -> int:
    """Non-torch growth that vLLM counts inside the budget (0.8.x: without the context and NCCL, which
    stage_memory adds to its absolute budget).

    p2p: whether the node's GPUs have CUDA peer access; without it (one node) vLLM creates no custom
    all-reduce and NCCL's buffers stay in host memory (device_nccl_bytes).
    custom_ar_topology: custom_allreduce_topology_ok; more than two PCIe-only GPUs get no custom
    all-reduce either (NCCL's buffers are still on the device)."""
    non_torch = MISC_NON_TORCH + (0 if vinfo.cublas_before_snapshot else CUBLAS_WORKSPACE)
    if tp > 1 and p2p and custom_ar_topology and (vinfo.nccl_in_budget or vinfo.absolute_budget):
        non_torch += CUSTOM_ALLREDUCE
    if vinfo.nccl_in_budget:
        non_torch += nccl_bytes(world) if p2p else 0
    non_torch += flashinfer_allreduce_workspace(vinfo, tp, pp, cc, hidden, d, mnbt, multicast)
    non_torch += tp_comm_bytes(vinfo, tp, nvswitch, cc)
    return non_torch
