"""KV-cache figures from vLLM's vllm:cache_config_info metric, the startup log as fallback."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from ansible_collections.vllm_fleet.vllm_fleet.plugins.module_utils import vllm_log
from ansible_collections.vllm_fleet.vllm_fleet.plugins.module_utils.vllm_cache_config import (
    cache_config_labels,
    kv_cache_figures,
    kv_cache_from_metrics,
)
from prometheus_client.parser import text_string_to_metric_families

DATA = Path(__file__).resolve().parents[4] / "data"
# GET /metrics of the lab's CPU vLLM 0.32.0 (tests/data/monitoring/SOURCE.md)
METRICS = (DATA / "monitoring" / "vllm-0.32.0-cpu.metrics").read_text()
CPU_LOG = (DATA / "vllm-logs" / "cpu-0.32.0-tiny.log").read_text()


def _without(text: str, *labels: str) -> str:
    for label in labels:
        text = re.sub(rf'{label}="[^"]*",?', "", text)
    return text


def test_labels_read_as_prometheus_client_reads_them() -> None:
    expected = next(
        dict(sample.labels)
        for family in text_string_to_metric_families(METRICS)
        for sample in family.samples
        if sample.name == "vllm:cache_config_info"
    )
    assert cache_config_labels(METRICS) == expected
    assert expected["num_gpu_blocks"] == "512"


def test_figures_of_the_032_cpu_build() -> None:
    assert kv_cache_from_metrics(METRICS) == {
        "kv_cache_tokens": 65536,
        "max_concurrency": 128.0,
        "num_gpu_blocks": 512,
        "block_size": 128,
        "kv_cache_gib": 0.06,
        "gpu_memory_utilization": 0.92,
        "enable_prefix_caching": True,
        "cache_dtype": "auto",
    }


def test_older_releases_without_the_token_count_multiply_blocks_by_block_size() -> None:
    older = _without(METRICS, "kv_cache_size_tokens", "kv_cache_max_concurrency", "kv_cache_memory_bytes")
    figures = kv_cache_from_metrics(older)
    assert figures["kv_cache_tokens"] == 512 * 128
    assert "max_concurrency" not in figures and "kv_cache_gib" not in figures


@pytest.mark.parametrize(
    "text",
    [
        "",
        re.sub(r"^vllm:cache_config_info.*$", "", METRICS, flags=re.M),
        # an engine that has not sized its cache yet
        METRICS.replace('num_gpu_blocks="512"', 'num_gpu_blocks="None"').replace(
            'kv_cache_size_tokens="65536"', 'kv_cache_size_tokens="None"'
        ),
    ],
)
def test_no_figures_without_a_sized_cache(text: str) -> None:
    assert kv_cache_from_metrics(text) == {}


def test_escaped_label_values() -> None:
    line = 'vllm:cache_config_info{block_size="16",cache_dtype="a\\"b\\\\c",num_gpu_blocks="10"} 1.0\n'
    assert cache_config_labels(line)["cache_dtype"] == 'a"b\\c'
    assert kv_cache_from_metrics(line)["kv_cache_tokens"] == 160


def test_the_metric_wins_over_the_log_which_fills_the_rest() -> None:
    log = vllm_log.parse_kv_cache(CPU_LOG)
    lying_log = {**log, "kv_cache_tokens": 1, "max_concurrency": 0.5}
    figures = kv_cache_figures(METRICS, lying_log)
    assert figures["source"] == "metrics"
    assert figures["kv_cache_tokens"] == 65536 and figures["max_concurrency"] == 128.0
    assert figures["device"] == "CPU" and figures["max_model_len"] == 512


def test_the_log_when_the_version_has_no_metric() -> None:
    log = vllm_log.parse_kv_cache(CPU_LOG)
    assert kv_cache_figures("", log) == {**log, "source": "log"}
    assert kv_cache_figures("", {}) == {}


def test_plan_vs_actual_on_the_metric_figures() -> None:
    actual = kv_cache_figures(METRICS, vllm_log.parse_kv_cache(CPU_LOG))
    report = vllm_log.plan_vs_actual({"kv_cache_tokens": 70000, "max_concurrency": 128.0}, actual)
    assert report["kv_cache_tokens"] == {"planned": 70000, "actual": 65536, "error_pct": 6.81}
    assert report["max_concurrency"]["error_pct"] == 0.0
