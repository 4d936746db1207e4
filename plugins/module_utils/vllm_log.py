"""Read what vLLM prints at startup: KV-cache capacity, and why a start failed.

Inputs are the text of ``docker logs`` (all starts of a container, oldest first);
functions report on the most recent start.
"""

from __future__ import annotations

import re
from typing import Any

_NUM = r"[\d,]+"

# 0.28+: "GPU KV cache size: 65,536 tokens, Maximum concurrency for 512 tokens per request: 128.00x"
# older: the same two facts on two lines. The device word is "GPU", "CPU", "XPU", ...
_KV_SIZE = re.compile(rf"(?P<device>[A-Za-z]+(?: \+ host)?) KV cache size: (?P<tokens>{_NUM}) tokens")
_CONCURRENCY = re.compile(
    rf"Maximum concurrency for (?P<length>{_NUM}) tokens per request: (?P<factor>[\d.,]+)x"
)
_AVAILABLE_GIB = re.compile(r"Available KV cache memory: (?P<gib>[\d.]+) GiB")
_EXPLICIT_GIB = re.compile(r"Explicitly set \((?P<gib>[\d.]+)/[\d.]+\) GiB for KV cache")
_MAX_MODEL_LEN = re.compile(rf"Using max model len (?P<length>{_NUM})")
_AUTO_FIT = re.compile(rf"--max-model-len auto reduced max_model_len from (?P<old>{_NUM}) to (?P<new>{_NUM})")
_WEIGHTS = re.compile(r"Model loading took (?P<gib>[\d.]+) GiB(?: memory)? and (?P<seconds>[\d.]+) seconds")
# Printed once per start, near its beginning, by the API server (newest first): the boundary
# between starts when `docker logs` holds several of them.
_START_MARKERS = (
    re.compile(r"non-default args: "),
    re.compile(r"vLLM API server version "),
    re.compile(r"Initializing a V1 LLM engine"),
)


def _int(text: str) -> int:
    return int(text.replace(",", ""))


def _float(text: str) -> float:
    return float(text.replace(",", ""))


def last_start(text: str) -> str:
    """The part of ``text`` written by the most recent vLLM start (all of it when no marker is found)."""
    for marker in _START_MARKERS:
        found = list(marker.finditer(text))
        if found:
            return text[text.rfind("\n", 0, found[-1].start()) + 1 :]
    return text


def parse_kv_cache(text: str) -> dict[str, Any]:
    """KV-cache figures of the most recent start, or ``{}`` when vLLM has not printed them (yet).

    Keys (present when found): ``device``, ``kv_cache_tokens``, ``max_concurrency``,
    ``concurrency_tokens_per_request``, ``kv_cache_gib``, ``max_model_len``,
    ``auto_fit_max_model_len_from``, ``weights_gib``, ``weights_load_seconds``.
    """
    text = last_start(text or "")
    result: dict[str, Any] = {}
    sizes = list(_KV_SIZE.finditer(text))
    if not sizes:
        return {}
    size = sizes[-1]
    result["device"] = size.group("device")
    result["kv_cache_tokens"] = _int(size.group("tokens"))
    concurrency = list(_CONCURRENCY.finditer(text))
    if concurrency:
        result["concurrency_tokens_per_request"] = _int(concurrency[-1].group("length"))
        result["max_concurrency"] = _float(concurrency[-1].group("factor"))
    for pattern in (_AVAILABLE_GIB, _EXPLICIT_GIB):
        found = list(pattern.finditer(text))
        if found:
            result["kv_cache_gib"] = float(found[-1].group("gib"))
            break
    length = list(_MAX_MODEL_LEN.finditer(text))
    if length:
        result["max_model_len"] = _int(length[-1].group("length"))
    auto = list(_AUTO_FIT.finditer(text))
    if auto:
        result["auto_fit_max_model_len_from"] = _int(auto[-1].group("old"))
        result["max_model_len"] = _int(auto[-1].group("new"))
    weights = list(_WEIGHTS.finditer(text))
    if weights:
        result["weights_gib"] = float(weights[-1].group("gib"))
        result["weights_load_seconds"] = float(weights[-1].group("seconds"))
    return result


def plan_vs_actual(plan: dict[str, Any], actual: dict[str, Any]) -> dict[str, Any]:
    """Planned and measured KV-cache figures side by side, with the relative error of the plan.

    ``error_pct`` = (planned - actual) / actual * 100: positive when the plan over-predicted.
    """
    out: dict[str, Any] = {}
    for key in ("kv_cache_tokens", "max_concurrency", "max_model_len"):
        planned = plan.get(key)
        measured = actual.get(key)
        if planned is None and measured is None:
            continue
        entry: dict[str, Any] = {"planned": planned, "actual": measured}
        if isinstance(planned, (int, float)) and isinstance(measured, (int, float)) and measured:
            entry["error_pct"] = round((planned - measured) / measured * 100.0, 2)
        out[key] = entry
    return out


# (code, pattern, explanation with the fix). Ordered: the first match of the most specific wins.
_FAILURES: list[tuple[str, re.Pattern[str], str]] = [
    (
        "kv_cache_too_small",
        re.compile(
            r"To serve at least one request with the models?'s max seq len \((?P<len>\d+)\), "
            r"\((?P<need>[\d.]+) GiB KV cache is needed, which is larger than the available KV cache memory "
            r"\((?P<have>[\d.]+) GiB\)\.\s*(?:Based on the available memory, the estimated maximum model "
            r"length is (?P<est>\d+)\.)?"
        ),
        "max_model_len {len} needs {need} GiB of KV cache but only {have} GiB is left after the weights"
        "{est_text}. Fix: lower overrides.max_model_len (or vllm_server_plan_options.target_context_len), "
        "raise overrides.gpu_memory_utilization, or give the model more GPUs "
        "(overrides.tensor_parallel_size).",
    ),
    (
        "kv_cache_too_small",
        re.compile(
            r"The model's max seq len \((?P<len>\d+)\) is larger than the maximum number of tokens that can "
            r"be stored in KV cache \((?P<have>\d+)\)"
        ),
        "max_model_len {len} does not fit in the KV cache ({have} tokens). "
        "Fix: lower overrides.max_model_len "
        "or raise overrides.gpu_memory_utilization.",
    ),
    (
        "no_kv_cache_memory",
        re.compile(r"No available memory for the cache blocks"),
        "the weights and activations leave no memory for the KV cache. Fix: raise "
        "overrides.gpu_memory_utilization, use more GPUs (overrides.tensor_parallel_size) "
        "or a quantized model.",
    ),
    (
        "out_of_memory",
        re.compile(r"CUDA out of memory|torch\.OutOfMemoryError|OutOfMemoryError: CUDA"),
        "the GPU ran out of memory during startup. Fix: lower overrides.max_num_seqs or "
        "overrides.gpu_memory_utilization, or check that no other process uses these GPUs (nvidia-smi).",
    ),
    (
        "shm_too_small",
        re.compile(r"Insufficient space in /dev/shm"),
        "/dev/shm is too small. Fix: set vllm_server_ipc_mode: host, or raise vllm_server_shm_size.",
    ),
    (
        "tensor_parallel_heads",
        re.compile(
            r"Total number of attention heads \((?P<heads>\d+)\) must be divisible by tensor parallel "
            r"size \((?P<tp>\d+)\)"
        ),
        "{heads} attention heads cannot be split over tensor_parallel_size {tp}. Fix: set "
        "overrides.tensor_parallel_size to a divisor of {heads}.",
    ),
    (
        "cpu_memory",
        re.compile(r"is less than desired CPU memory utilization"),
        "the CPU backend wants gpu_memory_utilization of host RAM. Fix: set a fixed KV cache size in "
        "vllm_server_models[].overrides.kv_cache_memory_bytes (e.g. 1G).",
    ),
    (
        # vLLM's ModelConfig: --enable-sleep-mode off CUDA/ROCm (the lab's CPU build of 0.32.0 says this)
        "sleep_unsupported",
        re.compile(r"Sleep mode is not supported on current platform"),
        "vLLM's sleep mode runs on CUDA and ROCm GPUs only and this image's vLLM is built for another "
        "platform (a CPU build?). Fix: set vllm_server_models[].sleep: false for this model, or serve it "
        "from a CUDA image of vLLM.",
    ),
    (
        # vLLM's CPUOffloadingSpec (vllm/v1/kv_offload/cpu/spec.py): the native KV tier in host RAM off a GPU
        "kv_offload_unsupported",
        re.compile(r"CPU Offloading is currently only supported on CUDA-alike and XPU GPUs"),
        "vLLM's native KV tier in host RAM runs on CUDA-alike and XPU GPUs only and this image's vLLM is "
        "built for another platform (a CPU build?). Fix: set vllm_server_models[].kv_offload: false for this "
        "model, or serve it from a CUDA image of vLLM.",
    ),
    (
        "bad_arguments",
        re.compile(r"(?:vllm serve|vllm|api_server\.py): error: (?P<detail>.+)"),
        "vLLM rejected its arguments ({detail}). Fix: check vllm_server_models[].extra_args and overrides "
        "against this vLLM version (vllm_server_image).",
    ),
    (
        "driver_mismatch",
        re.compile(
            r"CUDA driver version is insufficient|forward compatibility was attempted|"
            r"Error 803|Error 804|unsatisfied condition: cuda>="
        ),
        "the image's CUDA needs a newer NVIDIA driver than the host has. Fix: upgrade the driver "
        "(nvidia_driver role) or pick a vllm_server_image built for this driver.",
    ),
    (
        "no_gpu",
        re.compile(
            r"Failed to infer device type|No CUDA GPUs are available|"
            r"could not select device driver .* with capabilities: \[\[gpu\]\]"
        ),
        "the container sees no GPU. Fix: install the NVIDIA container toolkit and keep "
        "vllm_server_gpu_requests: true.",
    ),
    (
        "model_missing",
        re.compile(
            r"does not appear to have a file named config\.json|Repo id must be|"
            r"Invalid repository ID or local directory|No such file or directory: '(?P<path>[^']+)'"
        ),
        "vLLM cannot read the model directory. Fix: check vllm_server_models[].path "
        "(run playbooks/weights.yml "
        "first) and that it is readable on the host.",
    ),
    (
        "address_not_local",
        re.compile(r"Cannot assign requested address"),
        "vLLM cannot listen on vllm_server_listen_address: it is not an address of this host (or of the "
        "container named in vllm_server_network_mode). Fix: set vllm_fleet_internal_address for the host.",
    ),
    (
        "port_in_use",
        re.compile(r"Address already in use|address already in use"),
        "the port is already in use on this host. Fix: give vllm_server_models[].port a free port.",
    ),
]

_ERROR_LINE = re.compile(r"^(?:\S+: )?(?:[A-Za-z_.]+(?:Error|Exception)|RuntimeError|ValueError)\b.*$", re.M)


def diagnose_failure(text: str) -> dict[str, str]:
    """Explain why the most recent vLLM start failed: ``{code, message, line}``.

    ``code`` is ``unknown`` (and ``message`` the last error line, if any) when no
    known pattern matches.
    """
    text = last_start(text or "")
    for code, pattern, template in _FAILURES:
        matches = list(pattern.finditer(text))
        if not matches:
            continue
        found = matches[-1]
        fields = {k: (v or "") for k, v in found.groupdict().items()}
        fields["est_text"] = (
            f"; vLLM estimates that max_model_len {fields['est']} would fit" if fields.get("est") else ""
        )
        line_start = text.rfind("\n", 0, found.start()) + 1
        line_end = text.find("\n", found.end())
        line = text[line_start : line_end if line_end != -1 else len(text)].strip()
        return {"code": code, "message": template.format(**fields), "line": line}
    errors = _ERROR_LINE.findall(text)
    last = errors[-1].strip() if errors else ""
    return {"code": "unknown", "message": last or "no known error in the log", "line": last}


def demux_docker_logs(data: bytes) -> str:
    """Text of a ``GET /containers/{id}/logs`` body.

    Containers without a TTY answer with frames (8-byte header: stream, 3 zero bytes,
    big-endian length); with a TTY the body is the raw text.
    """
    out: list[bytes] = []
    pos = 0
    size = len(data)
    framed = size >= 8 and data[0] in (0, 1, 2) and data[1:4] == b"\x00\x00\x00"
    if not framed:
        return data.decode("utf-8", "replace")
    while pos + 8 <= size:
        if data[pos] not in (0, 1, 2) or data[pos + 1 : pos + 4] != b"\x00\x00\x00":
            out.append(data[pos:])
            break
        length = int.from_bytes(data[pos + 4 : pos + 8], "big")
        out.append(data[pos + 8 : pos + 8 + length])
        pos += 8 + length
    return b"".join(out).decode("utf-8", "replace")
