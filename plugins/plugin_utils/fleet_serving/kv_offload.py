"""A KV-cache tier in host RAM per model (#28): ``vllm_server_models[].kv_offload`` -> vLLM's CPU offloading.

Exports:
  kv_offload(models, memtotal_mb, vllm_version, weights_bytes, tensor_parallel, shm_size=None) -> dict
      per model with ``kv_offload``: the GiB of host RAM it gets (``auto`` sized from what is left), per TP
      rank, the ``vllm serve`` flags and why; raises ServingError when the host's RAM cannot hold it, or
      when ``shm_size`` (the container's /dev/shm, given when it does not share the host's IPC) cannot
  check_setting(value, vllm_version, var) -> str | None
      what is wrong with one ``kv_offload`` value (validate, before any host), None when fine
  shm_problem(value, shm_size, var) -> str | None
      a fixed native tier that the container's /dev/shm (Docker's shm_size) cannot hold (validate)
  docker_bytes(value) -> int
      a Docker size (16g, 512m) in bytes
  OFFLOAD_FLAGS_SINCE, HOST_RESERVE_GIB, SHM_MARGIN_GIB

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

The native tier lives in shared memory: on the lent H100 (vLLM 0.34.0, ``--kv-offloading-size 4``,
tests/gpu/results/h100-0.34.0-features) /dev/shm grew by 4.03 GiB. A container with the host's IPC namespace
(``vllm_server_ipc_mode: host``, the default) has the host's /dev/shm; any other gets Docker's ``shm_size``
(``vllm_server_shm_size``), which must hold the tier and SHM_MARGIN_GIB for NCCL and vLLM's own queues.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ..fleet_planner.errors import PlanInputError
from ..fleet_planner.versions import Version, parse_version
from .deploy import ServingError
from .images import release_of

OFFLOAD_FLAGS_SINCE: Version = (0, 12, 0)
HOST_RESERVE_GIB = 8
SHM_MARGIN_GIB = 1
_DOCKER_UNITS = {"": 1, "b": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}
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


def docker_bytes(value: Any) -> int:
    """Bytes of a Docker size (``16g``, ``512m``, ``1GiB``, a number of bytes), binary units as Docker reads
    them (go-units RAMInBytes); ServingError naming the value otherwise."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([bkmgt]?)(?:i?b)?\s*", str(value), re.IGNORECASE)
    if isinstance(value, bool) or not m:
        raise ServingError(f"vllm_server_shm_size must be a Docker size such as 16g or 512m, got {value!r}")
    return int(float(m.group(1)) * _DOCKER_UNITS[m.group(2).lower()])


def shm_problem(value: Any, shm_size: Any, var: str) -> str | None:
    """What is wrong with a fixed ``kv_offload`` in a container whose /dev/shm is ``shm_size`` (the native
    tier lives there; LMCache pins its own host memory, ``auto`` is sized on the host), None when it fits."""
    size, backend = _setting(value)
    if size in (None, "auto") or backend != "native" or not isinstance(size, (int, float)):
        return None
    shm = docker_bytes(shm_size)
    if shm >= (size + SHM_MARGIN_GIB) * GIB:
        return None
    return (
        f"{var}: its {size:g} GiB tier lives in the container's /dev/shm, which vllm_server_shm_size gives "
        f"{shm / GIB:.1f} GiB (vllm_server_ipc_mode is not host). Fix: set vllm_server_shm_size to at least "
        f"{math.ceil(size + SHM_MARGIN_GIB)}g, use vllm_server_ipc_mode: host, or a smaller kv_offload"
    )


def kv_offload(
    models: Sequence[Mapping[str, Any]],
    memtotal_mb: Any,
    vllm_version: Any,
    weights_bytes: Mapping[str, Any],
    tensor_parallel: Mapping[str, Any],
    shm_size: Any = None,
) -> dict[str, dict[str, Any]]:
    """Per model with ``kv_offload``: ``size_gib``, ``per_rank_gib``, ``args``, ``env`` and ``why``;
    ``shm_size`` is the container's /dev/shm where it does not share the host's (None: the host's);
    ``vllm_version`` is one release for all models or model name -> its own (:func:`.images.release_of`)."""
    wanted = {
        str(m.get("name")): _setting(m.get("kv_offload")) for m in models if _setting(m.get("kv_offload"))[0]
    }
    if not wanted:
        return {}
    releases = {name: str(release_of(vllm_version, name)) for name in wanted}
    for name, (size, backend) in wanted.items():
        problem = check_setting(
            {"size": size, "backend": backend},
            releases[name],
            f"vllm_server_models[{name}].kv_offload",
        )
        if problem:
            raise ServingError(problem)
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
        version = parse_version(releases[name])
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
    for name, tier in out.items() if shm_size is not None else ():
        problem = shm_problem(
            {"size": tier["size_gib"], "backend": tier["backend"]},
            shm_size,
            f"vllm_server_models[{name}].kv_offload",
        )
        if problem:
            raise ServingError(problem)
    return out
