"""GPU product names as nvidia-smi prints them, and the compute capability each one has.

The planner reads more than the compute capability from the name: NVSwitch and NVLink multicast
(non_torch.hopper_nvswitch), the SM count (sampler.sm_count), the A100 exception of vLLM's scheduler
defaults. A name no driver prints (e.g. "NVIDIA H100 80GB", which is neither the SXM part's
"NVIDIA H100 80GB HBM3" nor "NVIDIA H100 PCIe") silently loses those terms, so names are checked here
against the names drivers print (`nvidia-smi --query-gpu=name`; NVIDIA's CUDA GPU list for the
capabilities; the same products as plugins/module_utils/nvidia_smi.py PRODUCT_TABLE).
"""

from __future__ import annotations

import difflib
import re
from functools import lru_cache

from .errors import PlanInputError

# (name as nvidia-smi prints it, compute capability)
KNOWN_GPUS: tuple[tuple[str, str], ...] = (
    # Blackwell
    ("NVIDIA B200", "10.0"),
    ("NVIDIA GB200", "10.0"),
    ("NVIDIA B300 SXM6 AC", "10.3"),
    ("NVIDIA GB300", "10.3"),
    ("NVIDIA GB10", "12.1"),
    ("NVIDIA RTX PRO 6000 Blackwell Server Edition", "12.0"),
    ("NVIDIA RTX PRO 6000 Blackwell Workstation Edition", "12.0"),
    ("NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition", "12.0"),
    ("NVIDIA GeForce RTX 5090", "12.0"),
    ("NVIDIA GeForce RTX 5080", "12.0"),
    # Hopper
    ("NVIDIA H100 80GB HBM3", "9.0"),
    ("NVIDIA H100 PCIe", "9.0"),
    ("NVIDIA H100 NVL", "9.0"),
    ("NVIDIA H200", "9.0"),
    ("NVIDIA H200 NVL", "9.0"),
    ("NVIDIA H800", "9.0"),
    ("NVIDIA H800 PCIe", "9.0"),
    ("NVIDIA H20", "9.0"),
    ("NVIDIA GH200 480GB", "9.0"),
    ("NVIDIA GH200 144G HBM3e", "9.0"),
    # Ada Lovelace
    ("NVIDIA L40S", "8.9"),
    ("NVIDIA L40", "8.9"),
    ("NVIDIA L4", "8.9"),
    ("NVIDIA L20", "8.9"),
    ("NVIDIA RTX 6000 Ada Generation", "8.9"),
    ("NVIDIA RTX 5000 Ada Generation", "8.9"),
    ("NVIDIA RTX 4000 Ada Generation", "8.9"),
    ("NVIDIA GeForce RTX 4090", "8.9"),
    ("NVIDIA GeForce RTX 4080", "8.9"),
    ("NVIDIA GeForce RTX 4080 SUPER", "8.9"),
    ("NVIDIA GeForce RTX 4070 Ti", "8.9"),
    ("NVIDIA GeForce RTX 4060 Ti", "8.9"),
    ("NVIDIA GeForce RTX 4060", "8.9"),
    # Ampere
    ("NVIDIA A100-SXM4-80GB", "8.0"),
    ("NVIDIA A100-SXM4-40GB", "8.0"),
    ("NVIDIA A100 80GB PCIe", "8.0"),
    ("NVIDIA A100-PCIE-40GB", "8.0"),
    ("NVIDIA A800-SXM4-80GB", "8.0"),
    ("NVIDIA A800 80GB PCIe", "8.0"),
    ("NVIDIA A30", "8.0"),
    ("NVIDIA A40", "8.6"),
    ("NVIDIA A10", "8.6"),
    ("NVIDIA A10G", "8.6"),
    ("NVIDIA A16", "8.6"),
    ("NVIDIA A2", "8.6"),
    ("NVIDIA RTX A6000", "8.6"),
    ("NVIDIA RTX A5500", "8.6"),
    ("NVIDIA RTX A5000", "8.6"),
    ("NVIDIA RTX A4000", "8.6"),
    ("NVIDIA GeForce RTX 3090 Ti", "8.6"),
    ("NVIDIA GeForce RTX 3090", "8.6"),
    ("NVIDIA GeForce RTX 3080 Ti", "8.6"),
    ("NVIDIA GeForce RTX 3080", "8.6"),
    ("NVIDIA GeForce RTX 3070", "8.6"),
    ("NVIDIA GeForce RTX 3060 Ti", "8.6"),
    ("NVIDIA GeForce RTX 3060", "8.6"),
    # Turing
    ("Tesla T4", "7.5"),
    ("Quadro RTX 8000", "7.5"),
    ("Quadro RTX 6000", "7.5"),
    ("NVIDIA TITAN RTX", "7.5"),
    ("NVIDIA GeForce RTX 2080 Ti", "7.5"),
    ("NVIDIA GeForce RTX 2060", "7.5"),
    # Volta / Pascal (below vLLM's platform minimum or at it: kept so the refusal names the GPU)
    ("Tesla V100-SXM2-16GB", "7.0"),
    ("Tesla V100-SXM2-32GB", "7.0"),
    ("Tesla V100-PCIE-16GB", "7.0"),
    ("Tesla V100-PCIE-32GB", "7.0"),
    ("Tesla V100S-PCIE-32GB", "7.0"),
    ("Tesla P100-PCIE-16GB", "6.0"),
    ("Tesla P40", "6.1"),
    ("Quadro P4000", "6.1"),
)
# What the CLI and an unset name read as: no name given.
NO_NAME = ("", "unknown")
_PREFIXES = ("nvidia ", "tesla ", "quadro ")
_SIZE = re.compile(r"^\d+g[b]?$")


def _key(name: str) -> str:
    return " ".join(name.split()).casefold()


def _strip_prefix(key: str) -> str:
    for prefix in _PREFIXES:
        if key.startswith(prefix):
            return key[len(prefix) :]
    return key


def _index() -> dict[str, tuple[str, str]]:
    """Normalized name (with and without its vendor prefix) -> (printed name, capability)."""
    out: dict[str, tuple[str, str]] = {}
    for printed, cc in KNOWN_GPUS:
        key = _key(printed)
        out[key] = (printed, cc)
        out.setdefault(_strip_prefix(key), (printed, cc))
    return out


_INDEX = _index()


def known_gpu(name: str) -> tuple[str, str] | None:
    """(the name as nvidia-smi prints it, its compute capability) for a known name, else None."""
    return _INDEX.get(_key(name))


def _model_words(key: str) -> set[str]:
    """Words holding a digit that are not a memory size: the model number."""
    return {w for w in key.replace("-", " ").split() if any(c.isdigit() for c in w) and not _SIZE.match(w)}


@lru_cache(maxsize=256)
def closest_names(name: str, n: int = 3) -> tuple[str, ...]:
    """The known printed names that come closest to ``name`` (by spelling)."""
    key = _strip_prefix(_key(name))
    pool = {_strip_prefix(_key(p)): p for p, _cc in KNOWN_GPUS}
    # the model number decides: prefer known names sharing it ("h100", "4090") with the name
    words = _model_words(key)
    sharing = [k for k in pool if words & _model_words(k)]
    close = difflib.get_close_matches(key, sharing or list(pool), n=n, cutoff=0.0 if sharing else 0.6)
    return tuple(pool[k] for k in close)


def _names_text(names: tuple[str, ...]) -> str:
    return ", ".join(repr(n) for n in names) if names else "none close"


def resolve_capability(name: str, given: str | None) -> tuple[str, tuple[str, ...]]:
    """(compute capability to plan with, loud warnings) from gpu.name and gpu.compute_capability.

    Raises PlanInputError where the capability cannot be told: a name no driver prints, and none given.
    """
    has_name = _key(name) not in NO_NAME
    known = known_gpu(name) if has_name else None
    if given is None:
        if known is not None:
            return known[1], ()
        if not has_name:
            return "8.0", (
                "GPU UNKNOWN: neither gpu.name (--gpu-name) nor gpu.compute_capability "
                "(--compute-capability) "
                "was given; planned as compute capability 8.0 (an A100), which decides bfloat16, FP8, the "
                "quantization kernels and the attention backend. Fix: pass --gpu-name as `nvidia-smi "
                "--query-gpu=name --format=csv,noheader` prints it, or --compute-capability",
            )
        raise PlanInputError(
            f"gpu.name: {name!r} (--gpu-name) is not a GPU name nvidia-smi prints, so its compute capability "
            f"cannot be told and the planner's board-dependent terms (NVSwitch, SM count) would be lost. "
            f"Closest known names: {_names_text(closest_names(name))}. Fix: pass --gpu-name exactly as "
            "`nvidia-smi --query-gpu=name --format=csv,noheader` prints it, or give --compute-capability "
            "(nvidia-smi --query-gpu=compute_cap) too."
        )
    if known is not None and known[1] != given:
        # the capability given wins (nvidia-smi measured it); the name's other terms may not fit it
        return given, (
            f"GPU NAME AND CAPABILITY DISAGREE: gpu.compute_capability {given} (--compute-capability) is "
            f"not that of gpu.name {name!r} (--gpu-name), which is {known[1]}; planned as {given}. Fix: pass "
            "the pair `nvidia-smi --query-gpu=name,compute_cap --format=csv,noheader` prints, or leave "
            "--compute-capability out",
        )
    if has_name and known is None:
        close = closest_names(name)
        if close:  # it looks like a known GPU, spelled as no driver prints it
            return given, (
                f"GPU NAME NOT RECOGNIZED: gpu.name {name!r} (--gpu-name) is not a name nvidia-smi prints; "
                f"closest known: {_names_text(close)}. Terms that depend on the board (NVSwitch and NVLink "
                "multicast buffers, the SM count) are planned as for an unknown GPU. Fix: pass --gpu-name "
                "exactly as `nvidia-smi --query-gpu=name --format=csv,noheader` prints it",
            )
    return given, ()
