"""vLLM's Prometheus metrics: in-flight requests (drain) and counters over a window (soak)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

COUNTER_KEYS = (
    "http_requests",
    "http_errors",
    "finished",
    "finished_error",
    "finished_abort",
    "ttft_sum",
    "ttft_count",
    "e2e_sum",
    "e2e_count",
)

Sample = tuple[str, dict[str, str], float]


def _parse(text: str) -> list[Sample]:
    """Every sample of ``text``; ValueError at the first line the parser refuses."""
    # imported here, not at the top: it costs a worker ~40 ms, which fleet_rollout_counters_delta (no
    # parsing) need not pay; the control-node venv has it (requirements.txt), the collection loads without
    try:
        from prometheus_client.parser import text_string_to_metric_families
    except ImportError as exc:
        raise RuntimeError(
            f"reading vLLM metrics needs prometheus_client ({exc}): "
            "pip install -r requirements.txt on the control node"
        ) from None
    return [
        (sample.name, dict(sample.labels), float(sample.value))
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    ]


def samples(text: str) -> list[Sample]:
    """``(name, labels, value)`` of every sample line of a Prometheus text exposition; NaN samples
    and lines that are not Prometheus text (an error page, a truncated scrape) are left out."""
    try:
        found = _parse(text or "")
    except ValueError:
        # not clean exposition text: keep the sample lines that parse on their own
        found = []
        for line in (text or "").splitlines():
            if line.strip() and not line.lstrip().startswith("#"):
                try:
                    found += _parse(line + "\n")
                except ValueError:
                    continue
    return [(name, labels, value) for name, labels, value in found if not math.isnan(value)]


def _sum(found: Iterable[Sample], name: str, model: str | None, **want: str) -> float:
    total = 0.0
    for sample_name, labels, value in found:
        if sample_name != name:
            continue
        if model is not None and labels.get("model_name", model) != model:
            continue
        if all(labels.get(k) == v for k, v in want.items()):
            total += value
    return total


def vllm_load(text: str, model: str | None = None) -> dict[str, Any]:
    """Requests running and waiting on a vLLM server (``model``: only that served model name).

    ``found`` is false when the text has no ``vllm:num_requests_running`` at all (not vLLM's
    metrics, or the server is not up yet): such a server is not reported idle.
    """
    found = samples(text)
    present = any(name == "vllm:num_requests_running" for name, _unused, _unused in found)
    running = _sum(found, "vllm:num_requests_running", model)
    waiting = _sum(found, "vllm:num_requests_waiting", model)
    return {
        "found": present,
        "running": int(running),
        "waiting": int(waiting),
        "idle": present and running == 0 and waiting == 0,
    }


def vllm_counters(text: str, model: str | None = None) -> dict[str, float]:
    """The counters a soak compares: API requests (``/v1/...``) and 5xx answers, finished requests by
    reason (``error`` and ``abort`` apart), and the sums and counts of time to first token
    and end-to-end latency."""
    found = samples(text)
    # the API only: health checks and scrapes are not traffic
    http = [
        (n, labels, v)
        for n, labels, v in found
        if n == "http_requests_total" and labels.get("handler", "").startswith("/v1/")
    ]
    finished = _sum(found, "vllm:request_success_total", model)
    return {
        "http_requests": sum(v for _unused, _unused, v in http),
        "http_errors": sum(v for _unused, labels, v in http if labels.get("status", "").startswith("5")),
        "finished": finished,
        "finished_error": _sum(found, "vllm:request_success_total", model, finished_reason="error"),
        "finished_abort": _sum(found, "vllm:request_success_total", model, finished_reason="abort"),
        "ttft_sum": _sum(found, "vllm:time_to_first_token_seconds_sum", model),
        "ttft_count": _sum(found, "vllm:time_to_first_token_seconds_count", model),
        "e2e_sum": _sum(found, "vllm:e2e_request_latency_seconds_sum", model),
        "e2e_count": _sum(found, "vllm:e2e_request_latency_seconds_count", model),
    }


def counters_delta(before: Mapping[str, Any], after: Mapping[str, Any]) -> dict[str, float]:
    """``after - before`` per counter; a counter that went down (the server restarted) counts
    from zero."""
    out: dict[str, float] = {}
    for key in COUNTER_KEYS:
        old = float((before or {}).get(key) or 0)
        new = float((after or {}).get(key) or 0)
        out[key] = new - old if new >= old else new
    return out
