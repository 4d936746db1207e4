"""--kv-cache-memory-bytes: vLLM takes the value verbatim as each GPU's KV budget (memory spec §1, step 6)."""

from __future__ import annotations

import pytest
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_planner import PlanInputError, plan
from planner_helpers import H100, H200, config, gpu

# The lab's tiny model (tests/images/vllm-cpu/make_tiny_model.py): 2 layers, 2 KV heads of 32, float32.
TINY = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "vocab_size": 2048,
    "hidden_size": 128,
    "intermediate_size": 256,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 32,
    "max_position_embeddings": 512,
    "tie_word_embeddings": False,
    "torch_dtype": "float32",
}
LAB = {
    "vllm_version": "0.32.0",
    "max_model_len": 512,
    "dtype": "float32",
    "enforce_eager": True,
    "max_num_seqs": 16,
}


def test_the_lab_deployment_matches_what_vllm_logged():
    # tests/data/vllm-logs/cpu-0.32.0-tiny.log: "KV cache size: 65,536 tokens,
    # Maximum concurrency for 512 tokens per request: 128.00x" with --kv-cache-memory-bytes 64M
    result = plan(TINY, gpu(H200), options={**LAB, "kv_cache_memory_bytes": "64M"})
    assert result["feasible"], result["errors"]
    assert result["available_kv_cache_bytes"] == 64 * 2**20
    assert result["kv_cache_tokens"] == 65536
    assert result["max_concurrency"] == pytest.approx(128.0)
    args = result["vllm_args"]
    assert args[args.index("--kv-cache-memory-bytes") + 1] == str(64 * 2**20)


def test_the_budget_does_not_depend_on_gpu_memory_utilization():
    options = {"vllm_version": "0.32.0", "max_model_len": 8192, "kv_cache_memory_bytes": 8 * 2**30}
    low = plan(
        config("meta-llama__Meta-Llama-3.1-8B"),
        gpu(H100, count=1),
        options={**options, "gpu_memory_utilization": 0.5},
    )
    high = plan(
        config("meta-llama__Meta-Llama-3.1-8B"),
        gpu(H100, count=1),
        options={**options, "gpu_memory_utilization": 0.9},
    )
    assert low["available_kv_cache_bytes"] == high["available_kv_cache_bytes"] == 8 * 2**30
    assert (
        low["kv_cache_tokens"] == high["kv_cache_tokens"] == 8 * 2**30 // low["kv_bytes_per_token"] // 16 * 16
    )
    without = plan(
        config("meta-llama__Meta-Llama-3.1-8B"), gpu(H100, count=1), options={"vllm_version": "0.32.0"}
    )
    assert "--kv-cache-memory-bytes" not in without["vllm_args"]
    assert without["available_kv_cache_bytes"] > 8 * 2**30


@pytest.mark.parametrize(
    ("text", "expected"),
    [("64M", 64 * 2**20), ("64m", 64 * 10**6), ("1.5g", 1_500_000_000), ("8G", 8 * 2**30), ("4096", 4096)],
)
def test_sizes_are_read_as_vllm_reads_them(text, expected):
    result = plan(TINY, gpu(H200), options={**LAB, "kv_cache_memory_bytes": text})
    assert result["available_kv_cache_bytes"] == expected


@pytest.mark.parametrize("bad", ["64X", "1.5G", "-1", "0", True])
def test_a_bad_size_names_the_option(bad):
    with pytest.raises(PlanInputError, match="kv_cache_memory_bytes"):
        plan(TINY, gpu(H200), options={**LAB, "kv_cache_memory_bytes": bad})


def test_a_kv_cache_larger_than_the_gpu_is_refused_with_the_fix():
    # 8B in bf16 is ~15 GiB of weights on an 80 GiB H100: a 70 GiB KV cache cannot be allocated
    options = {"vllm_version": "0.32.0", "max_model_len": 8192}
    fits = plan(
        config("meta-llama__Meta-Llama-3.1-8B"),
        gpu(H100, count=1),
        options={**options, "kv_cache_memory_bytes": "60G"},
    )
    assert fits["feasible"], fits["errors"]
    over = plan(
        config("meta-llama__Meta-Llama-3.1-8B"),
        gpu(H100, count=1),
        options={**options, "kv_cache_memory_bytes": "70G"},
    )
    assert not over["feasible"]
    (message,) = over["errors"]
    assert message.startswith("kv_cache_memory_bytes: 70.0 GiB of KV cache")
    assert "lower kv_cache_memory_bytes" in message


def test_with_more_gpus_the_planner_splits_the_model_until_the_fixed_cache_fits():
    options = {"vllm_version": "0.32.0", "max_model_len": 8192, "kv_cache_memory_bytes": "70G"}
    eight = gpu(H100, count=8)
    llama = config("meta-llama__Meta-Llama-3.1-8B")
    # half the 8B weights (7.5 GiB) + 70 GiB + runtime still exceed an 80 GiB H100
    two = plan(llama, eight, options={**options, "tensor_parallel_size": 2})
    assert not two["feasible"] and two["errors"][0].startswith("kv_cache_memory_bytes: 70.0 GiB")
    chosen = plan(llama, eight, options=options)
    assert chosen["feasible"], chosen["errors"]
    assert chosen["tensor_parallel_size"] == 4
    assert chosen["available_kv_cache_bytes"] == 70 * 2**30
