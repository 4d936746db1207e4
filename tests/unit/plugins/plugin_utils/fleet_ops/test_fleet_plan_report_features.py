"""The plan report shows, per model, what the serve stage chooses (task, tool-call and reasoning parsers,
chat template, pooling runner/convert) and why, and plans a pooling model as vLLM's pooling runner starts
it (#25)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils import fleet_planner
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_ops import plan_report as pr

FEATURES = Path(__file__).resolve().parents[4] / "data" / "model-features"
FACTS = {
    "present": True,
    "state": "ok",
    "count": 1,
    "models": {"NVIDIA H100 80GB HBM3": 1},
    "gpus": [
        {"index": 0, "name": "NVIDIA H100 80GB HBM3", "memory_total_mib": 81559, "compute_capability": "9.0"}
    ],
}


def _plan(config, gpu, options, index, weights_bytes):
    return fleet_planner.plan(
        config, gpu, options=options, safetensors_index=index, weights_bytes=weights_bytes
    )


def _spec(facts, nodes, shared):
    return fleet_planner.gpu_spec_from_facts(facts, nodes=nodes, shared=shared)


def _files(model: str) -> dict[str, Any]:
    folder = FEATURES / model
    texts = {"config": (folder / "config.json").read_text()}
    if (folder / "tokenizer_config.json").exists():
        texts["tokenizer_config"] = (folder / "tokenizer_config.json").read_text()
    if (folder / "chat_template.jinja").exists():
        texts["chat_template"] = (folder / "chat_template.jinja").read_text()
    return texts


def _report(model: str, serve: dict[str, Any] | None = None, version: str = "0.32.0") -> dict[str, Any]:
    hostvars = {
        "h1": {
            "vllm_server_vllm_version": version,
            "vllm_server_models": [
                {"name": model, "path": f"/srv/models/{model}", **(serve or {})},
            ],
        }
    }
    entries = pr.normalize_entries([], {"gpu1": ["h1"]}, hostvars, {})
    inputs = pr.attach_inputs(entries, {"0": _files(model)}, {"h1": FACTS}, {}, "cache")
    return pr.build_report(inputs, _plan, _spec)


def test_a_thinking_model_shows_its_parsers_and_why() -> None:
    report = _report("Qwen__Qwen3-8B")
    entry = report["entries"][0]
    assert entry["features"]["tool_call_parser"] == "hermes"
    assert entry["features"]["reasoning_parser"] == "qwen3"
    text = pr.render(report)
    assert "serve gpu1/Qwen__Qwen3-8B: task generate (" in text
    assert "tool-call parser hermes (Hermes-style <tool_call>" in text
    assert "reasoning parser qwen3 (Qwen3 thinking template" in text
    assert "chat template own (the model's own" in text


def test_the_inventory_switches_a_parser_off_and_the_report_says_so() -> None:
    report = _report("Qwen__Qwen3-8B", {"reasoning_parser": False, "chat_template": "/etc/t.jinja"})
    text = pr.render(report)
    assert "reasoning parser none (off: vllm_server_models[].reasoning_parser is false)" in text
    assert "chat template /etc/t.jinja (set by vllm_server_models[].chat_template)" in text


def test_an_encoder_only_embedder_is_planned_with_the_pooling_runner_and_no_kv_cache() -> None:
    report = _report("BAAI__bge-m3")
    entry = report["entries"][0]
    assert entry["inputs"]["options"]["runner"] == "pooling"
    assert entry["plan"]["pooling"]["kv_cache"] is False
    assert entry["plan"]["per_gpu"]["kv_cache_bytes"] == 0
    assert "--runner pooling" in entry["command"] or "pooling" in entry["command"]
    text = pr.render(report)
    assert "serve gpu1/BAAI__bge-m3: task embed (XLMRobertaModel has no LM head" in text
    assert "serve gpu1/BAAI__bge-m3: pooling --runner pooling (--runner pooling (vLLM >= 0.10.1))" in text
    assert "serve gpu1/BAAI__bge-m3: vLLM reserves NO KV cache: XLMRobertaModel is encoder-only" in text


def test_a_decoder_embedder_is_converted_and_keeps_its_kv_cache() -> None:
    report = _report("Qwen__Qwen3-Embedding-0.6B", {"task": "embed"})
    entry = report["entries"][0]
    assert entry["inputs"]["options"]["convert"] == "embed"
    assert entry["plan"]["pooling"]["kv_cache"] is True
    text = pr.render(report)
    assert "pooling --runner pooling --convert embed (a causal LM is converted for pooling" in text
    assert "vLLM reserves a KV cache: decoder-based embedder (--convert embed)" in text


def test_a_serve_stage_refusal_is_shown_not_raised() -> None:
    report = _report("Qwen__Qwen3-8B", {"tool_call_parser": "no_such_parser"})
    assert "error" in report["entries"][0]["features"]
    assert "the serve stage refuses it: vllm_server_models[Qwen__Qwen3-8B].tool_call_parser" in pr.render(
        report
    )


def test_fleet_plan_models_take_serve_settings() -> None:
    entries = pr.normalize_entries(
        [{"name": "q", "group": "gpu1", "config": "c.json", "serve": {"task": "embed"}}],
        {"gpu1": ["h1"]},
        {"h1": {}},
        {"vllm_version": "0.32.0"},
    )
    assert entries[0]["serve"] == {"task": "embed"} and entries[0]["error"] is None
    assert json.dumps(entries)  # plain data for Ansible


def test_the_drafters_cost_is_shown() -> None:
    report = _report("Qwen__Qwen3-8B", {"speculative": {"method": "ngram", "num_speculative_tokens": 4}})
    assert report["entries"][0]["plan"]["speculative"]["method"] == "ngram"
    assert "serve gpu1/Qwen__Qwen3-8B: speculative ngram x4: drafter 0.00 GiB/GPU of weights" in pr.render(
        report
    )


def test_a_drafter_whose_config_was_not_read_is_left_out_with_a_note() -> None:
    spec = {"method": "eagle3", "num_speculative_tokens": 3, "model": "/srv/models/head"}
    report = _report("Qwen__Qwen3-8B", {"speculative": spec})
    entry = report["entries"][0]
    assert entry["plan"]["feasible"] and "speculative" not in entry["plan"]
    assert any("the drafter's config.json (/srv/models/head) was not read" in n for n in entry["notes"])


def test_the_kv_tier_and_sleep_are_shown() -> None:
    report = _report("Qwen__Qwen3-8B", {"kv_offload": 64, "sleep": 1})
    text = pr.render(report)
    assert "serve gpu1/Qwen__Qwen3-8B: KV tier in host RAM: 64 GiB, 64.00 GiB per TP rank of 1" in text
    assert "serve gpu1/Qwen__Qwen3-8B: sleep level 1 allowed: --enable-sleep-mode" in text


def test_a_drafter_config_read_on_the_host_puts_its_cost_in_the_plan() -> None:
    spec = {"method": "eagle3", "num_speculative_tokens": 3, "model": "/srv/models/head/"}
    hostvars = {
        "h1": {
            "vllm_server_vllm_version": "0.32.0",
            "vllm_server_models": [{"name": "q", "path": "/srv/models/q", "speculative": spec}],
        }
    }
    entries = pr.normalize_entries([], {"gpu1": ["h1"]}, hostvars, {})
    assert entries[0]["draft_dir"] == "/srv/models/head"
    head = (
        FEATURES.parent / "speculative" / "yuhuili__EAGLE3-LLaMA3.1-Instruct-8B" / "config.json"
    ).read_text()
    files = {"0": {**_files("Qwen__Qwen3-8B"), "draft_config": head}}
    inputs = pr.attach_inputs(entries, files, {"h1": FACTS}, {}, "cache")
    report = pr.build_report(inputs, _plan, _spec)
    assert report["entries"][0]["plan"]["speculative"]["draft_layers"] == 1
    assert "speculative eagle3 x3: drafter 0." in pr.render(report)
