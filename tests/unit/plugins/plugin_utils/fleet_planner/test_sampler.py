"""The profile's dummy sampler pass, by vLLM release: code path, bytes per logit, and vLLM's own figures."""

from __future__ import annotations

import pytest
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_planner import plan
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_planner.config import resolve
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_planner.sampler import (
    FLASHINFER_BYTES,
    SORT_BYTES,
    sampler_bytes,
    sampler_path,
    sampler_state_bytes,
    sm_count,
    spec_warmup_bytes,
)
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_planner.versions import version_info
from planner_helpers import H100, config, gpu

GIB = 1 << 30
# vLLM 0.11.0 on one H100 80GB, `vllm serve` at 1024 sequences / 8192 batched tokens: the "Peak activation
# memory" (torch peak increase of the profile run) that vLLM logged, per model.
LLM_D = "https://github.com/llm-d/llm-d-benchmark/blob/4f4d44943c39b76b28e30dfa1fb0dfaf1ee894b5/config_explorer/empirical-vllm-memory-results.md"
# vLLM's `vllm serve` defaults on an H100 in 0.11 (EngineArgs._set_default_args): 1024 sequences, 8192 tokens
H100_SERVE = {
    "tensor_parallel_size": 1,
    "max_model_len": 16000,
    "block_size": 128,
    "gpu_memory_utilization": 0.9,
    "max_num_seqs": 1024,
    "max_num_batched_tokens": 8192,
}


@pytest.mark.parametrize(
    ("version", "rows", "path"),
    [
        ("0.8.5", 256, "flashinfer_legacy"),
        ("0.10.1", 1024, "sort"),  # FlashInfer only with the optional extra: planned on the sort path
        ("0.11.0", 1024, "sort"),
        ("0.14.1", 1024, "sort"),  # FlashInfer opt-in (VLLM_USE_FLASHINFER_SAMPLER=1)
        ("0.17.1", 1024, "triton"),
        ("0.19.1", 7, "sort"),  # the Triton kernel only from 8 rows
        ("0.20.0", 256, "triton"),
        ("0.21.0", 256, "flashinfer"),  # default on again
        ("0.34.0", 256, "flashinfer"),
    ],
)
def test_code_path_per_release(version: str, rows: int, path: str) -> None:
    assert sampler_path(version_info(version), rows) == path


def test_flashinfer_outside_its_compute_capabilities_falls_back_to_triton() -> None:
    # FlashInferBackend.supports_compute_capability: 7.5 .. 12.1 (a V100 is 7.0)
    assert sampler_path(version_info("0.21.0"), 256, (7, 0)) == "triton"


def test_sort_peak_is_far_above_the_in_place_paths() -> None:
    llama = resolve(config("meta-llama__Meta-Llama-3.1-8B"))
    rows, v, h = 1024, llama.vocab_size, llama.hidden_size
    sort = sampler_bytes(version_info("0.11.0"), rows, v, h, 2)
    triton = sampler_bytes(version_info("0.19.1"), rows, v, h, 2, num_sms=132)
    fi = sampler_bytes(version_info("0.21.0"), rows, v, h, 2)
    assert SORT_BYTES == 36
    # 38 B/logit with the bf16 logits of the LM head; 14 B on the in-place paths
    assert abs(sort / (rows * v) - 38) < 0.2
    assert abs(fi / (rows * v) - 14) < 0.2
    # Triton adds its per-program fp32 row buffer: 132 rows of the vocabulary on an H100
    assert triton - fi == 132 * v * 4


def test_triton_buffer_is_capped_by_the_streaming_multiprocessors() -> None:
    vinfo = version_info("0.19.1")
    small = sampler_bytes(vinfo, 16, 1000, 0, 2, num_sms=108) - 16 * 1000 * 14
    large = sampler_bytes(vinfo, 4096, 1000, 0, 2, num_sms=108) - 4096 * 1000 * 14
    assert small == 16 * 1000 * 4  # next_power_of_2(16) rows
    assert large == 108 * 1000 * 4  # min(next_power_of_2(108), 108) rows


def test_fp32_models_do_not_copy_their_logits() -> None:
    vinfo = version_info("0.21.0")
    assert sampler_bytes(vinfo, 10, 100, 0, 4) == 10 * 100 * 12
    assert sampler_bytes(vinfo, 10, 100, 0, 2) == 10 * 100 * 14


def test_sm_counts_of_named_gpus() -> None:
    assert sm_count("NVIDIA H100 80GB HBM3") == 132
    assert sm_count("NVIDIA H100 PCIe") == 114
    assert sm_count("NVIDIA A100-SXM4-80GB") == 108
    assert sm_count("NVIDIA RTX A5000") == 64
    assert sm_count("NVIDIA A10") == 72


@pytest.mark.parametrize(
    ("model", "logged_gib"),
    [
        # LLM_D: "Peak activation memory" per model, vLLM 0.11.0 on one H100
        ("meta-llama__Meta-Llama-3.1-8B", 4.76),
        ("Qwen__Qwen3-0.6B", 5.56),
        ("openai__gpt-oss-20b", 7.38),
        ("Qwen__Qwen3-32B", 5.64),
    ],
)
def test_activation_peak_of_0_11_matches_vllm_log(model: str, logged_gib: float) -> None:
    r = plan(config(model), gpu(H100, count=1), options=dict(H100_SERVE, vllm_version="0.11.0"))
    got = r["per_gpu"]["activation_peak_bytes"] / GIB
    # the sort path's 38 B/logit over 1024 rows sets the peak; within 0.1 GiB of what vLLM measured
    assert abs(got - logged_gib) < 0.1, (got, logged_gib)


def test_0_19_triton_path_on_an_a100() -> None:
    # https://myoceane.fr/index.php/ai-vllm-a100-gemma-4/ : gpt-oss-20b on one A100 80GB, vLLM 0.19.0,
    # --max-model-len 131072 --gpu-memory-utilization 0.65: "Available KV cache memory: 36.56 GiB".
    a100 = {
        "name": "NVIDIA A100-SXM4-80GB",
        "memory_mib": 81920,
        "count": 1,
        "compute_capability": "8.0",
        "memory_reserved_mib": 763,
    }
    opts = {
        "vllm_version": "0.19.0",
        "tensor_parallel_size": 1,
        "max_model_len": 131072,
        "gpu_memory_utilization": 0.65,
        # vLLM's serve defaults for an A100 (kept out of the large-GPU class): 256 sequences, 2048 tokens
        "max_num_seqs": 256,
        "max_num_batched_tokens": 2048,
    }
    r = plan(config("openai__gpt-oss-20b"), a100, options=opts)
    assert abs(r["available_kv_cache_bytes"] / GIB - 36.56) < 0.5
    sort_era = plan(config("openai__gpt-oss-20b"), a100, options=dict(opts, vllm_version="0.16.0"))
    # 256 rows x 201088 vocab: the sort path of 0.12-0.16 costs 24 B/logit more than 0.19's Triton masking
    gap = sort_era["per_gpu"]["activation_peak_bytes"] - r["per_gpu"]["activation_peak_bytes"]
    assert abs(gap - (256 * 201088 * 24 - 108 * 201088 * 4)) < 1 << 20


def test_0_34_runner_keeps_penalty_state_per_request() -> None:
    # vllm/v1/worker/gpu/sample/penalties.py (0.34.0): output_bin_counts [max_num_reqs, vocab] int32 and
    # prompt_bin_mask [max_num_reqs, cdiv(vocab, 32)] int32
    qwen = resolve(config("Qwen__Qwen3-8B"))
    v = qwen.vocab_size
    assert sampler_state_bytes(version_info("0.34.0"), 256, v) == 256 * (v + -(-v // 32)) * 4
    assert sampler_state_bytes(version_info("0.33.0"), 256, v) == 0
    opts = {
        "tensor_parallel_size": 1,
        "max_model_len": 16384,
        "max_num_seqs": 256,
        "max_num_batched_tokens": 8192,
        "gpu_memory_utilization": 0.9,
    }
    r34 = plan(config("Qwen__Qwen3-8B"), gpu(H100, count=1), options=dict(opts, vllm_version="0.34.0"))
    assert r34["per_gpu"]["non_torch_bytes"] >= 256 * v * 4


def test_0_34_warmup_verify_step_holds_every_rows_logits_and_one_fp32_chunk() -> None:
    # warmup_kernels (vllm/v1/worker/gpu/warmup.py, 0.34.0): min(1024, 16384 // (3 + 2)) requests verify
    # 3 drafts + 1 bonus token = 4,096 rows; rejection_sampler.get_max_chunk_logits(128256) = 2,093 rows,
    # packed by whole requests of 4: 2,092 rows in fp32
    v34 = version_info("0.34.0")
    v, h = 128_256, 3072
    got = spec_warmup_bytes(v34, 1024, 16384, 3, 0, v, h, 2)
    assert got == 4096 * v * 2 + 2092 * v * 4 + 2 * 4096 * h * 2
    # the estimate-based releases size the KV cache from the profile, before the warm-up
    assert spec_warmup_bytes(version_info("0.33.0"), 1024, 16384, 3, 0, v, h, 2) == 0
    assert spec_warmup_bytes(v34, 1024, 16384, 0, 0, v, h, 2) == 0
    # the token budget caps the requests (_cap_num_warmup_reqs); a draft model keeps one more slot each
    assert (
        spec_warmup_bytes(v34, 1024, 2048, 3, 0, v, h, 2)
        == 409 * 4 * v * 2 + 409 * 4 * v * 4 + 2 * 409 * 4 * h * 2
    )
    assert spec_warmup_bytes(v34, 1024, 2048, 3, 1, v, h, 2) < spec_warmup_bytes(
        v34, 1024, 2048, 3, 0, v, h, 2
    )
    # a request is never split across chunks, even one wider than the chunk
    assert (
        spec_warmup_bytes(v34, 2, 16384, 2999, 0, v, h, 2) == 6000 * v * 2 + 3000 * v * 4 + 2 * 6000 * h * 2
    )


def test_0_19_torch_peak_of_llama_8b_on_an_h100_matches_vllm_log() -> None:
    # https://github.com/jgchn/llm-d-planner/blob/a95e9f62e5de8cb5d2beb5f5279e7271a231416d/accuracy/results/v0.19.0/logs/meta-llama-llama-3-1-8b---h100-80gb--tp1pp1dp1--8192.log
    # vLLM 0.19.0, `vllm serve` defaults (1024 sequences, 8192 tokens): "FlashInfer top-p/top-k sampling is
    # available but disabled by default", then "torch peak memory increase: 1.89GiB".
    opts = dict(H100_SERVE, vllm_version="0.19.0", max_model_len=8192, gpu_memory_utilization=0.95)
    r = plan(config("meta-llama__Meta-Llama-3.1-8B"), gpu(H100, count=1), options=opts)
    assert abs(r["per_gpu"]["activation_peak_bytes"] / GIB - 1.89) < 0.1


A100_80 = {"name": "NVIDIA A100-SXM4-80GB", "memory_mib": 81920, "count": 1, "compute_capability": "8.0"}
# vLLM 0.10.1 serve defaults on an A100 (kept out of the large-GPU class): 256 sequences, 2048 tokens
A100_0_10_SERVE = {
    "vllm_version": "0.10.1",
    "tensor_parallel_size": 1,
    "max_model_len": 16384,
    "max_num_seqs": 256,
    "max_num_batched_tokens": 2048,
}


def test_0_10_with_flashinfer_installed_takes_its_sampler() -> None:
    # https://github.com/dennislee22/vLLM-benchmarking/blob/b474d1e053c35c9aef8c02aae4efbc0d8675f033/log/vllm-7B-1gpuA10080GB-0.25GRAM.log
    # vLLM 0.10.1.1 installed with flashinfer-python: "Using FlashInfer for top-p & top-k sampling.",
    # Qwen2-7B-Instruct at gmu 0.25: "Model loading took 14.2488 GiB", "Available KV cache memory: 5.01 GiB".
    opts = dict(A100_0_10_SERVE, gpu_memory_utilization=0.25)
    fi = plan(config("Qwen__Qwen2.5-7B"), A100_80, options=dict(opts, sampler_backend="flashinfer"))
    assert abs(fi["available_kv_cache_bytes"] / GIB - 5.01) < 0.2
    # without FlashInfer (the wheel's default install) 0.10 sorts: 20 B/logit more over 256 rows
    default = plan(config("Qwen__Qwen2.5-7B"), A100_80, options=opts)
    pytorch = plan(config("Qwen__Qwen2.5-7B"), A100_80, options=dict(opts, sampler_backend="pytorch"))
    assert default["available_kv_cache_bytes"] == pytorch["available_kv_cache_bytes"]
    gap = fi["available_kv_cache_bytes"] - default["available_kv_cache_bytes"]
    vocab = resolve(config("Qwen__Qwen2.5-7B")).vocab_size
    assert abs(gap - 256 * vocab * (SORT_BYTES - FLASHINFER_BYTES)) < 1 << 20


def test_sampler_backend_override_per_release() -> None:
    flags = {"max_model_len": 8192, "max_num_seqs": 256, "max_num_batched_tokens": 8192}
    peak = {}
    for version in ("0.16.0", "0.19.0"):
        for backend in ("auto", "flashinfer", "pytorch"):
            r = plan(
                config("meta-llama__Meta-Llama-3.1-8B"),
                gpu(H100, count=1),
                options=dict(flags, vllm_version=version, sampler_backend=backend),
            )
            peak[version, backend] = r["per_gpu"]["activation_peak_bytes"]
    # 0.12-0.20 sort (or mask with Triton from 0.17) unless VLLM_USE_FLASHINFER_SAMPLER=1
    assert peak["0.16.0", "auto"] == peak["0.16.0", "pytorch"] > peak["0.16.0", "flashinfer"]
    assert peak["0.19.0", "auto"] == peak["0.19.0", "pytorch"]
    # the V0 engine keeps its sort path whatever the option says
    v0 = [
        plan(
            config("meta-llama__Meta-Llama-3.1-8B"),
            gpu(H100, count=1),
            options=dict(flags, vllm_version="0.7.3", sampler_backend=b),
        )
        for b in ("auto", "flashinfer")
    ]
    assert v0[0]["per_gpu"]["activation_peak_bytes"] == v0[1]["per_gpu"]["activation_peak_bytes"]


def test_sampler_backend_per_deployment_with_one_model_config() -> None:
    # A fleet plans one model config object for every GPU group. Groups that differ only in
    # sampler_backend must not share cached stage figures (keyed by the release before this test).
    flags = {
        "max_model_len": 8192,
        "max_num_seqs": 256,
        "max_num_batched_tokens": 8192,
        "vllm_version": "0.16.0",
    }
    cfg = config("meta-llama__Meta-Llama-3.1-8B")

    def peak(backend: str) -> int:
        r = plan(cfg, gpu(H100, count=1), options=dict(flags, sampler_backend=backend))
        return int(r["per_gpu"]["activation_peak_bytes"])

    first_sort, first_fi = peak("pytorch"), peak("flashinfer")
    assert first_fi < first_sort  # FlashInfer keeps fewer bytes per logit than the sort path
    assert (peak("pytorch"), peak("flashinfer")) == (first_sort, first_fi)
