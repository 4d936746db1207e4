"""plan.yml sizes LoRA as vllm_server does (#29): a model with adapters is planned with the max_loras and
max_lora_rank the serve stage gives it (from each adapter's adapter_config.json, under the model's own
overrides), so the plan report and the deployment plan the same launch."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils import fleet_planner
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_ops import plan_report as pr
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_planner.options import (
    merge_plan_options,
)
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_serving import lora

MODEL = "Qwen__Qwen3-8B"
CONFIG = (Path(__file__).resolve().parents[4] / "data" / "model-features" / MODEL / "config.json").read_text()
L4 = {
    "present": True,
    "state": "ok",
    "count": 1,
    "models": {"NVIDIA L4": 1},
    "gpus": [{"index": 0, "name": "NVIDIA L4", "memory_total_mib": 23034, "compute_capability": "8.9"}],
}
VERSION = "0.32.0"
ADAPTERS = [{"name": f"task-{i}", "repo": f"acme/task-{i}", "revision": f"{i:040x}"} for i in range(8)]
RANK64 = json.dumps({"peft_type": "LORA", "r": 64, "target_modules": ["q_proj", "v_proj"]})


def _plan(config, gpu, options, index, weights_bytes):
    return fleet_planner.plan(
        config, gpu, options=options, safetensors_index=index, weights_bytes=weights_bytes
    )


def _spec(facts, nodes, shared):
    return fleet_planner.gpu_spec_from_facts(facts, nodes=nodes, shared=shared)


def _entries(overrides: dict[str, Any] | None = None, adapters: list[dict[str, Any]] = ADAPTERS):
    served = {
        "name": MODEL,
        "path": f"/srv/models/{MODEL}",
        "adapters": adapters,
        "overrides": overrides or {},
    }
    hostvars = {"h1": {"vllm_server_vllm_version": VERSION, "vllm_server_models": [served]}}
    return pr.normalize_entries([], {"l4": ["h1"]}, hostvars, {})


def _report(entries, configs: dict[str, str] | None) -> dict[str, Any]:
    files = {"0": {"config": CONFIG, "adapter_configs": configs or {}}}
    inputs = pr.attach_inputs(entries, files, {"h1": L4}, {}, "cache")
    return pr.build_report(inputs, _plan, _spec)


def _served_plan(overrides: dict[str, Any]) -> dict[str, Any]:
    """What vllm_server's preflight plans: its LoRA options under the model's overrides, then the planner."""
    found = lora.adapters([{"name": MODEL, "adapters": ADAPTERS}], "/srv/models")
    sized = lora.launch(found, [RANK64] * len(found), VERSION)[MODEL]["options"]
    options = merge_plan_options(VERSION, None, {**sized, **overrides}, MODEL)
    gpu = fleet_planner.gpu_spec_from_facts(L4, nodes=1, shared=False)
    return fleet_planner.plan(json.loads(CONFIG), gpu, options=options)


def test_eight_rank_64_adapters_are_planned_as_vllm_server_deploys_them() -> None:
    report = _report(_entries(), {a["name"]: RANK64 for a in ADAPTERS})
    plan = report["entries"][0]["plan"]
    served = _served_plan({})
    assert (plan["max_model_len"], plan["max_num_seqs"]) == (served["max_model_len"], served["max_num_seqs"])
    assert plan["kv_cache_tokens"] == served["kv_cache_tokens"]
    without = _report(_entries(adapters=[]), {})["entries"][0]["plan"]
    assert plan["kv_cache_tokens"] < without["kv_cache_tokens"], "the adapters' memory is counted"


def test_the_models_own_overrides_win_over_the_lora_sizing() -> None:
    report = _report(_entries({"max_lora_rank": 128}), {a["name"]: RANK64 for a in ADAPTERS})
    plan = report["entries"][0]["plan"]
    assert plan["kv_cache_tokens"] == _served_plan({"max_lora_rank": 128})["kv_cache_tokens"]


def test_an_adapter_not_downloaded_is_named_with_the_fix() -> None:
    configs = {a["name"]: RANK64 for a in ADAPTERS[1:]}
    entry = _report(_entries(), configs)["entries"][0]
    assert entry["plan"] is None
    assert "task-0" in entry["error"] and "playbooks/weights.yml" in entry["error"]


def test_an_adapter_on_a_branch_is_read_where_the_branch_resolved() -> None:
    entries = _entries(adapters=[{"name": "support", "repo": "acme/support", "revision": "main"}])
    assert entries[0]["adapters"][0]["ref"] == "/srv/models/acme/support/refs/main"
    commit = "c" * 40
    answer = {
        "item": [entries[0], entries[0]["adapters"][0]],
        "content": base64.b64encode(commit.encode()).decode(),
    }
    followed = pr.follow_refs(entries, [answer])
    assert followed[0]["adapters"][0]["path"] == f"/srv/models/acme/support/{commit}"


def test_a_bad_adapter_declaration_is_an_error_row() -> None:
    entries = _entries(adapters=[{"name": "x", "repo": "not a repo", "revision": "main"}])
    assert "adapters[0]" in entries[0]["error"] and "repo ORG/NAME" in entries[0]["error"]
