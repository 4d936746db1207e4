"""The plan report names the recommended launch and vLLM's own figures apart (issue #27)."""

from __future__ import annotations

from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_ops import plan_report as pr
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_planner import plan
from planner_helpers import H100, config


def test_report_labels_the_recommendation_and_vllms_own_figures() -> None:
    result = plan(config("Qwen__Qwen3-8B"), dict(H100, count=1), options={"vllm_version": "0.34.0"})
    entry = {"group": "h100", "model": "qwen3", "gpu": H100, "plan": result, "notes": [], "deployments": []}
    text = pr.render({"entries": [entry], "summary": {}})
    assert "the RECOMMENDED launch" in text.splitlines()[0]
    own = next(line for line in text.splitlines() if line.startswith("not the plan h100/qwen3:"))
    assert f"max_num_seqs {result['vllm_with_given_args']['max_num_seqs']:,}" in own
    assert "vLLM with only the configured args" in own


def test_report_reads_plans_with_the_former_key() -> None:
    result = plan(config("Qwen__Qwen3-8B"), dict(H100, count=1), options={"vllm_version": "0.34.0"})
    old = {k: v for k, v in result.items() if k not in ("vllm_with_given_args", "recommended_launch")}
    entry = {"group": "g", "model": "m", "gpu": H100, "plan": old, "notes": [], "deployments": []}
    assert "not the plan g/m: vLLM with only the configured args" in pr.render({"entries": [entry]})
