"""Flags and metrics vllm-fleet uses vs one vLLM release (release_drift), on what vLLM 0.32.0 itself printed.

tests/data/vllm-release/0.32.0 was read from the lab's vLLM CPU image by
`tests/release/check.py IMAGE --capture`.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_ops import release_drift
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_serving import model_features
from release import check

CAPTURE = Path(__file__).resolve().parents[4] / "data" / "vllm-release" / "0.32.0"
SERVE = (CAPTURE / "serve-help.txt").read_text()
BENCH = (CAPTURE / "bench-serve-help.txt").read_text()
METRICS = (CAPTURE / "metrics.txt").read_text()
VLLM_HELP = (CAPTURE / "vllm-help.txt").read_text()
ENVS = (CAPTURE / "envs.txt").read_text()


def _without(text: str, needle: str) -> str:
    return "\n".join(line for line in text.splitlines() if needle not in line)


def test_this_checkout_has_no_drift_against_the_lab_release() -> None:
    assert (CAPTURE / "VERSION").read_text().strip() == "0.32.0"
    assert check.check("0.32.0", SERVE, BENCH, METRICS, VLLM_HELP, ENVS) == []


def test_help_flags_reads_aliases_and_negations() -> None:
    flags = release_drift.help_flags(SERVE)
    assert {
        "--tensor-parallel-size",
        "-tp",
        "--enforce-eager",
        "--no-enforce-eager",
        "--shutdown-timeout",
    } <= flags
    assert "--device-memory-utilization" in flags  # an alias on the same line as --gpu-memory-utilization
    assert len(flags) > 300


@pytest.mark.parametrize(
    ("flag", "owner"),
    [
        ("--shutdown-timeout", "vllm_server_stop_timeout"),
        ("--kv-cache-memory-bytes", "vllm_server_models[].overrides.kv_cache_memory_bytes"),
        ("--max-num-seqs", "vllm_server_models[].overrides.max_num_seqs"),
        ("--served-model-name", "vllm_server_models[].name"),
        ("--speculative-config", "vllm_server_models[].speculative"),
        ("--kv-offloading-size", "vllm_server_models[].kv_offload"),
    ],
)
def test_a_flag_the_release_lacks_is_named_with_its_variable(flag: str, owner: str) -> None:
    problems = check.check("0.32.0", _without(SERVE, f"  {flag} "), BENCH, METRICS)
    assert len(problems) == 1, problems
    assert problems[0].startswith(f"vLLM 0.32.0 `vllm serve` has no {flag} (set by ")
    assert owner in problems[0] and "pin vllm_server_vllm_version" in problems[0]


def test_a_bench_flag_the_release_lacks_names_the_task_file() -> None:
    problems = check.check("0.32.0", SERVE, _without(BENCH, "  --percentile-metrics"), METRICS)
    assert problems == [
        "vLLM 0.32.0 `vllm bench serve` has no --percentile-metrics "
        "(set by roles/fleet_bench/tasks/step.yml): the release renamed or removed it; "
        "pin vllm_server_vllm_version and vllm_server_image to a release that has it"
    ]


def test_a_metric_the_release_lacks_names_each_file_and_line() -> None:
    problems = check.check("0.32.0", SERVE, BENCH, _without(METRICS, '"vllm:num_requests_waiting"'))
    assert problems and all("has no metric vllm:num_requests_waiting" in p for p in problems)
    files = {p.split(":", 1)[0] for p in problems}
    assert files == set(check.METRIC_USERS)  # rules, dashboard and the rollout gate all read it


@pytest.mark.parametrize(
    ("known", "ok"),
    [
        ({"vllm:kv_cache_usage_perc"}, True),  # new releases
        ({"vllm:gpu_cache_usage_perc"}, True),  # old releases
        ({"vllm:num_requests_running"}, False),  # neither
    ],
)
def test_or_alternatives_span_releases(known: set, ok: bool) -> None:
    line = 'max(vllm:kv_cache_usage_perc{job="vllm"} or vllm:gpu_cache_usage_perc{job="vllm"})'
    problems = release_drift.metric_drift({"rules.yml": line}, known, "0.9.0")
    assert (problems == []) is ok
    if not ok:
        assert problems[0].startswith("rules.yml:1: vLLM 0.9.0 has no metric vllm:gpu_cache_usage_perc")


def test_series_suffixes_match_the_defined_metric() -> None:
    text = (
        "rate(vllm:time_to_first_token_seconds_bucket[5m]) vllm:request_success_total "
        "vllm:e2e_request_latency_seconds_sum"
    )
    assert release_drift.metric_drift({"f": text}, release_drift.source_metrics(METRICS), "0.32.0") == []


def test_only_expressions_are_read_from_a_dashboard() -> None:
    dashboard = (
        '{"panels": [{"description": "vllm:gone on older vLLM", '
        '"targets": [{"expr": "sum(vllm:num_requests_running)"}]}]}'
    )
    assert check.expressions("d.json", dashboard) == "sum(vllm:num_requests_running)"


def test_a_folded_rule_expression_is_one_line() -> None:
    rules = "      - alert: A\n        expr: >-\n          vllm:a\n          or vllm:b\n        for: 5m\n"
    assert check.expressions("r.yml.j2", rules) == "vllm:a or vllm:b"


def test_every_tool_parser_claimed_for_the_lab_release_is_offered() -> None:
    offered = model_features.parser_choices(SERVE)
    assert {"hermes", "llama3_json", "mistral", "openai", "qwen3_coder", "deepseek_v3"} <= offered
    assert len(offered) > 40
    assert release_drift.parser_drift(SERVE, "0.32.0") == []


def test_a_claimed_parser_the_help_lacks_is_named_with_the_release() -> None:
    help_text = SERVE.replace(",hermes,", ",")
    problems = check.check("0.32.0", help_text, BENCH, METRICS)
    assert problems == [
        "vLLM 0.32.0 `vllm serve --tool-call-parser` has no hermes (model_features.TOOL_PARSERS claims it "
        "since 0.8.0): fix the table's release for hermes"
    ]


def test_a_help_without_parser_choices_offers_none() -> None:
    assert model_features.parser_choices("  --tool-call-parser TOOL_CALL_PARSER\n") == frozenset()


def test_a_guarded_alias_the_role_never_renders_is_not_drift() -> None:
    assert "-sc" not in release_drift.emitted_serve_flags()
    assert "--speculative-config" in release_drift.emitted_serve_flags()


# --- the start caches (#26): `vllm download-kernels` and the cache variables ---------------------------


def test_the_lab_release_offers_download_kernels_and_reads_vllm_cache_root() -> None:
    assert {"serve", "bench", "download-kernels"} <= release_drift.subcommands(VLLM_HELP)
    assert "VLLM_CACHE_ROOT" in ENVS.split()
    assert release_drift.cache_drift(VLLM_HELP, ENVS.split(), "0.32.0") == []


def test_a_release_without_download_kernels_that_the_gate_covers_is_drift() -> None:
    help_text = VLLM_HELP.replace(",download-kernels", "").replace("download-kernels,", "")
    assert "download-kernels" not in release_drift.subcommands(help_text)
    problems = check.check("0.32.0", SERVE, BENCH, METRICS, help_text, ENVS)
    assert problems == [
        "vLLM 0.32.0 has no `vllm download-kernels` (vllm_server runs it when an image arrives, from 0.32.0: "
        "fleet_serving/start_cache.DOWNLOAD_KERNELS_SINCE): the release renamed or removed it"
    ]


def test_a_release_before_the_gate_that_has_download_kernels_asks_to_lower_it() -> None:
    problems = release_drift.cache_drift(VLLM_HELP, ENVS.split(), "0.31.0")
    assert problems == [
        "vLLM 0.31.0 has `vllm download-kernels` but "
        "fleet_serving/start_cache.DOWNLOAD_KERNELS_SINCE is 0.32.0: lower it to this release"
    ]


def test_a_cache_variable_the_release_does_not_read_is_named() -> None:
    names = [n for n in ENVS.split() if n != "VLLM_CACHE_ROOT"]
    problems = release_drift.cache_drift(VLLM_HELP, names, "0.32.0")
    assert len(problems) == 1 and problems[0].startswith("vLLM 0.32.0 does not read VLLM_CACHE_ROOT")
