"""KV-cache geometry: page sizes per layer type, block size, grouping, blocks needed per request.

Mirrors vllm/v1/kv_cache_interface.py (page_size_bytes of Full/Sliding/MLA/Mamba specs) and the
grouping of vllm/v1/core/kv_cache_utils.py / kv_cache_planning.py.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .config import ModelArch
from .gpu import GpuSpec
from .identity_cache import IdentityCache
from .v0_engine import v0_mla_token_bytes
from .versions import VersionInfo


@dataclass(frozen=True, slots=True)
class KvGroup:
    kind: str  # full | sliding | chunked | mamba
    layers: int  # layers in this group (padded to the group size)
    window: int  # sliding window / chunk size (0 for full and mamba)


@dataclass(frozen=True, slots=True)
class KvLayout:
    block_size: int
    groups: tuple[KvGroup, ...]
    page_bytes: int  # bytes of one layer's page (after unification)
    bytes_per_block: int  # bytes of one block across the layers of one group (all groups share it)
    per_token_bytes: int  # KV bytes per token summed over this stage's attention layers
    attention_layers: int
    mamba_layers: int
    padding_layers: int
    block_size_raised: bool
    # the groups' count when every group is full attention (a request's blocks are then one closed form)
    full_groups: int = 0

    def blocks_per_request(self, length: int, inflight: int, mamba_blocks: int) -> int:
        total = 0
        bs = self.block_size
        for g in self.groups:
            if g.kind == "full":
                total += -(-length // bs)
            elif g.kind == "sliding":
                total += -(-min(g.window - 1 + inflight, length) // bs) + 1
            elif g.kind == "chunked":
                total += -(-min(g.window + inflight, length) // bs)
            else:
                total += mamba_blocks
        return total

    def needed_bytes(self, length: int, inflight: int, mamba_blocks: int) -> int:
        return self.blocks_per_request(length, inflight, mamba_blocks) * self.bytes_per_block


def attention_token_bytes(arch: ModelArch, tp: int, kv_bytes: int, kv_dtype: str) -> int:
    """KV bytes per token of one attention layer on one GPU."""
    if arch.mla is not None:
        if kv_dtype == "fp8_ds_mla":
            return 656
        return (arch.mla.kv_lora_rank + arch.mla.qk_rope_head_dim) * kv_bytes
    nkv = arch.num_kv_heads
    kvh = max(1, nkv // tp)
    return 2 * kvh * arch.head_dim * kv_bytes


def mamba_state_bytes(arch: ModelArch, tp: int, dtype_bytes: int) -> int:
    """Per-request state of one Mamba-like layer on one GPU (MambaStateShapeCalculator)."""
    m = arch.mamba
    if m is None:
        return 0
    d = m.state_dtype_bytes or dtype_bytes
    if m.kind == "gdn":
        conv = (2 * m.k_heads * m.k_dim + m.v_heads * m.v_dim) // tp * (m.d_conv - 1)
        ssm = (m.v_heads // tp) * m.v_dim * m.k_dim
        return (conv + ssm) * d
    if m.kind == "mamba2":
        ng = m.n_groups if m.n_groups % tp == 0 else tp
        conv = (m.intermediate + 2 * ng * m.d_state) // tp * (m.d_conv - 1)
        ssm = (m.n_heads // tp) * m.head_dim * m.d_state
        return (conv + ssm) * d
    if m.kind == "mamba1":
        conv = m.intermediate // tp * (m.d_conv - 1)
        ssm = m.intermediate // tp * m.d_state
        return (conv + ssm) * d
    return (m.n_heads // tp) * m.head_dim * m.head_dim * d


def default_block_size(arch: ModelArch, gpu: GpuSpec, vinfo: VersionInfo) -> int:
    if arch.mla is not None and not vinfo.v0_engine:  # V0: 16 for every backend (platforms/cuda.py)
        major = gpu.cc[0]
        if major == 10:
            return 128  # CUTLASS MLA on data-centre Blackwell
        if major == 9:
            return 64  # FlashMLA on Hopper
        return 64 if vinfo.extensible else 16  # Triton MLA accepts any size
    return vinfo.default_block_size


def hybrid_manager_enabled(arch: ModelArch, vinfo: VersionInfo, allow_chunked: bool) -> bool:
    """Whether vLLM keeps sliding / chunked layers in their own groups (hybrid KV-cache manager)."""
    if vinfo.version < (0, 10):
        return False
    if "chunked" in arch.layer_kinds and not allow_chunked:
        return False  # auto-disabled for chunked-local attention models
    return True


_COUNTS: IdentityCache[dict[str, int]] = IdentityCache(4096)


def _kind_counts(arch: ModelArch, start: int, end: int, hybrid: bool, allow_chunked: bool) -> dict[str, int]:
    """Layers of each KV kind in [start, end), as the cache groups them (one count per split and stage)."""
    values = (start, end, hybrid, allow_chunked)
    counts = _COUNTS.get((arch,), values)
    if counts is None:
        counts = {}
        for k in arch.layer_kinds[start:end]:
            if k == "none":
                continue
            if not hybrid and k in ("sliding", "chunked"):
                k = "full"
            if k == "chunked" and not allow_chunked:
                k = "full"
            counts[k] = counts.get(k, 0) + 1
        _COUNTS.put((arch,), values, counts)
    return dict(counts)


def build_layout(
    arch: ModelArch,
    start: int,
    end: int,
    tp: int,
    kv_bytes: int,
    kv_dtype: str,
    dtype_bytes: int,
    gpu: GpuSpec,
    vinfo: VersionInfo,
    block_size: int | None,
    allow_chunked: bool = False,
) -> KvLayout:
    hybrid = hybrid_manager_enabled(arch, vinfo, allow_chunked)
    if arch.mla is not None and vinfo.v0_engine:
        tok = v0_mla_token_bytes(arch, vinfo.version, tp, kv_bytes, dtype_bytes)
    else:
        tok = attention_token_bytes(arch, tp, kv_bytes, kv_dtype) if arch.num_kv_heads or arch.mla else 0
    counts = _kind_counts(arch, start, end, hybrid, allow_chunked)
    window = arch.sliding_window or 0
    chunk = arch.chunk_size or 0
    attn_layers = sum(v for k, v in counts.items() if k != "mamba")
    mamba_layers = counts.get("mamba", 0)
    bs = block_size or default_block_size(arch, gpu, vinfo)
    raised = False
    page = bs * tok
    if mamba_layers:
        state = mamba_state_bytes(arch, tp, dtype_bytes)
        if attn_layers and tok:
            align = 16 if not vinfo.extensible else max(16, bs)
            needed = align * -(-state // (align * tok))
            if block_size is None and needed > bs:
                bs = needed
                raised = True
            page = bs * tok
        else:
            page = state
    if not counts:
        return KvLayout(bs, (), 0, 0, 0, 0, 0, 0, raised)
    if len(counts) == 1:
        kind, n = next(iter(counts.items()))
        groups = (KvGroup(kind, n, window if kind == "sliding" else chunk if kind == "chunked" else 0),)
        padding = 0
        group_size = n
    else:
        lo, hi = min(counts.values()), max(counts.values())
        group_size = hi if (vinfo.extensible and hi < 1.5 * lo) else lo
        gl: list[KvGroup] = []
        padding = 0
        for kind, n in counts.items():
            n_groups = -(-n // group_size)
            padding += n_groups * group_size - n
            w = window if kind == "sliding" else chunk if kind == "chunked" else 0
            gl.extend(KvGroup(kind, group_size, w) for _unused in range(n_groups))
        groups = tuple(gl)
    return KvLayout(
        block_size=bs,
        groups=groups,
        page_bytes=page,
        bytes_per_block=group_size * page,
        per_token_bytes=attn_layers * tok,
        attention_layers=attn_layers,
        mamba_layers=mamba_layers,
        padding_layers=padding,
        block_size_raised=raised,
        full_groups=len(groups) if all(g.kind == "full" for g in groups) else 0,
    )


def max_len_that_fits(layout: KvLayout, budget: int, inflight: int, mamba_blocks: int, upper: int) -> int:
    """Largest length whose per-request blocks fit `budget` bytes (vLLM's binary search)."""
    if layout.bytes_per_block <= 0:
        return upper
    if layout.full_groups:
        # ceil(length / block_size) blocks per group: the longest length is a whole number of blocks
        blocks = int(budget // (layout.full_groups * layout.bytes_per_block))
        return 0 if blocks < 1 else min(blocks * layout.block_size, upper)
    if layout.needed_bytes(1, inflight, mamba_blocks) > budget:
        return 0
    if layout.needed_bytes(upper, inflight, mamba_blocks) <= budget:
        return upper
    lo, hi = 1, upper
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if layout.needed_bytes(mid, inflight, mamba_blocks) <= budget:
            lo = mid
        else:
            hi = mid - 1
    return lo


def logged_tokens(
    layout: KvLayout, num_blocks: int, max_len: int, inflight: int, mamba_blocks: int, vinfo: VersionInfo
) -> tuple[int, float]:
    """("GPU KV cache size: N tokens", "Maximum concurrency ... X") as the given release logs them."""
    bpr = layout.blocks_per_request(max_len, inflight, mamba_blocks) if layout.groups else 1
    conc = num_blocks / bpr if bpr else 0.0
    if vinfo.tokens_from_concurrency:
        tokens = int(conc * max_len)
    else:
        n_groups = max(1, len(layout.groups))
        tokens = (num_blocks // n_groups) * layout.block_size
    return tokens, conc


def floor_div(a: float, b: int) -> int:
    return int(math.floor(a / b)) if b > 0 else 0
