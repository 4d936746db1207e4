"""vLLM startup log parsing: KV-cache figures, start boundaries, failure diagnosis, Docker log frames."""

from __future__ import annotations

from pathlib import Path

import pytest
from ansible_collections.vllm_fleet.vllm_fleet.plugins.module_utils import vllm_log

DATA = Path(__file__).resolve().parents[4] / "data" / "vllm-logs"
CPU_LOG = (DATA / "cpu-0.32.0-tiny.log").read_text()

GPU_ONE_LINE = (
    "(EngineCore_DP0 pid=300) INFO 11-20 10:00:00 [gpu_worker.py:298] Available KV cache memory: 56.12 GiB\n"
    "(EngineCore_DP0 pid=300) INFO 11-20 10:00:01 [kv_cache_utils.py:1087] "
    "GPU KV cache size: 1,838,912 tokens, "
    "Maximum concurrency for 131,072 tokens per request: 14.03x\n"
)
GPU_TWO_LINES = (
    "INFO 03-01 10:00:00 [default_loader.py:262] Model loading took 14.99 GiB and 5.21 seconds\n"
    "INFO 03-01 10:00:01 [kv_cache_utils.py:634] GPU KV cache size: 456,768 tokens\n"
    "INFO 03-01 10:00:01 [kv_cache_utils.py:637] Maximum concurrency for 32,768 tokens per request: 13.94x\n"
)
GPU_WEIGHTS_MEMORY = "INFO [gpu_model_runner.py:1] Model loading took 15.0 GiB memory and 12.5 seconds\n"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            CPU_LOG,
            {
                "device": "CPU",
                "kv_cache_tokens": 65536,
                "max_concurrency": 128.0,
                "concurrency_tokens_per_request": 512,
                "kv_cache_gib": 0.06,
                "max_model_len": 512,
            },
        ),
        (
            GPU_ONE_LINE,
            {
                "device": "GPU",
                "kv_cache_tokens": 1838912,
                "max_concurrency": 14.03,
                "concurrency_tokens_per_request": 131072,
                "kv_cache_gib": 56.12,
            },
        ),
        (
            GPU_TWO_LINES + GPU_WEIGHTS_MEMORY,
            {
                "device": "GPU",
                "kv_cache_tokens": 456768,
                "max_concurrency": 13.94,
                "concurrency_tokens_per_request": 32768,
                "weights_gib": 15.0,
                "weights_load_seconds": 12.5,
            },
        ),
        (
            "INFO --max-model-len auto reduced max_model_len from 131,072 to 40,960 (KV cache)\n"
            + GPU_ONE_LINE,
            {
                "device": "GPU",
                "kv_cache_tokens": 1838912,
                "max_concurrency": 14.03,
                "concurrency_tokens_per_request": 131072,
                "kv_cache_gib": 56.12,
                "max_model_len": 40960,
                "auto_fit_max_model_len_from": 131072,
            },
        ),
        ("INFO starting\nINFO loading weights\n", {}),
        ("", {}),
    ],
)
def test_parse_kv_cache(text: str, expected: dict) -> None:
    assert vllm_log.parse_kv_cache(text) == expected


def test_parse_kv_cache_reports_the_latest_start_only() -> None:
    first = CPU_LOG
    second = CPU_LOG.replace("65,536 tokens", "131,072 tokens").replace("128.00x", "256.00x")
    assert vllm_log.parse_kv_cache(first + second)["kv_cache_tokens"] == 131072
    # a restart that has not reached the KV lines yet: nothing from the older start is reported
    restarting = first + "(APIServer pid=1) INFO [api_utils.py:286] non-default args: {'model': '/m'}\n"
    assert vllm_log.parse_kv_cache(restarting) == {}


def test_last_start_without_markers_is_everything() -> None:
    assert vllm_log.last_start("a\nb\n") == "a\nb\n"


@pytest.mark.parametrize(
    ("plan", "actual", "expected"),
    [
        (
            {"kv_cache_tokens": 110000, "max_concurrency": 2.0},
            {"kv_cache_tokens": 100000, "max_concurrency": 2.5},
            {
                "kv_cache_tokens": {"planned": 110000, "actual": 100000, "error_pct": 10.0},
                "max_concurrency": {"planned": 2.0, "actual": 2.5, "error_pct": -20.0},
            },
        ),
        ({"kv_cache_tokens": 5}, {}, {"kv_cache_tokens": {"planned": 5, "actual": None}}),
        ({}, {}, {}),
    ],
)
def test_plan_vs_actual(plan: dict, actual: dict, expected: dict) -> None:
    assert vllm_log.plan_vs_actual(plan, actual) == expected


@pytest.mark.parametrize(
    ("line", "code", "needle"),
    [
        (
            "ValueError: To serve at least one request with the model's max seq len (131072), "
            "(16.0 GiB KV cache "
            "is needed, which is larger than the available KV cache memory (9.5 GiB). Based on the available "
            "memory, the estimated maximum model length is 77824. Try increasing `gpu_memory_utilization`",
            "kv_cache_too_small",
            "max_model_len 77824 would fit",
        ),
        (
            "ValueError: To serve at least one request with the models's max seq len (4096), "
            "(2.0 GiB KV cache is "
            "needed, which is larger than the available KV cache memory (1.0 GiB). Try increasing",
            "kv_cache_too_small",
            "overrides.max_model_len",
        ),
        (
            "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization`",
            "no_kv_cache_memory",
            "overrides.gpu_memory_utilization",
        ),
        (
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
            "out_of_memory",
            "max_num_seqs",
        ),
        (
            "RuntimeError: Insufficient space in /dev/shm for shared-memory allocation: 160 MiB required",
            "shm_too_small",
            "vllm_server_ipc_mode",
        ),
        (
            "ValueError: Total number of attention heads (28) must be divisible by tensor parallel size (8).",
            "tensor_parallel_heads",
            "a divisor of 28",
        ),
        (
            "vllm serve: error: unrecognized arguments: --frobnicate",
            "bad_arguments",
            "unrecognized arguments: --frobnicate",
        ),
        (
            "RuntimeError: Unexpected error from cudaGetDeviceCount(). "
            "Error 803: system has unsupported display "
            "driver / cuda driver combination",
            "driver_mismatch",
            "driver",
        ),
        (
            "OSError: /srv/models/x does not appear to have a file named config.json.",
            "model_missing",
            "vllm_server_models[].path",
        ),
        (
            "OSError: [Errno 98] error while attempting to bind: address already in use",
            "port_in_use",
            ".port",
        ),
        (
            "OSError: [Errno 99] Cannot assign requested address",
            "address_not_local",
            "vllm_fleet_internal_address",
        ),
        ("KeyError: 'something odd'", "unknown", "KeyError: 'something odd'"),
    ],
)
def test_diagnose_failure(line: str, code: str, needle: str) -> None:
    result = vllm_log.diagnose_failure("INFO starting\n" + line + "\nINFO exiting\n")
    assert result["code"] == code
    assert needle in result["message"]
    if code != "unknown":
        assert result["line"] == line.strip()


def test_diagnose_failure_of_a_healthy_log_is_unknown() -> None:
    assert vllm_log.diagnose_failure(CPU_LOG)["code"] == "unknown"


def _frame(stream: int, text: str) -> bytes:
    payload = text.encode()
    return bytes([stream, 0, 0, 0]) + len(payload).to_bytes(4, "big") + payload


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (_frame(1, "out line\n") + _frame(2, "err line\n"), "out line\nerr line\n"),
        (_frame(2, "x" * 300), "x" * 300),
        (b"plain tty text\n", "plain tty text\n"),
        (b"", ""),
        (_frame(1, "ok\n") + b"\x09garbage", "ok\n\tgarbage"),
    ],
)
def test_demux_docker_logs(data: bytes, expected: str) -> None:
    assert vllm_log.demux_docker_logs(data) == expected


@pytest.mark.parametrize(
    ("log", "code", "setting", "line"),
    [
        ("cpu-0.32.0-tiny-sleep-mode.log", "sleep_unsupported", "sleep: false",
         "Sleep mode is not supported on current platform."),
        ("cpu-0.32.0-tiny-kv-offload.log", "kv_offload_unsupported", "kv_offload: false",
         "CPU Offloading is currently only supported on CUDA-alike and XPU GPUs"),
    ],
)  # fmt: skip
def test_diagnose_failure_of_a_feature_the_cpu_build_refuses(
    log: str, code: str, setting: str, line: str
) -> None:
    """The lab's CPU build refusing a feature the role rendered (tests/lab/features_cpu.py, the whole log)."""
    result = vllm_log.diagnose_failure((DATA / log).read_text())
    assert result["code"] == code
    assert setting in result["message"]
    assert line in result["line"]
