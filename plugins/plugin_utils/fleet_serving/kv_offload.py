"""A KV-cache tier in host RAM per model (#28): ``vllm_server_models[].kv_offload`` -> vLLM's CPU offloading.

Exports:
  kv_offload(models, memtotal_mb, vllm_version, weights_bytes, tensor_parallel) -> dict[name, dict]
      per model with ``kv_offload``: the GiB of host RAM it gets (``auto`` sized from what is left), per TP
      rank, the ``vllm serve`` flags and why; raises ServingError when the host's RAM cannot hold it
  check_setting(value, vllm_version, var) -> str | None
      what is wrong with one ``kv_offload`` value (validate, before any host), None when fine
  OFFLOAD_FLAGS_SINCE, HOST_RESERVE_GIB

What vLLM takes, per release:
* ``--kv-offloading-backend {native,lmcache} --kv-offloading-size <GiB>`` (vllm/engine/arg_utils.py; the
  0.32.0 ``vllm serve --help=all`` captured in tests/data/vllm-release: "Size of the KV cache offloading
  buffer in GiB. When TP > 1, this is the total buffer size summed across all TP ranks"). Claimed from
  0.12.0, the first release seen with the flags; the fleet renders the native backend (vLLM's
  OffloadingConnector, no extra package in the image).
* LMCache is the alternative (``backend: lmcache``): before 0.12 through ``--kv-transfer-config
  {"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"}`` (the image must carry the lmcache package),
  from 0.12 through ``--kv-offloading-backend lmcache``.

Sizing on the host (``ansible_memtotal_mb``): the OS keeps HOST_RESERVE_GIB or 10% of RAM, whichever is more;
the page cache keeps every model's weights once (a restart reads them again from RAM, not disk); the models
with a number get it; the ``auto`` ones share what is left equally, whole GiB each. vLLM splits a model's
size evenly over its TP ranks (one pinned buffer per worker), which the plan shows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..vllm_planner.errors import PlanInputError
from ..vllm_planner.versions import Version, parse_version
from .deploy import ServingError

OFFLOAD_FLAGS_SINCE: Version = (0, 12, 0)
HOST_RESERVE_GIB = 8
_LMCACHE = '{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"}'
GIB = 1024**3


def _setting(value: Any) -> tuple[float | str | None, str]:
    """(size in GiB, 'auto' or None when off; backend) of one ``kv_offload`` value."""
    if value in (None, False, 0):
        return None, "native"
    if isinstance(value, Mapping):
        return value.get("size", "auto"), str(value.get("backend") or "native")
    return value, "native"


def check_setting(value: Any, vllm_version: str, var: str) -> str | None:
    size, backend = _setting(value)
    if size is None:
        return None
    if backend not in ("native", "lmcache"):
        return f"{var}.backend must be native or lmcache, got {backend!r}"
    if size != "auto" and (isinstance(size, bool) or not isinstance(size, (int, float)) or size <= 0):
        return f"{var} must be a size in GiB above 0 or 'auto', got {size!r}"
    try:
        version = parse_version(vllm_version)
    except PlanInputError as exc:
        return str(exc)
    if backend == "native" and version < OFFLOAD_FLAGS_SINCE:
        return (
            f"{var}: vLLM {vllm_version} has no --kv-offloading-backend/--kv-offloading-size (from 0.12.0); "
            "set backend: lmcache (an image with the lmcache package) or pin a newer release"
        )
    return None


def _args(size_gib: int, backend: str, version: Version) -> list[str]:
    if version >= OFFLOAD_FLAGS_SINCE:
        return ["--kv-offloading-backend", backend, "--kv-offloading-size", str(size_gib)]
    # LMCache sizes its CPU tier from its own config (LMCACHE_MAX_LOCAL_CPU_SIZE, GiB per worker)
    return ["--kv-transfer-config", _LMCACHE]


def kv_offload(
    models: Sequence[Mapping[str, Any]],
    memtotal_mb: Any,
    vllm_version: str,
    weights_bytes: Mapping[str, Any],
    tensor_parallel: Mapping[str, Any],
) -> dict[str, dict[str, Any]]:
    """Per model with ``kv_offload``: ``size_gib``, ``per_rank_gib``, ``args``, ``env`` and ``why``."""
    wanted = {
        str(m.get("name")): _setting(m.get("kv_offload")) for m in models if _setting(m.get("kv_offload"))[0]
    }
    if not wanted:
        return {}
    for name, (size, backend) in wanted.items():
        problem = check_setting(
            {"size": size, "backend": backend}, vllm_version, f"vllm_server_models[{name}].kv_offload"
        )
        if problem:
            raise ServingError(problem)
    version = parse_version(vllm_version)
    total = int(memtotal_mb or 0) * 1024**2
    if total <= 0:
        raise ServingError("kv_offload needs the host's RAM (ansible_memtotal_mb): gather facts first")
    reserve = max(HOST_RESERVE_GIB * GIB, total // 10)
    page_cache = sum(int(weights_bytes.get(str(m.get("name"))) or 0) for m in models)
    fixed = {n: float(s) for n, (s, _b) in wanted.items() if s != "auto"}
    autos = [n for n, (s, _b) in wanted.items() if s == "auto"]
    left = total - reserve - page_cache - sum(fixed.values()) * GIB
    basis = (
        f"host RAM {total / GIB:.0f} GiB - OS {reserve / GIB:.0f} GiB - weights in the page cache "
        f"{page_cache / GIB:.1f} GiB"
    )
    if left < 0 or (autos and left // len(autos) < GIB):
        asked = ", ".join(f"{n} {s} GiB" for n, s in fixed.items()) or "none fixed"
        raise ServingError(
            f"kv_offload does not fit this host: {basis} leaves {max(left, 0) / GIB:.1f} GiB for {asked}"
            + (f" and {len(autos)} auto model(s) (1 GiB each at least)" if autos else "")
            + "; lower the sizes, serve fewer models here, or use a host with more RAM"
        )
    each_auto = int(left // len(autos) // GIB) if autos else 0
    out: dict[str, dict[str, Any]] = {}
    for name, (size, backend) in wanted.items():
        gib = int(size) if size != "auto" else each_auto
        tp = max(1, int(tensor_parallel.get(name) or 1))
        how = "set" if size != "auto" else f"auto: ({basis} - fixed sizes) / {len(autos)}"
        out[name] = {
            "size_gib": gib,
            "per_rank_gib": round(gib / tp, 2),
            "backend": backend,
            "args": _args(gib, backend, version),
            "env": {"LMCACHE_MAX_LOCAL_CPU_SIZE": str(round(gib / tp, 2))}
            if version < OFFLOAD_FLAGS_SINCE
            else {},
            "why": f"{gib} GiB of host RAM ({how}), {round(gib / tp, 2)} GiB per TP rank of {tp}",
        }
    return out
