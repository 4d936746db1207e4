"""Pooling models in the planner (#25): vLLM's pooling runner reserves no KV cache for an encoder-only model
(BGE, E5: BERT / XLM-R) from 0.10.0, and a decoder-based embedder keeps one; real configs from
tests/data/model-features."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_planner import plan, resolve
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_planner.pooling import (
    encoder_only,
    pooling_kv,
)
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_serving.model_features import (
    model_features,
)

FEATURES = Path(__file__).resolve().parents[4] / "data" / "model-features"
L4 = {"name": "NVIDIA L4", "memory_mib": 23034, "count": 1, "compute_capability": "8.9"}
H100 = {"name": "NVIDIA H100 80GB HBM3", "memory_mib": 81559, "count": 1, "compute_capability": "9.0"}


def _config(model: str) -> dict[str, Any]:
    return json.loads((FEATURES / model / "config.json").read_text())


@pytest.mark.parametrize(
    ("model", "encoder"),
    [
        ("BAAI__bge-base-en-v1.5", True),  # BertModel
        ("BAAI__bge-m3", True),  # XLMRobertaModel
        ("BAAI__bge-reranker-v2-m3", True),  # XLMRobertaForSequenceClassification
        ("Qwen__Qwen3-Embedding-0.6B", False),  # Qwen3ForCausalLM --convert embed
        ("Qwen__Qwen3-Reranker-0.6B", False),
    ],
)
def test_encoder_only_models_are_told_from_decoder_embedders(model: str, encoder: bool) -> None:
    arch = resolve(_config(model))
    assert encoder_only(arch) is encoder
    kv = pooling_kv(arch, "pooling", "embed", (0, 32, 0))
    assert kv.kv_cache is not encoder


def test_before_0_10_the_v0_engine_allocates_a_cache_for_encoder_only_models_too() -> None:
    kv = pooling_kv(resolve(_config("BAAI__bge-m3")), "pooling", "none", (0, 9, 2))
    assert kv.kv_cache and kv.encoder_only and "V0" in kv.why


@pytest.mark.parametrize("model", ["BAAI__bge-base-en-v1.5", "BAAI__bge-m3", "BAAI__bge-reranker-v2-m3"])
def test_an_encoder_only_plan_reserves_no_kv_cache_and_says_so(model: str) -> None:
    result = plan(
        _config(model),
        H100,
        weights_bytes=2_271_071_852,
        options={"vllm_version": "0.32.0", "runner": "pooling"},
    )
    assert result["feasible"], result["errors"]
    assert result["pooling"]["kv_cache"] is False and result["pooling"]["encoder_only"] is True
    assert "no KV cache" in result["pooling"]["why"]
    assert result["per_gpu"]["kv_cache_bytes"] == 0
    assert result["available_kv_cache_bytes"] == 0 and result["kv_cache_tokens"] == 0
    assert result["pooling"]["free_bytes_per_gpu"] > 0
    # vLLM's own max_num_seqs, not one request for lack of cache blocks
    assert result["max_num_seqs"] == result["vllm_with_given_args"]["max_num_seqs"] > 1
    assert result["max_concurrency"] == result["max_num_seqs"]


def test_an_encoder_only_model_is_not_refused_for_lack_of_kv_memory() -> None:
    options = {
        "vllm_version": "0.32.0",
        "max_model_len": 8192,
        "gpu_memory_utilization": 0.1,
        "max_num_seqs": 64,
    }
    cfg = _config("BAAI__bge-m3")
    generate = plan(cfg, L4, weights_bytes=2_271_071_852, options=options)
    assert not generate["feasible"] and "KV cache" in generate["errors"][0]
    pooling = plan(cfg, L4, weights_bytes=2_271_071_852, options={**options, "runner": "pooling"})
    assert pooling["feasible"], pooling["errors"]
    assert pooling["max_model_len"] == 8192


def test_a_decoder_embedder_keeps_its_kv_cache() -> None:
    result = plan(
        _config("Qwen__Qwen3-Embedding-0.6B"),
        H100,
        weights_bytes=1_191_586_416,
        options={"vllm_version": "0.32.0", "runner": "pooling", "convert": "embed"},
    )
    assert result["feasible"]
    assert result["pooling"] == {
        "runner": "pooling",
        "convert": "embed",
        "encoder_only": False,
        "kv_cache": True,
        "why": result["pooling"]["why"],
    }
    assert "--convert embed" in result["pooling"]["why"]
    assert result["per_gpu"]["kv_cache_bytes"] > 0 and result["kv_cache_tokens"] > 0


def test_a_generation_plan_has_no_pooling_entry() -> None:
    result = plan(_config("Qwen__Qwen3-Embedding-0.6B"), H100, weights_bytes=1_191_586_416, options={})
    assert "pooling" not in result


@pytest.mark.parametrize(
    ("model", "task", "expected"),
    [
        ("BAAI__bge-m3", "embed", {"runner": "pooling", "convert": "none"}),
        ("Qwen__Qwen3-Embedding-0.6B", "embed", {"runner": "pooling", "convert": "embed"}),
        ("Qwen__Qwen3-8B", None, {}),
    ],
)
def test_model_features_hand_the_planner_its_runner(
    model: str, task: str | None, expected: dict[str, str]
) -> None:
    features = model_features(_config(model), None, {"task": task} if task else {}, "0.32.0", model)
    assert features["plan_options"] == expected


@pytest.mark.parametrize("version", ["0.8.5", "0.9.2"])
def test_before_0_10_a_pooling_model_is_planned_on_v0_with_a_kv_cache(version: str) -> None:
    result = plan(
        _config("BAAI__bge-m3"),
        H100,
        weights_bytes=2_271_071_852,
        options={"vllm_version": version, "runner": "pooling"},
    )
    assert result["feasible"] and result["vllm_family"] == "V0-snapshot"
    assert result["pooling"]["kv_cache"] is True and result["kv_cache_tokens"] > 0
    assert any("falls back to the V0 engine (a pooling model" in w for w in result["warnings"])
