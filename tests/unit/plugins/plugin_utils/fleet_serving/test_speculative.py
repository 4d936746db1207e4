"""Speculative decoding per model (#28): vllm_server_models[].speculative -> --speculative-config, the methods
and draft TP each release takes (refused at validate), and the drafter's cost in the plan, on real configs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_planner import PlanInputError, plan
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_serving.deploy import (
    FEATURE_FLAGS,
    ServingError,
    vllm_command,
)
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_serving.model_features import (
    model_features,
)
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_serving.speculative import (
    speculative_args,
    speculative_config,
)

CONFIGS = Path(__file__).resolve().parents[4] / "data" / "model-configs"
HELP = Path(__file__).resolve().parents[4] / "data" / "vllm-release" / "0.32.0" / "serve-help.txt"
H100 = {"name": "NVIDIA H100 80GB HBM3", "memory_mib": 81559, "count": 1, "compute_capability": "9.0"}
H200X8 = {"name": "NVIDIA H200", "memory_mib": 143771, "count": 8, "compute_capability": "9.0"}


def _config(name: str) -> dict[str, Any]:
    folder = CONFIGS if (CONFIGS / name).exists() else CONFIGS.parent / "speculative"
    return json.loads((folder / name / "config.json").read_text())


# --- the flag -------------------------------------------------------------------------------------


def test_ngram_renders_one_json_flag_the_release_has() -> None:
    spec = {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 5, "prompt_lookup_min": 2}
    args = speculative_args(spec, "0.32.0", "m")
    assert args[0] == "--speculative-config"
    assert json.loads(args[1]) == spec
    assert "--speculative-config SPECULATIVE_CONFIG" in HELP.read_text()


def test_the_flag_reaches_the_serve_command_and_extra_args_may_not_set_it() -> None:
    cfg = _config("meta-llama__Meta-Llama-3.1-8B")
    settings = {
        "speculative": {"method": "eagle3", "num_speculative_tokens": 3, "model": "/srv/models/eagle3"}
    }
    features = model_features(cfg, None, settings, "0.32.0", "llama")
    assert "--speculative-config" in features["args"]
    assert features["plan_options"]["speculative"]["model"] == "/srv/models/eagle3"
    assert FEATURE_FLAGS["--speculative-config"] == "vllm_server_models[].speculative"
    with pytest.raises(ServingError, match=r"set vllm_server_models\[llama\].speculative"):
        vllm_command("/m", "llama", "0.0.0.0", 8000, [], ["--speculative-config", "{}"])


@pytest.mark.parametrize(
    ("spec", "version", "message"),
    [
        ({"method": "eagle3", "num_speculative_tokens": 3, "model": "/h"}, "0.8.5", "has no method 'eagle3'"),
        ({"method": "mtp", "num_speculative_tokens": 1}, "0.11.0", "has no method 'mtp'"),
        ({"method": "draft_model", "num_speculative_tokens": 4, "model": "/d"}, "0.12.0", "0.11.0-0.13.x"),
        ({"method": "medusa", "num_speculative_tokens": 4}, "0.32.0", "must be one of"),
        ({"method": "eagle", "num_speculative_tokens": 4}, "0.32.0", "model is required"),
        ({"method": "ngram", "num_speculative_tokens": 0}, "0.32.0", "whole number >= 1"),
        (
            {"method": "ngram", "num_speculative_tokens": 2, "prompt_lookup_min": 5, "prompt_lookup_max": 3},
            "0.32.0",
            "above",
        ),
        (
            {"method": "eagle", "num_speculative_tokens": 2, "model": "/h", "prompt_lookup_max": 3},
            "0.32.0",
            "ngram only",
        ),
    ],
)
def test_what_the_release_refuses_is_refused(spec: dict[str, Any], version: str, message: str) -> None:
    with pytest.raises(ServingError, match=message):
        speculative_config(spec, version, "m")


def test_draft_tp_is_1_or_the_targets_on_v0_and_the_targets_on_v1() -> None:
    spec = {
        "method": "draft_model",
        "num_speculative_tokens": 4,
        "model": "/d",
        "draft_tensor_parallel_size": 1,
    }
    assert speculative_config(spec, "0.10.1", "m", target_tp=4)["draft_tensor_parallel_size"] == 1
    with pytest.raises(ServingError, match="takes the target's tensor parallel size"):
        speculative_config(spec, "0.32.0", "m", target_tp=4)
    assert speculative_config({**spec, "draft_tensor_parallel_size": 4}, "0.32.0", "m", target_tp=4)
    with pytest.raises(ServingError, match="1 or the target's"):
        speculative_config({**spec, "draft_tensor_parallel_size": 2}, "0.10.1", "m", target_tp=4)


# --- the plan ---------------------------------------------------------------------------------------


def test_ngram_costs_no_gpu_memory() -> None:
    spec = {"method": "ngram", "num_speculative_tokens": 4}
    base = plan(_config("meta-llama__Meta-Llama-3.1-8B"), H100, options={"vllm_version": "0.32.0"})
    got = plan(
        _config("meta-llama__Meta-Llama-3.1-8B"),
        H100,
        options={"vllm_version": "0.32.0", "speculative": spec},
    )
    assert got["speculative"]["draft_weights_bytes_per_gpu"] == 0
    assert got["kv_cache_tokens"] == base["kv_cache_tokens"]


# tests/gpu/results/h100-0.34.0-features: vLLM 0.34.0 on one H100 80GB HBM3, Llama-3.2-3B, LLM() defaults
H100_034_RUN = {
    "vllm_version": "0.34.0",
    "max_model_len": 4096,
    "enforce_eager": True,
    "gpu_memory_utilization": 0.45,
    "max_num_seqs": 1024,
    "max_num_batched_tokens": 16384,
}
NGRAM_034 = {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4, "prompt_lookup_min": 2}


def test_034_counts_the_warmup_verify_step_measured_on_an_h100() -> None:
    """ngram.log: "2.04 GiB kept for transient activations (2.04 GiB allocated at peak ...)", "GPU KV cache
    size: 249,856 tokens"; ngram_off.log: 1.28 GiB kept (1.03 allocated), 257,536 tokens."""
    cfg = _config("meta-llama__Llama-3.2-3B")
    on = plan(cfg, H100, options={**H100_034_RUN, "speculative": NGRAM_034})
    off = plan(cfg, H100, options=H100_034_RUN)
    # 1024 requests x 4 rows of bf16 logits (0.98 GiB) and a 2,092-row fp32 chunk (1.0 GiB)
    assert on["per_gpu"]["activation_peak_bytes"] / 2**30 == pytest.approx(2.04, rel=0.01)
    errors = [on["kv_cache_tokens"] / 249_856 - 1, off["kv_cache_tokens"] / 257_536 - 1]
    assert all(abs(e) <= 0.02 for e in errors), errors
    assert abs(errors[0]) < 0.013  # +2.0 % before the verify step was counted
    assert on["speculative"]["kv_cache_tokens_without_draft"] == on["kv_cache_tokens"]  # ngram: no drafter


@pytest.mark.parametrize("version", ["0.32.0", "0.33.0"])
def test_before_034_ngram_leaves_the_plan_as_it_was(version: str) -> None:
    """Before 0.34 the KV cache is sized from the profile, before any warm-up step runs (and ngram drafts on
    the CPU): the plan with ngram is the plan without."""
    cfg = _config("meta-llama__Llama-3.2-3B")
    options = {**H100_034_RUN, "vllm_version": version}
    on = plan(cfg, H100, options={**options, "speculative": NGRAM_034})
    off = plan(cfg, H100, options=options)
    assert on["per_gpu"] == off["per_gpu"] and on["kv_cache_tokens"] == off["kv_cache_tokens"]


def test_an_eagle3_head_costs_its_layer_fc_and_draft_vocab_head() -> None:
    spec = {"method": "eagle3", "num_speculative_tokens": 3, "model": "/h"}
    options = {
        "vllm_version": "0.32.0",
        "speculative": spec,
        "speculative_draft_config": _config("yuhuili__EAGLE3-LLaMA3.1-Instruct-8B"),
    }
    got = plan(_config("meta-llama__Meta-Llama-3.1-8B"), H100, options=options)
    s = got["speculative"]
    # the published head's model.safetensors is ~811 MB (fp16)
    assert 0.85 * 811e6 < s["draft_weights_bytes_per_gpu"] < 1.15 * 811e6
    assert s["draft_layers"] == 1 and s["draft_kv_bytes_per_token"] == 2 * 8 * 128 * 2
    assert s["kv_cache_tokens"] < s["kv_cache_tokens_without_draft"]
    assert got["kv_bytes_per_token"] == 32 * 4096 + 4096


def test_a_draft_model_adds_its_weights_and_every_layer_to_the_kv_cache() -> None:
    spec = {"method": "draft_model", "num_speculative_tokens": 4, "model": "/d"}
    options = {
        "vllm_version": "0.32.0",
        "max_model_len": 32768,
        "speculative": spec,
        "speculative_draft_config": _config("Qwen__Qwen3-0.6B"),
    }
    got = plan(_config("Qwen__Qwen3-8B"), H100, options=options)
    s = got["speculative"]
    assert s["draft_layers"] == 28 and s["draft_kv_bytes_per_token"] == 28 * 2 * 8 * 128 * 2
    assert 1.0e9 < s["draft_weights_bytes_per_gpu"] < 1.5e9
    # each token now holds the target's 36 layers and the draft's 28
    assert s["kv_cache_tokens"] < 0.65 * s["kv_cache_tokens_without_draft"]


def test_mtp_counts_the_checkpoints_mtp_layers() -> None:
    got = plan(
        _config("deepseek-ai__DeepSeek-V3"),
        H200X8,
        options={"vllm_version": "0.32.0", "speculative": {"method": "mtp", "num_speculative_tokens": 1}},
    )
    assert got["speculative"]["draft_layers"] == 1 and got["speculative"]["draft_weights_bytes_per_gpu"] > 0
    with pytest.raises(PlanInputError, match="needs MTP layers"):
        plan(
            _config("Qwen__Qwen3-8B"),
            H100,
            options={"speculative": {"method": "mtp", "num_speculative_tokens": 1}},
        )


def test_a_drafter_that_leaves_too_little_kv_cache_is_refused_with_a_fix() -> None:
    spec = {"method": "draft_model", "num_speculative_tokens": 4, "model": "/d"}
    options = {
        "vllm_version": "0.32.0",
        "max_model_len": 40960,
        "gpu_memory_utilization": 0.4,
        "speculative": spec,
        "speculative_draft_config": _config("Qwen__Qwen3-8B"),
    }
    got = plan(_config("Qwen__Qwen3-8B"), H100, options=options)
    assert not got["feasible"]
    assert any(
        e.startswith("speculative: with the draft_model drafter") and "max_model_len <= 545" in e
        for e in got["errors"]
    )


def test_a_draft_tp_vllm_refuses_makes_the_plan_infeasible() -> None:
    spec = {
        "method": "draft_model",
        "num_speculative_tokens": 4,
        "model": "/d",
        "draft_tensor_parallel_size": 2,
    }
    options = {
        "vllm_version": "0.32.0",
        "tensor_parallel_size": 4,
        "speculative": spec,
        "speculative_draft_config": _config("Qwen__Qwen3-0.6B"),
    }
    got = plan(_config("Qwen__Qwen3-32B"), {**H100, "count": 4}, options=options)
    assert not got["feasible"] and "draft_tensor_parallel_size 2" in got["errors"][0]
