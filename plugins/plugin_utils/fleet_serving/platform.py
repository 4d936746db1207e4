"""What a CPU build of vLLM refuses of the per-model features (#28), in vLLM's own words, before any container
changes.

Exports:
  problems(images, spec) -> list[str]
      one line per feature of one container ``spec`` (``sleep_level``, ``kv_offload``) that vLLM in its image
      would refuse; [] when the image may run them or cannot be told
  SLEEP_UNSUPPORTED, OFFLOAD_UNSUPPORTED, CUDA_LABEL

Measured on the lab's CPU build of vLLM 0.32.0 with the exact commands the role renders
(tests/lab/features_cpu.py; the logs in tests/data/vllm-logs):
* ``--enable-sleep-mode``: ModelConfig stops the start: "Sleep mode is not supported on current platform."
  (``Platform.is_sleep_mode_available``: CUDA, ROCm and XPU).
* ``--kv-offloading-backend native``: the engine starts the OffloadingConnector, whose CPUOffloadingSpec
  raises "CPU Offloading is currently only supported on CUDA-alike and XPU GPUs"
  (vllm/v1/kv_offload/cpu/spec.py).
* ngram speculation runs (its acceptance in vLLM's "SpecDecoding metrics" line): nothing to refuse.

Only an image that says it has no CUDA (the label ``io.vllm-fleet.cuda-version: none``, which the lab's image
carries) is judged here; one not on the host yet, or that says nothing, is left to vLLM, whose refusal at
start the role's diagnosis names (vllm_log).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

SLEEP_UNSUPPORTED = "Sleep mode is not supported on current platform."
OFFLOAD_UNSUPPORTED = "CPU Offloading is currently only supported on CUDA-alike and XPU GPUs"
# the lab image's label (tests/images/vllm-cpu/Dockerfile): a build of vLLM without CUDA
CUDA_LABEL = "io.vllm-fleet.cuda-version"


def _cpu_build(images: Sequence[Mapping[str, Any]] | None, image: str) -> bool:
    info = next((i for i in images or [] if image in (i.get("RepoTags") or []) or image == i.get("Id")), None)
    labels = ((info or {}).get("Config") or {}).get("Labels") or {}
    return str(labels.get(CUDA_LABEL, "")).lower() == "none"


def problems(images: Sequence[Mapping[str, Any]] | None, spec: Mapping[str, Any]) -> list[str]:
    """vLLM's refusals of ``spec``'s sleep mode and native KV tier when its image is a CPU build."""
    image = str(spec.get("image") or "")
    if not _cpu_build(images, image):
        return []
    var = f"vllm_server_models[{spec.get('name')}]"
    where = f"{image} is a CPU build of vLLM ({CUDA_LABEL}=none)"
    out = []
    if spec.get("sleep_level") in (1, 2):
        out.append(
            f"{var}.sleep: {SLEEP_UNSUPPORTED} (vLLM's sleep mode needs a CUDA or ROCm GPU; {where}): set "
            "sleep: false for this model or serve it from a CUDA image of vLLM"
        )
    offload = spec.get("kv_offload") or {}
    if isinstance(offload, Mapping) and offload.get("backend") == "native":
        out.append(
            f"{var}.kv_offload: {OFFLOAD_UNSUPPORTED} (vLLM's OffloadingConnector copies GPU blocks to host "
            f"RAM; {where}): set kv_offload: false for this model or serve it from a CUDA image of vLLM"
        )
    return out
