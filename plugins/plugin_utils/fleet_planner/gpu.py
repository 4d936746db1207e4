"""GPU description used by the planner."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .errors import GIB, MIB, PlanInputError
from .gpu_names import resolve_capability

# Keys of `gpu_spec_from_facts` output that describe the host but do not change the plan.
INFORMATIONAL_KEYS = ("mixed", "models", "excluded", "mig")
# Data-centre Blackwell parts (SM 10.x): larger CUDA-graph capture range and MLA block size 128.
_BLACKWELL_DC_MAJOR = 10


_SPEC_CACHE: dict[tuple[tuple[str, str, Any], ...], GpuSpec] = {}


# Driver-reserved framebuffer measured on real cards, by (name fragment, nvidia-smi memory.total):
# what CUDA reports as total is memory.total minus this.
MEASURED_RESERVED_MIB: tuple[tuple[str, int, int], ...] = (
    # vLLM 0.11 startup on one H100 80GB HBM3: 79.18 GiB CUDA total of 81559 MiB (llm-d-benchmark
    # empirical-vllm-memory-results.md)
    ("h100", 81559, 479),
    # nvidia-smi -q "Reserved: 616 MiB" and torch.cuda.mem_get_info total 139.80 GiB on an H200
    ("h200", 143771, 616),
    # vLLM 0.6 "total_gpu_memory=23.58GiB" on an RTX 3090 of 24576 MiB (vllm-project/vllm#10517)
    ("3090", 24576, 430),
)


def measured_reserved_mib(name: str, total_mib: int) -> int | None:
    low = name.lower()
    for fragment, total, reserved in MEASURED_RESERVED_MIB:
        if fragment in low and total == total_mib:
            return reserved
    return None


def estimate_reserved_mib(total_mib: int) -> int:
    """Driver-reserved framebuffer that CUDA never exposes (nvidia-smi "FB Memory Usage: Reserved").

    Captured cards show 240-760 MiB (V100-16GB 240, RTX 4090 346-354, L40S 479-609, H100-80GB 454-551,
    A100-80GB 763, H200 614-700); it grows slowly with the framebuffer size. Used only when the caller
    does not pass the measured value (`memory_reserved_mib`).
    """
    if total_mib <= 0:
        return 0
    return int(min(700, max(200, 250 + total_mib * 0.004)))


@dataclass(frozen=True, slots=True)
class GpuSpec:
    """One node's GPUs. `memory_mib` is nvidia-smi's memory.total (FB total, including Reserved)."""

    memory_mib: int
    count: int = 1
    name: str = "unknown"
    compute_capability: str = "8.0"
    nodes: int = 1
    shared: bool = False
    memory_reserved_mib: int | None = None
    # memory other processes hold on each GPU when vLLM starts (nvidia-smi memory.used before the start)
    memory_used_mib: int = 0
    # the node's GPUs reach each other by CUDA peer-to-peer (NVLink or PCIe P2P). False where the driver
    # reports none (containers or VMs without it): vLLM logs "Custom allreduce is disabled because your
    # platform lacks GPU P2P capability" and NCCL's transports between the GPUs keep their buffers in host
    # memory (non_torch.py).
    p2p: bool = True
    # loud warnings about how the GPU was told (gpu_names.resolve_capability); the plan repeats them
    notes: tuple[str, ...] = field(default=(), compare=False)
    cc: tuple[int, int] = field(init=False, compare=False)
    reserved_mib: int = field(init=False, compare=False)
    cuda_total_bytes: int = field(init=False, compare=False)

    @classmethod
    def from_any(cls, gpu: GpuSpec | Mapping[str, Any]) -> GpuSpec:
        if isinstance(gpu, GpuSpec):
            return gpu
        if not isinstance(gpu, Mapping):
            raise PlanInputError(f"gpu: expected a mapping or GpuSpec, got {type(gpu).__name__}")
        try:
            key = tuple((k, type(v).__name__, v) for k, v in gpu.items() if k not in INFORMATIONAL_KEYS)
            hit = _SPEC_CACHE.get(key)
        except TypeError:  # unhashable values: validate below, which reports them
            key, hit = None, None
        if hit is not None:
            return hit
        spec = cls._validate(gpu)
        if key is not None:
            if len(_SPEC_CACHE) > 4096:
                _SPEC_CACHE.clear()
            _SPEC_CACHE[key] = spec
        return spec

    @classmethod
    def _validate(cls, gpu: Mapping[str, Any]) -> GpuSpec:
        if not isinstance(gpu, Mapping):
            raise PlanInputError(f"gpu: expected a mapping or GpuSpec, got {type(gpu).__name__}")
        known = {
            "name",
            "memory_mib",
            "count",
            "compute_capability",
            "nodes",
            "shared",
            "memory_reserved_mib",
            "memory_used_mib",
            "p2p",
            *INFORMATIONAL_KEYS,
        }
        unknown = sorted(set(gpu) - known)
        if unknown:
            raise PlanInputError(
                f"gpu: unknown key(s) {', '.join(unknown)}; expected {', '.join(sorted(known))}"
            )
        if "memory_mib" not in gpu:
            raise PlanInputError("gpu.memory_mib is required (nvidia-smi memory.total in MiB)")
        memory = _plausible_mib(_pos_int(gpu["memory_mib"], "gpu.memory_mib"), "gpu.memory_mib")
        count = _pos_int(gpu.get("count", 1), "gpu.count")
        nodes = _pos_int(gpu.get("nodes", 1), "gpu.nodes")
        name = str(gpu.get("name") or "unknown")
        cc, notes = resolve_capability(name, _capability(gpu.get("compute_capability")))
        reserved = gpu.get("memory_reserved_mib")
        if reserved is not None:
            reserved = _nonneg_int(reserved, "gpu.memory_reserved_mib")
            if reserved >= memory:
                raise PlanInputError(
                    f"gpu.memory_reserved_mib: {reserved} must be smaller than gpu.memory_mib ({memory}). "
                    "Fix: pass nvidia-smi -q 'FB Memory Usage: Reserved' (a few hundred MiB) or leave it "
                    "unset."
                )
        used = _nonneg_int(gpu.get("memory_used_mib") or 0, "gpu.memory_used_mib")
        if used >= memory:
            raise PlanInputError(
                f"gpu.memory_used_mib: {used} must be smaller than gpu.memory_mib ({memory}). Fix: pass "
                "nvidia-smi memory.used of the GPU before vLLM starts (0 on an idle GPU)."
            )
        shared = gpu.get("shared", False)
        if not isinstance(shared, bool):
            raise PlanInputError(f"gpu.shared: expected true/false, got {shared!r}")
        p2p = gpu.get("p2p", True)
        if not isinstance(p2p, bool):
            raise PlanInputError(f"gpu.p2p: expected true/false, got {p2p!r}")
        return cls(
            memory_mib=memory,
            count=count,
            name=name,
            compute_capability=cc,
            nodes=nodes,
            shared=shared,
            memory_reserved_mib=reserved,
            memory_used_mib=used,
            p2p=p2p,
            notes=notes,
        )

    def __post_init__(self) -> None:
        major, minor = self.compute_capability.split(".", 1)
        object.__setattr__(self, "cc", (int(major), int(minor)))
        reserved = self.memory_reserved_mib
        if reserved is None:
            reserved = measured_reserved_mib(self.name, self.memory_mib)
        if reserved is None:
            reserved = estimate_reserved_mib(self.memory_mib)
        object.__setattr__(self, "reserved_mib", reserved)
        # What cudaMemGetInfo reports as total (nvidia-smi total minus Reserved): vLLM's T.
        object.__setattr__(self, "cuda_total_bytes", (self.memory_mib - reserved) * MIB)

    @property
    def used_bytes(self) -> int:
        return self.memory_used_mib * MIB

    @property
    def cuda_total_gib(self) -> float:
        return self.cuda_total_bytes / GIB

    @property
    def is_blackwell_dc(self) -> bool:
        return self.cc[0] == _BLACKWELL_DC_MAJOR

    @property
    def supports_bf16(self) -> bool:
        return self.cc >= (8, 0)

    @property
    def supports_fp8_compute(self) -> bool:
        return self.cc >= (8, 9)


def _capability(value: Any) -> str | None:
    """gpu.compute_capability as "major.minor", or None when it is not given."""
    if value is None or str(value).strip() == "":
        return None
    cc = str(value).strip()
    try:
        major, minor = (int(p) for p in cc.split(".", 1)) if "." in cc else (int(cc), 0)
    except ValueError:
        raise PlanInputError(
            f"gpu.compute_capability: cannot parse {cc!r}; expected e.g. '9.0'. Fix: pass nvidia-smi "
            "--query-gpu=compute_cap (8.0 for an A100, 9.0 for an H100)."
        ) from None
    return f"{major}.{minor}"


# A GPU vLLM can use has 2 GiB to 1 TiB of memory per device (the largest parts today hold ~288 GB).
_MIN_MIB, _MAX_MIB = 2048, 1 << 20


def _plausible_mib(n: int, name: str) -> int:
    """Refuse a size in the wrong unit (GiB, bytes or KiB passed as MiB), naming the unit it looks like."""
    if n < _MIN_MIB:
        looks = f"GiB ({n} GiB = {n * 1024} MiB)" if n <= 1024 else "too small for a GPU vLLM can use"
        raise PlanInputError(
            f"{name}: {n} MiB is implausible for a GPU; it looks like {looks}. Fix: pass nvidia-smi "
            f"memory.total in MiB (e.g. 81559 for an H100 80GB)."
        )
    if n > _MAX_MIB:
        for unit, shift in (("bytes", 20), ("KiB", 10)):
            mib = n >> shift
            if _MIN_MIB <= mib <= _MAX_MIB:
                raise PlanInputError(
                    f"{name}: {n} MiB is implausible for a GPU; it looks like {unit} ({n} {unit} = "
                    f"{mib} MiB). Fix: pass nvidia-smi memory.total in MiB ({mib})."
                )
        raise PlanInputError(
            f"{name}: {n} MiB is implausible for a GPU (more than 1 TiB). Fix: pass nvidia-smi "
            "memory.total in MiB (e.g. 81559 for an H100 80GB)."
        )
    return n


def _pos_int(value: Any, name: str) -> int:
    n = _nonneg_int(value, name)
    if n <= 0:
        raise PlanInputError(f"{name}: must be a positive integer, got {value!r}. Fix: set {name} >= 1.")
    return n


def _nonneg_int(value: Any, name: str) -> int:
    if isinstance(value, bool):
        raise PlanInputError(f"{name}: expected an integer, got {value!r}. Fix: write a whole number.")
    try:
        n = int(str(value).strip()) if not isinstance(value, int) else value
    except ValueError:
        raise PlanInputError(
            f"{name}: expected an integer, got {value!r}. Fix: write a whole number."
        ) from None
    if n < 0:
        raise PlanInputError(f"{name}: must not be negative, got {value!r}. Fix: write a whole number >= 0.")
    return n


def _index_ranges(indexes: list[Any]) -> str:
    """[1, 2, 3, 5] -> 'GPUs 1-3, 5'; [0] -> 'GPU 0'."""
    nums = sorted(i for i in indexes if isinstance(i, int))
    parts: list[str] = []
    for n in nums:
        if parts and parts[-1][1] == n - 1:
            parts[-1] = (parts[-1][0], n)
        else:
            parts.append((n, n))
    text = ", ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in parts) or "?"
    return ("GPUs " if len(nums) > 1 else "GPU ") + text


def gpu_spec_from_facts(
    facts: Mapping[str, Any], nodes: int = 1, shared: bool = False, gpus: Any = None
) -> dict[str, Any]:
    """Planner GPU dict from the `nvidia_gpu` facts (`ansible_facts.nvidia_gpu`).

    `gpus` (a model's GPU indexes, None for all) picks the GPUs to plan for. They must be of one
    model: a mixed selection is refused with the GPUs of each model named, since tensor parallelism
    across unlike GPUs is bounded by the smallest and a plan for one model does not fit the other.
    GPUs in MIG mode are left out and listed in `excluded`. `models` counts every model of the host.
    """
    if not isinstance(facts, Mapping):
        raise PlanInputError(f"expected the nvidia_gpu facts mapping, got {type(facts).__name__}")
    entries = facts.get("gpus")
    if not facts.get("present", bool(entries)) or not isinstance(entries, list) or not entries:
        raise PlanInputError("no NVIDIA GPU in the facts (nvidia_gpu.present is false or gpus is empty)")
    models: dict[str, int] = {}
    for entry in entries:
        if not isinstance(entry, Mapping):
            raise PlanInputError(f"nvidia_gpu.gpus entries must be mappings, got {entry!r}")
        name = str(entry.get("name") or "unknown")
        models[name] = models.get(name, 0) + 1
    selected = list(entries)
    if gpus not in (None, "", []):
        if not isinstance(gpus, list | tuple) or not all(
            isinstance(i, int) and not isinstance(i, bool) for i in gpus
        ):
            raise PlanInputError(f"gpus: expected a list of GPU indexes such as [0, 1], got {gpus!r}")
        present = {e.get("index") for e in entries}
        missing = [i for i in gpus if i not in present]
        if missing:
            raise PlanInputError(
                f"gpus: no {_index_ranges(missing)} on this host (it has {_index_ranges(sorted(present))})"
            )
        selected = [e for e in entries if e.get("index") in set(gpus)]
    usable: dict[str, list[Mapping[str, Any]]] = {}
    excluded: list[str] = []
    for entry in selected:
        name = str(entry.get("name") or "unknown")
        mig = str(entry.get("mig_mode") or "").strip().lower()
        if mig in ("enabled", "true", "1"):
            excluded.append(f"GPU {entry.get('index', '?')} ({name}): MIG mode enabled")
            continue
        if entry.get("memory_total_mib") in (None, ""):
            raise PlanInputError(f"nvidia_gpu.gpus[{entry.get('index', '?')}] lacks memory_total_mib")
        usable.setdefault(name, []).append(entry)
    if not usable:
        raise PlanInputError(
            f"{_index_ranges([e.get('index') for e in selected])} in MIG mode: vLLM is planned on whole "
            "GPUs here; serve the model on the MIG instances (vllm_server_models[].mig: all, or a list of "
            "profiles/MIG UUIDs), disable MIG (nvidia-smi -i N -mig 0, then reset the GPU) or leave these "
            "GPUs out of the model's gpus (vllm_server_models[].gpus)"
        )
    if len(usable) > 1:
        kinds = "; ".join(
            f"{_index_ranges([e.get('index') for e in group])}: {name} "
            f"({min(_nonneg_int(e['memory_total_mib'], 'memory_total_mib') for e in group)} MiB)"
            for name, group in usable.items()
        )
        first = next(iter(usable.values()))
        raise PlanInputError(
            f"mixed GPU host ({kinds}): plan each model on one GPU model - set the model's gpus "
            f"(vllm_server_models[].gpus) to GPUs of one model, e.g. "
            f"{[e.get('index') for e in first]}"
        )
    name, chosen = next(iter(usable.items()))
    memory = min(_nonneg_int(g["memory_total_mib"], "nvidia_gpu.gpus[].memory_total_mib") for g in chosen)
    ccs = sorted({str(g.get("compute_capability") or "") for g in chosen} - {""})
    return {
        "name": name,
        "memory_mib": memory,
        "count": len(chosen),
        "compute_capability": ccs[0] if ccs else "8.0",
        "nodes": nodes,
        "shared": shared,
        "mixed": len(models) > 1,
        "models": models,
        "excluded": excluded,
    }


def gpu_spec_from_values(
    nvidia_gpu_facts: Any, nodes: Any = 1, shared: Any = False, gpus: Any = None
) -> dict[str, Any]:
    """:func:`gpu_spec_from_facts` given the values as a template passes them (filter vllm_fleet_gpu_spec):
    ``shared`` may be a string (``"true"``, ``"no"``, ...), ``nodes`` a number as text, at least 1."""
    if isinstance(shared, str):
        if shared.strip().lower() not in ("true", "yes", "1", "false", "no", "0", ""):
            raise ValueError(f"shared: expected a boolean, got {shared!r}")
        shared = shared.strip().lower() in ("true", "yes", "1")
    n = int(nodes)
    if n < 1:
        raise ValueError(f"nodes: must be >= 1, got {nodes!r}")
    return gpu_spec_from_facts(nvidia_gpu_facts, nodes=n, shared=bool(shared), gpus=gpus)
