"""vLLM's KV-cache figures from its ``vllm:cache_config_info`` metric (``GET /metrics``).

The info metric carries the engine's CacheConfig as labels (``num_gpu_blocks``, ``block_size``,
and from 0.2x ``kv_cache_size_tokens``, ``kv_cache_max_concurrency``); it is read in place of the
startup log where the version exposes it. Runs on the serving host inside a module, where
prometheus_client is not installed: this reads the one sample line of the text format it needs.
"""

from __future__ import annotations

import re
from typing import Any

METRIC = "vllm:cache_config_info"
_SAMPLE = re.compile(r"^vllm:cache_config_info\{(?P<labels>.*)\}\s+\S+", re.M)
_LABEL = re.compile(r'\s*(?P<name>[A-Za-z_][A-Za-z0-9_]*)="(?P<value>(?:[^"\\]|\\.)*)"\s*(?:,|$)')
_ESCAPES = {"\\\\": "\\", '\\"': '"', "\\n": "\n"}


def cache_config_labels(text: str) -> dict[str, str]:
    """The labels of the first ``vllm:cache_config_info`` sample of a scrape, ``{}`` when absent."""
    found = _SAMPLE.search(text or "")
    if not found:
        return {}
    labels: dict[str, str] = {}
    for label in _LABEL.finditer(found.group("labels")):
        value = re.sub(r"\\[\\\"n]", lambda m: _ESCAPES[m.group(0)], label.group("value"))
        labels[label.group("name")] = value
    return labels


def _number(labels: dict[str, str], name: str) -> float | None:
    try:
        value = float(labels.get(name, ""))
    except ValueError:  # "None" until the engine has sized the cache, or an older release's gap
        return None
    return value if value >= 0 else None


def kv_cache_from_metrics(text: str) -> dict[str, Any]:
    """KV-cache figures of ``vllm:cache_config_info``, with the names :func:`vllm_log.parse_kv_cache` uses.

    Keys (present when the labels give them): ``kv_cache_tokens`` (``kv_cache_size_tokens``, else
    ``num_gpu_blocks`` x ``block_size``), ``max_concurrency``, ``num_gpu_blocks``, ``block_size``,
    ``kv_cache_gib`` (an explicit ``kv_cache_memory_bytes``), ``gpu_memory_utilization``,
    ``enable_prefix_caching``, ``cache_dtype``; ``{}`` when the metric is absent or the cache unsized.
    """
    labels = cache_config_labels(text)
    blocks, block_size = _number(labels, "num_gpu_blocks"), _number(labels, "block_size")
    tokens = _number(labels, "kv_cache_size_tokens")
    if tokens is None and blocks is not None and block_size is not None:
        tokens = blocks * block_size
    if tokens is None:
        return {}
    result: dict[str, Any] = {"kv_cache_tokens": int(tokens)}
    concurrency = _number(labels, "kv_cache_max_concurrency")
    if concurrency is not None:
        result["max_concurrency"] = concurrency
    if blocks is not None:
        result["num_gpu_blocks"] = int(blocks)
    if block_size is not None:
        result["block_size"] = int(block_size)
    memory = _number(labels, "kv_cache_memory_bytes")
    if memory is not None:
        result["kv_cache_gib"] = round(memory / 2**30, 2)
    utilization = _number(labels, "gpu_memory_utilization")
    if utilization is not None:
        result["gpu_memory_utilization"] = utilization
    if labels.get("enable_prefix_caching") in ("True", "False"):
        result["enable_prefix_caching"] = labels["enable_prefix_caching"] == "True"
    if labels.get("cache_dtype"):
        result["cache_dtype"] = labels["cache_dtype"]
    return result


def kv_cache_figures(metrics_text: str, log_figures: dict[str, Any]) -> dict[str, Any]:
    """The metric's figures over the log's (which keep what the metric lacks: device, max_model_len,
    weights), with ``source``: ``metrics`` or ``log``; ``{}`` when neither has them."""
    from_metrics = kv_cache_from_metrics(metrics_text)
    if from_metrics:
        return {**log_figures, **from_metrics, "source": "metrics"}
    return {**log_figures, "source": "log"} if log_figures else {}
