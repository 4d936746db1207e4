"""TP candidates, rejected overrides in vLLM's wording, and the planner's choices."""

from __future__ import annotations

import pytest
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_planner import (
    PlanInputError,
    plan,
    resolve,
    tp_candidates,
)
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_planner.quant import resolve_quant
from planner_helpers import A100_40, H100, H200, RTX4090, T4, config, gpu

TP_CANDIDATES = [
    ("meta-llama__Meta-Llama-3.1-70B", 8, [1, 2, 4, 8]),
    ("Qwen__Qwen2.5-7B", 8, [1, 2, 4]),  # 28 heads: 8 does not divide
    ("Qwen__Qwen2.5-1.5B", 8, [1, 2, 4]),  # 12 heads / 2 KV heads: 3 and 6 break the KV-head rule
    ("Qwen__Qwen3-30B-A3B-FP8", 8, [1, 2]),  # MoE 768 / TP must stay a multiple of the 128 FP8 block
    ("Qwen__Qwen3-235B-A22B-FP8", 8, [1, 2, 4]),
    ("mistralai__Mixtral-8x22B-v0.1", 8, [1, 2, 4, 8]),
    ("deepseek-ai__DeepSeek-V3", 8, [1, 2, 4, 8]),
    ("Qwen__Qwen3-VL-8B-Instruct", 8, [1, 2, 4, 8]),  # vision heads (16) divide too
    ("meta-llama__Meta-Llama-3.1-8B", 3, [1, 2]),
]


@pytest.mark.parametrize(("fixture", "gpus", "expected"), TP_CANDIDATES)
def test_tp_candidates(fixture: str, gpus: int, expected: list[int]) -> None:
    arch = resolve(config(fixture))
    assert tp_candidates(arch, gpus, resolve_quant(arch.quant_config, None)) == expected


REJECTED = [
    (
        "Qwen__Qwen2.5-7B",
        {"tensor_parallel_size": 8},
        "tensor_parallel_size",
        "Total number of attention heads (28) must be divisible by tensor parallel size (8).",
    ),
    # the embedding is built before the attention layers: its padded vocabulary fails first
    (
        "Qwen__Qwen2.5-1.5B",
        {"tensor_parallel_size": 3},
        "tensor_parallel_size",
        "151936 is not divisible by 3",
    ),
    # 24 heads and a 128,256-token vocabulary split 3 ways; the 8 KV heads do not
    (
        "meta-llama__Llama-3.2-3B",
        {"tensor_parallel_size": 3},
        "tensor_parallel_size",
        "8 is not divisible by 3",
    ),
    (
        "Qwen__Qwen3-30B-A3B-FP8",
        {"tensor_parallel_size": 4},
        "tensor_parallel_size",
        "The output_size of gate's and up's weight = 192 is not divisible by weight quantization "
        "block_n = 128.",
    ),
    (
        "meta-llama__Meta-Llama-3.1-8B",
        {"max_model_len": 200000},
        "max_model_len",
        "User-specified max_model_len (200000) is greater than the derived max_model_len "
        "(max_position_embeddings=131072",
    ),
    (
        "meta-llama__Meta-Llama-3.1-8B",
        {"max_num_seqs": 512, "max_num_batched_tokens": 256},
        "max_num_batched_tokens",
        "max_num_batched_tokens (256) must be greater than or equal to max_num_seqs (512).",
    ),
    (
        "Qwen__Qwen3-32B-FP8",
        {"quantization": "awq"},
        "quantization",
        "Quantization method specified in the model config (fp8) does not match the quantization method "
        "specified in the `quantization` argument (awq).",
    ),
]


@pytest.mark.parametrize(("fixture", "options", "variable", "text"), REJECTED)
def test_rejected_overrides_use_vllm_wording(fixture: str, options: dict, variable: str, text: str) -> None:
    result = plan(config(fixture), gpu(H100, count=8), options=options)
    assert result["feasible"] is False
    assert result["vllm_args"] == []
    assert any(e.startswith(f"{variable}: ") and text in e and "Fix:" in e for e in result["errors"]), result[
        "errors"
    ]


def test_bf16_on_turing_is_rejected_with_vllm_text() -> None:
    result = plan(config("Qwen__Qwen3-0.6B"), T4, options={"dtype": "bfloat16"})
    assert not result["feasible"]
    assert (
        "Bfloat16 is only supported on GPUs with compute capability of at least 8.0." in result["errors"][0]
    )


def test_bf16_checkpoint_on_turing_falls_back_with_warning() -> None:
    result = plan(config("Qwen__Qwen3-0.6B"), T4, options={"max_model_len": 4096})
    assert result["feasible"] and result["dtype"] == "float16"
    assert any("falls back to float16" in w for w in result["warnings"])
    assert "--dtype" not in result["vllm_args"]  # vLLM does the same on its own


def test_free_memory_check_before_0_34() -> None:
    result = plan(
        config("Qwen__Qwen3-8B"),
        gpu(H100, count=2),
        options={"vllm_version": "0.11.0", "tensor_parallel_size": 2, "gpu_memory_utilization": 0.999},
    )
    assert result["errors"][0].startswith("gpu_memory_utilization: Free memory on device (")
    assert "is less than desired GPU memory utilization (0.999, " in result["errors"][0]


def test_gmu_one_allowed_with_extensible_kv_cache() -> None:
    result = plan(
        config("Qwen__Qwen3-8B"), H200, options={"vllm_version": "0.34.0", "gpu_memory_utilization": 1.0}
    )
    assert result["feasible"]


def test_smallest_tp_that_holds_the_model_at_its_context() -> None:
    result = plan(config("meta-llama__Meta-Llama-3.1-70B"), H100, options={"vllm_version": "0.20.1"})
    assert (
        result["feasible"] and result["tensor_parallel_size"] == 4 and result["pipeline_parallel_size"] == 1
    )
    assert result["max_model_len"] == 131072


def test_target_context_picks_smaller_tp() -> None:
    result = plan(
        config("meta-llama__Meta-Llama-3.1-70B"),
        H100,
        options={"vllm_version": "0.20.1", "target_context_len": 8192},
    )
    assert result["tensor_parallel_size"] == 2 and result["max_model_len"] == 8192


def test_pp_only_when_one_node_cannot_hold_the_model() -> None:
    one = plan(
        config("meta-llama__Meta-Llama-3.1-405B"), gpu(H100, nodes=2), options={"target_context_len": 8192}
    )
    assert one["pipeline_parallel_size"] == 2 and one["tensor_parallel_size"] == 8
    assert "--pipeline-parallel-size" in one["vllm_args"]
    single = plan(
        config("meta-llama__Meta-Llama-3.1-70B"), gpu(H100, nodes=2), options={"target_context_len": 8192}
    )
    assert single["pipeline_parallel_size"] == 1


def test_max_model_len_capped_by_kv_capacity() -> None:
    result = plan(config("meta-llama__Meta-Llama-3.1-8B"), RTX4090, options={"vllm_version": "0.20.1"})
    assert result["feasible"]
    assert 2048 <= result["max_model_len"] < 131072
    assert result["max_model_len"] <= result["max_model_len_fit"]
    assert any("max_model_len capped" in w for w in result["warnings"])


def test_user_max_model_len_that_does_not_fit_uses_vllm_error() -> None:
    result = plan(
        config("meta-llama__Meta-Llama-3.1-8B"),
        RTX4090,
        options={"vllm_version": "0.20.1", "max_model_len": 131072},
    )
    assert not result["feasible"]
    err = result["errors"][0]
    assert err.startswith(
        "max_model_len: To serve at least one request with the models's max seq len (131072), (16.00 GiB"
    )
    assert "set max_model_len <= " in err and "set kv_cache_dtype fp8" in err


@pytest.mark.parametrize(
    ("version", "owner", "hint"),
    [
        ("0.21.0", "models's", "Try increasing `gpu_memory_utilization` or decreasing `max_model_len`"),
        ("0.25.0", "model's", "(which also controls CPU memory on the CPU backend)"),
        ("0.34.0", "model's", "The extensible KV cache already takes all device memory"),
    ],
)
def test_kv_error_text_by_version(version: str, owner: str, hint: str) -> None:
    result = plan(
        config("meta-llama__Meta-Llama-3.1-8B"),
        RTX4090,
        options={"vllm_version": version, "max_model_len": 131072},
    )
    assert f"with the {owner} max seq len (131072)" in result["errors"][0]
    assert hint in result["errors"][0]


def test_infeasible_model_lists_concrete_fixes() -> None:
    result = plan(
        config("meta-llama__Meta-Llama-3.1-70B"), gpu(H100, count=1), options={"vllm_version": "0.20.1"}
    )
    assert not result["feasible"]
    err = result["errors"][0]
    assert err.startswith("tensor_parallel_size: ")
    assert "needs >= 2x79 GiB at bf16" in err
    assert "set quantization fp8" in err


def test_infeasible_returns_not_raises_and_fills_contract_keys() -> None:
    result = plan(config("meta-llama__Meta-Llama-3.1-405B"), A100_40, options={})
    assert result["feasible"] is False and result["errors"]
    for key in (
        "tensor_parallel_size",
        "pipeline_parallel_size",
        "gpu_memory_utilization",
        "max_model_len",
        "max_num_seqs",
        "max_num_batched_tokens",
        "dtype",
        "kv_cache_dtype",
        "per_gpu",
        "kv_bytes_per_token",
        "kv_cache_tokens",
        "max_concurrency",
        "vllm_args",
        "warnings",
    ):
        assert key in result


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"model_config": {"hidden_size": 4096}}, "num_hidden_layers"),
        ({"gpu": {"count": 1}}, "gpu.memory_mib is required"),
        ({"gpu": {"memory_mib": 81559, "count": 0}}, "gpu.count"),
        ({"options": {"tensor_parallel_size": "two"}}, "tensor_parallel_size"),
        ({"options": {"gpu_memory_utilization": 1.5}}, "gpu_memory_utilization"),
        ({"options": {"vllm_version": "banana"}}, "vllm_version"),
        ({"options": {"bogus": 1}}, "unknown key"),
        ({"options": {"quantization": "nonsense"}}, "quantization"),
    ],
)
def test_malformed_input_raises(kwargs: dict, message: str) -> None:
    args = {"model_config": config("Qwen__Qwen3-0.6B"), "gpu": H200, "options": None}
    args.update(kwargs)
    with pytest.raises(PlanInputError, match=message):
        plan(args["model_config"], args["gpu"], options=args["options"])


def test_gmu_by_version_and_sharing() -> None:
    cfg = config("Qwen__Qwen3-8B")
    assert plan(cfg, H200, options={"vllm_version": "0.11.0"})["gpu_memory_utilization"] == 0.9
    assert plan(cfg, H200, options={"vllm_version": "0.20.1"})["gpu_memory_utilization"] == 0.92
    extensible = plan(cfg, H200, options={"vllm_version": "0.34.0"})
    assert extensible["gpu_memory_utilization"] == 1.0
    assert "--gpu-memory-utilization" not in extensible["vllm_args"]
    shared = plan(cfg, gpu(H200, shared=True), options={"vllm_version": "0.34.0"})
    assert shared["vllm_args"][shared["vllm_args"].index("--gpu-memory-utilization") + 1] == "0.5"


def test_max_num_seqs_from_kv_capacity_and_workload_batch_tokens() -> None:
    chat = plan(config("meta-llama__Meta-Llama-3.1-8B"), H200, options={"vllm_version": "0.20.1"})
    batch = plan(
        config("meta-llama__Meta-Llama-3.1-8B"), H200, options={"vllm_version": "0.20.1", "workload": "batch"}
    )
    assert chat["max_num_batched_tokens"] == 8192 and batch["max_num_batched_tokens"] == 16384
    # 80 % of the KV cache at the expected 4096-token request, within vLLM's 1024 cap
    assert chat["max_num_seqs"] <= 1024
    assert chat["max_num_seqs"] * 4096 <= 0.8 * chat["kv_cache_blocks"] * chat["block_size"] + 4096
    small = plan(config("meta-llama__Meta-Llama-3.1-8B"), RTX4090, options={"target_context_len": 8192})
    assert small["max_num_batched_tokens"] == 2048  # GPU class below 70 GiB


def test_version_older_than_modelled_warns() -> None:
    result = plan(config("Qwen__Qwen3-0.6B"), H200, options={"vllm_version": "0.3.3"})
    assert result["vllm_family"] == "V0-init-free"
    assert any("predates the 0.4 V0 engine" in w for w in result["warnings"])
    modelled = plan(config("Qwen__Qwen3-0.6B"), H200, options={"vllm_version": "0.5.4"})
    assert not any("predates" in w for w in modelled["warnings"])


def test_v0_engine_releases_use_the_v0_error_text() -> None:
    result = plan(
        config("meta-llama__Meta-Llama-3.1-8B"),
        RTX4090,
        options={"vllm_version": "0.6.4", "max_model_len": 131072},
    )
    err = result["errors"][0]
    assert err.startswith(
        "max_model_len: The model's max seq len (131072) is larger than the maximum number of "
        "tokens that can be stored in KV cache ("
    )


def test_explicit_pipeline_within_one_node() -> None:
    result = plan(config("Qwen__Qwen2.5-1.5B"), gpu(RTX4090, count=2), options={"pipeline_parallel_size": 2})
    assert result["feasible"] and (result["tensor_parallel_size"], result["pipeline_parallel_size"]) == (1, 2)


def test_chosen_max_num_seqs_respects_user_batched_tokens() -> None:
    result = plan(config("Qwen__Qwen3-0.6B"), H100, options={"max_num_batched_tokens": 64})
    assert result["feasible"] and result["max_num_seqs"] <= 64


def test_oversized_concurrency_target_names_the_variable() -> None:
    result = plan(
        config("Qwen__Qwen2.5-7B"),
        RTX4090,
        options={"target_concurrency": 4096, "quantization": "bitsandbytes", "vllm_version": "0.10.1"},
    )
    assert not result["feasible"]
    assert result["errors"][0].startswith("target_concurrency: ")
    assert "set max_num_batched_tokens 2048 and max_num_seqs 256" in result["errors"][0]
