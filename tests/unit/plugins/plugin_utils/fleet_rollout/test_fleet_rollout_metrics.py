"""vLLM metrics (drain and soak) and the gateway's access log as a rollout reads them."""

from __future__ import annotations

import pytest
from ansible_collections.vllm_fleet.vllm_fleet.plugins.module_utils.gateway_access_log import (
    merge_stats,
    parse_line,
    upstream_stats,
)
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_rollout.metrics import (
    counters_delta,
    samples,
    vllm_counters,
    vllm_load,
)

# Lines as vLLM 0.32 (CPU build) prints them, two models on one server for the label filter.
METRICS = """# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="tiny"} 3.0
vllm:num_requests_running{engine="0",model_name="other"} 1.0
vllm:num_requests_waiting{engine="0",model_name="tiny"} 2.0
vllm:num_requests_waiting{engine="0",model_name="other"} 0.0
vllm:num_requests_waiting_by_reason{engine="0",model_name="tiny",reason="capacity"} 2.0
vllm:request_success_total{engine="0",finished_reason="stop",model_name="tiny"} 5.0
vllm:request_success_total{engine="0",finished_reason="length",model_name="tiny"} 90.0
vllm:request_success_total{engine="0",finished_reason="abort",model_name="tiny"} 3.0
vllm:request_success_total{engine="0",finished_reason="error",model_name="tiny"} 2.0
vllm:request_success_total{engine="0",finished_reason="length",model_name="other"} 7.0
vllm:request_success_created{engine="0",finished_reason="stop",model_name="tiny"} 1.7962252967652e+09
vllm:time_to_first_token_seconds_count{engine="0",model_name="tiny"} 100.0
vllm:time_to_first_token_seconds_sum{engine="0",model_name="tiny"} 4.5
vllm:e2e_request_latency_seconds_count{engine="0",model_name="tiny"} 100.0
vllm:e2e_request_latency_seconds_sum{engine="0",model_name="tiny"} 30.0
http_requests_total{handler="/v1/completions",method="POST",status="2xx"} 95.0
http_requests_total{handler="/v1/completions",method="POST",status="5xx"} 4.0
http_requests_total{handler="/health",method="GET",status="2xx"} 500.0
http_requests_total{handler="/v1/chat/completions",method="POST",status="4xx"} 1.0
garbage line
vllm:cache_config_info{block_size="16",label="a \\"quoted\\" value"} 1.0
vllm:nan_gauge{engine="0"} NaN
"""


def test_samples_parse_labels_and_skip_comments_garbage_and_nan() -> None:
    found = samples(METRICS)
    names = {name for name, _, _ in found}
    assert "vllm:nan_gauge" not in names
    info = [labels for name, labels, _ in found if name == "vllm:cache_config_info"][0]
    assert info["block_size"] == "16"
    assert len(found) == 20


def test_samples_unescape_label_values_with_quotes_commas_and_backslashes() -> None:
    text = (
        'm{a="x,y=\\"z\\"",b="w"} 3 1700000000000\n'  # a comma and escaped quotes inside, a timestamp
        'm{path="C:\\\\tmp",note="two\\nlines",} 4\n'  # escaped backslash and newline, trailing comma
    )
    assert samples(text) == [
        ("m", {"a": 'x,y="z"', "b": "w"}, 3.0),
        ("m", {"path": "C:\\tmp", "note": "two\nlines"}, 4.0),
    ]


def test_model_filter_matches_a_served_name_with_quotes_and_commas() -> None:
    text = (
        'vllm:num_requests_running{engine="0",model_name="llama \\"8b\\", chat"} 2.0\n'
        'vllm:num_requests_running{engine="0",model_name="llama"} 5.0\n'
        'vllm:num_requests_waiting{engine="0",model_name="llama \\"8b\\", chat"} 0.0\n'
        'vllm:request_success_total{finished_reason="abort",model_name="llama \\"8b\\", chat"} 3.0\n'
    )
    name = 'llama "8b", chat'
    assert vllm_load(text, name) == {"found": True, "running": 2, "waiting": 0, "idle": False}
    assert vllm_counters(text, name)["finished_abort"] == 3.0
    assert vllm_load(text, "llama")["running"] == 5


def test_samples_of_a_clean_exposition_keep_every_family() -> None:
    clean = "\n".join(line for line in METRICS.splitlines() if line != "garbage line") + "\n"
    assert samples(clean) == samples(METRICS)
    assert [v for n, labels, v in samples(clean) if n == "vllm:cache_config_info"] == [1.0]
    info = [labels for name, labels, _ in samples(clean) if name == "vllm:cache_config_info"][0]
    assert info["label"] == 'a "quoted" value'


@pytest.mark.parametrize(
    ("text", "model", "expected"),
    [
        (METRICS, None, {"found": True, "running": 4, "waiting": 2, "idle": False}),
        (METRICS, "other", {"found": True, "running": 1, "waiting": 0, "idle": False}),
        (
            'vllm:num_requests_running{model_name="tiny"} 0.0\n'
            'vllm:num_requests_waiting{model_name="tiny"} 0.0\n',
            "tiny",
            {"found": True, "running": 0, "waiting": 0, "idle": True},
        ),
        # running 0 but queued work is not idle
        (
            'vllm:num_requests_running{model_name="tiny"} 0\n'
            'vllm:num_requests_waiting{model_name="tiny"} 1\n',
            None,
            {"found": True, "running": 0, "waiting": 1, "idle": False},
        ),
        # not vLLM's metrics (an error page, a starting server): never idle
        ("<html>502 Bad Gateway</html>", None, {"found": False, "running": 0, "waiting": 0, "idle": False}),
        ("", None, {"found": False, "running": 0, "waiting": 0, "idle": False}),
    ],
)
def test_vllm_load(text: str, model: str | None, expected: dict) -> None:
    assert vllm_load(text, model) == expected


def test_vllm_counters_count_the_api_only() -> None:
    counters = vllm_counters(METRICS, "tiny")
    assert counters == {
        "http_requests": 100.0,
        "http_errors": 4.0,
        "finished": 100.0,
        "finished_error": 2.0,
        "finished_abort": 3.0,
        "ttft_sum": 4.5,
        "ttft_count": 100.0,
        "e2e_sum": 30.0,
        "e2e_count": 100.0,
    }
    assert vllm_counters(METRICS)["finished"] == 107.0


@pytest.mark.parametrize(
    ("before", "after", "key", "expected"),
    [
        ({"finished": 10}, {"finished": 25}, "finished", 15.0),
        ({"finished": 10}, {"finished": 4}, "finished", 4.0),  # restarted: counts from zero
        ({}, {"ttft_sum": 1.5}, "ttft_sum", 1.5),
        ({"http_errors": 3}, {}, "http_errors", 0.0),
    ],
)
def test_counters_delta(before: dict, after: dict, key: str, expected: float) -> None:
    assert counters_delta(before, after)[key] == expected


GW = "gw"
LINES = [
    # streamed completion answered by gpu1
    '10.0.9.1 - alice [02/Dec/2025:15:30:01 +0000] "POST /v1/completions HTTP/1.1" 200 1234 "-" "python" '
    'model="tiny" upstream=10.0.0.1:8000 upstream_status=200 request_time=2.100 upstream_connect_time=0.001 '
    "upstream_header_time=0.050 upstream_response_time=2.100 request_id=abc",
    # gpu2 refused the connection, gpu1 answered
    '10.0.9.1 - bob [02/Dec/2025:15:30:02 +0000] "POST /v1/chat/completions HTTP/1.1" 200 99 "-" "curl/8" '
    'model="tiny" upstream=10.0.0.2:8000, 10.0.0.1:8000 upstream_status=502, 200 request_time=0.300 '
    "upstream_connect_time=-, 0.001 upstream_header_time=-, 0.070 "
    "upstream_response_time=0.001, 0.290 request_id=d",
    # gpu2 answered 500: the client sees it
    '10.0.9.1 - bob [02/Dec/2025:15:30:03 +0000] "POST /v1/completions HTTP/1.1" 500 80 "-" '
    '"a \\"quoted\\" ua" '
    'model="tiny" upstream=10.0.0.2:8000 upstream_status=500 request_time=0.010 upstream_connect_time=0.001 '
    "upstream_header_time=0.010 upstream_response_time=0.010 request_id=e",
    # rejected at the gateway: no upstream
    '10.0.9.1 - - [02/Dec/2025:15:30:04 +0000] "POST /v1/completions HTTP/1.1" 401 120 "-" "x" model="" '
    "upstream=- upstream_status=- request_time=0.000 upstream_connect_time=- upstream_header_time=- "
    "upstream_response_time=- request_id=f",
    "not a log line",
    # every server down: 503 from the gateway's error page
    '10.0.9.1 - alice [02/Dec/2025:15:30:05 +0000] "POST /v1/completions HTTP/1.1" 503 150 "-" "x" '
    'model="tiny" upstream=10.0.0.1:8000 upstream_status=502 request_time=0.002 upstream_connect_time=- '
    "upstream_header_time=- upstream_response_time=0.001 request_id=g",
]


def test_parse_line_lists_every_upstream_tried() -> None:
    retried = parse_line(LINES[1])
    assert retried == {
        "status": 200,
        "model": "tiny",
        "tries": [
            {"upstream": "10.0.0.2:8000", "status": 502, "header_time": None},
            {"upstream": "10.0.0.1:8000", "status": 200, "header_time": 0.07},
        ],
    }
    assert parse_line(LINES[2])["status"] == 500
    assert parse_line(LINES[3])["tries"] == []
    assert parse_line(LINES[4]) is None


def test_upstream_stats() -> None:
    stats = upstream_stats(LINES)
    assert stats["lines"] == 5 and stats["routed"] == 4 and stats["client_errors"] == 2
    gpu1 = stats["upstreams"]["10.0.0.1:8000"]
    gpu2 = stats["upstreams"]["10.0.0.2:8000"]
    assert (gpu1["tries"], gpu1["errors"], gpu1["ok"], gpu1["client_5xx"]) == (3, 1, 2, 1)
    assert gpu1["header_time_sum"] == pytest.approx(0.12) and gpu1["header_time_count"] == 2
    assert (gpu2["tries"], gpu2["errors"], gpu2["ok"], gpu2["client_5xx"]) == (2, 2, 0, 1)


def test_merge_stats_adds_gateways() -> None:
    one = upstream_stats(LINES[:2])
    two = upstream_stats(LINES[2:])
    merged = merge_stats([one, two, "ignored"])
    assert merged == upstream_stats(LINES)
