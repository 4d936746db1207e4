"""Bad planner inputs, each a mutation of a real config.json, GPU or option, with what the CLI must say.

Each case: the config fixture, changes to its config.json (dotted paths; DROP removes a key), CLI flags
replacing the H100 node's defaults, the exit status, the input the message must name (its prefix) and
the text after "Fix:".
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CONFIGS = Path(__file__).resolve().parents[1] / "data" / "model-configs"
DROP = object()
BAD_INPUT, INFEASIBLE = 1, 2

H100_FLAGS = {
    "--gpu-memory-mib": "81559",
    "--gpus-per-node": "8",
    "--compute-capability": "9.0",
    "--gpu-name": "NVIDIA H100 80GB HBM3",
    "--gpu-memory-reserved-mib": "479",
}
T4 = {
    "--gpu-memory-mib": "15360",
    "--gpus-per-node": "1",
    "--compute-capability": "7.5",
    "--gpu-name": "Tesla T4",
    "--gpu-memory-reserved-mib": "388",
}
V100 = {
    "--gpu-memory-mib": "32768",
    "--gpus-per-node": "8",
    "--compute-capability": "7.0",
    "--gpu-name": "Tesla V100-SXM2-32GB",
}
A100 = {
    "--gpu-memory-mib": "81920",
    "--gpus-per-node": "8",
    "--compute-capability": "8.0",
    "--gpu-name": "NVIDIA A100-SXM4-80GB",
}
P100 = {
    "--gpu-memory-mib": "16384",
    "--gpus-per-node": "4",
    "--compute-capability": "6.0",
    "--gpu-name": "Tesla P100-PCIE-16GB",
}
RTX4090 = {
    "--gpu-memory-mib": "24564",
    "--gpus-per-node": "1",
    "--compute-capability": "8.9",
    "--gpu-name": "NVIDIA GeForce RTX 4090",
    "--gpu-memory-reserved-mib": "346",
}

LLAMA8 = "meta-llama__Meta-Llama-3.1-8B"
QWEN3_8 = "Qwen__Qwen3-8B"
QWEN3_FP8 = "Qwen__Qwen3-32B-FP8"
OSS20 = "openai__gpt-oss-20b"
DSV3 = "deepseek-ai__DeepSeek-V3"
VL = "Qwen__Qwen3-VL-8B-Instruct"
AWQ = {"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True, "version": "gemm"}
GPTQ = {"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": False}


@dataclass(frozen=True)
class Case:
    id: str
    model: str
    changes: dict[str, Any] = field(default_factory=dict)
    flags: dict[str, str | None] = field(default_factory=dict)  # None drops a default flag
    rc: int = INFEASIBLE
    input: str = ""
    fix: str = ""
    raw: bytes | None = None  # config.json bytes instead of the mutated JSON


def V(version: str, **flags: str | None) -> dict[str, str | None]:
    return {"--vllm-version": version, **flags}


CASES: list[Case] = [
    # --- architectures the release does not register ---------------------------------------------
    Case("qwen3-on-0.4", QWEN3_8, flags=V("0.4.0"), input="architectures", fix="set vllm_version >= 0.8.4"),
    Case("qwen3-on-0.8.3", QWEN3_8, flags=V("0.8.3"), input="architectures", fix="set vllm_version >= 0.8.4"),
    Case(
        "qwen3-moe-on-0.7",
        "Qwen__Qwen3-30B-A3B",
        flags=V("0.7.3"),
        input="architectures",
        fix="set vllm_version >= 0.8.4",
    ),
    Case("gpt-oss-on-0.6", OSS20, flags=V("0.6.0"), input="architectures", fix="set vllm_version >= 0.10.1"),
    Case(
        "gpt-oss-120b-on-0.10.0",
        "openai__gpt-oss-120b",
        flags=V("0.10.0"),
        input="architectures",
        fix="set vllm_version >= 0.10.1",
    ),
    Case("qwen3-vl-on-0.10", VL, flags=V("0.10.2"), input="architectures", fix="set vllm_version >= 0.11.0"),
    Case(
        "llama4-on-0.8.2",
        "meta-llama__Llama-4-Scout-17B-16E-Instruct",
        flags=V("0.8.2"),
        input="architectures",
        fix="set vllm_version >= 0.8.3",
    ),
    Case(
        "deepseek-v3-on-0.6.5", DSV3, flags=V("0.6.5"), input="architectures", fix="set vllm_version >= 0.6.6"
    ),
    Case(
        "mixtral-on-0.2.3",
        "mistralai__Mixtral-8x7B-v0.1",
        flags=V("0.2.3"),
        input="architectures",
        fix="set vllm_version >= 0.2.4",
    ),
    Case(
        "qwen2-on-0.2.7",
        "Qwen__Qwen2.5-7B",
        flags=V("0.2.7"),
        input="architectures",
        fix="set vllm_version >= 0.3.0",
    ),
    Case(
        "unknown-arch",
        LLAMA8,
        {"architectures": ["FooForCausalLM"]},
        input="architectures",
        fix="set config.json architectures to the model class",
    ),
    Case(
        "misspelt-arch",
        LLAMA8,
        {"architectures": ["LlamaForCausalLm"]},
        input="architectures",
        fix="set config.json architectures to the model class",
    ),
    Case(
        "empty-arch",
        LLAMA8,
        {"architectures": []},
        input="architectures",
        fix="add the checkpoint's architectures list",
    ),
    Case(
        "missing-arch",
        LLAMA8,
        {"architectures": DROP},
        input="architectures",
        fix="add the checkpoint's architectures list",
    ),
    Case(
        "removed-arch",
        LLAMA8,
        {"architectures": ["OLMoForCausalLM"]},
        flags=V("0.6.0"),
        input="architectures",
        fix="set vllm_version <= 0.4.1",
    ),
    Case(
        "arch-not-a-list",
        LLAMA8,
        {"architectures": 5},
        rc=BAD_INPUT,
        input="model_config.architectures",
        fix='e.g. "architectures": ["LlamaForCausalLM"]',
    ),
    # --- config.json values vLLM could not load ------------------------------------------------------
    Case(
        "string-max-pos",
        LLAMA8,
        {"max_position_embeddings": "131072"},
        rc=BAD_INPUT,
        input="model_config.max_position_embeddings",
        fix="write it as a JSON number, e.g. 131072",
    ),
    Case(
        "string-kv-heads",
        LLAMA8,
        {"num_key_value_heads": "8"},
        rc=BAD_INPUT,
        input="model_config.num_key_value_heads",
        fix="write it as a JSON number, e.g. 8",
    ),
    Case(
        "string-heads",
        LLAMA8,
        {"num_attention_heads": "32"},
        rc=BAD_INPUT,
        input="model_config.num_attention_heads",
        fix="write it as a JSON number, e.g. 32",
    ),
    Case(
        "string-hidden",
        LLAMA8,
        {"hidden_size": "4096"},
        rc=BAD_INPUT,
        input="model_config.hidden_size",
        fix="write it as a JSON number, e.g. 4096",
    ),
    Case(
        "fractional-layers",
        LLAMA8,
        {"num_hidden_layers": 31.5},
        rc=BAD_INPUT,
        input="model_config.num_hidden_layers",
        fix="write it as a JSON number",
    ),
    Case(
        "bool-intermediate",
        LLAMA8,
        {"intermediate_size": True},
        rc=BAD_INPUT,
        input="model_config.intermediate_size",
        fix="write it as a JSON number",
    ),
    Case(
        "word-vocab",
        LLAMA8,
        {"vocab_size": "big"},
        rc=BAD_INPUT,
        input="model_config.vocab_size",
        fix="write it as a JSON number",
    ),
    Case(
        "string-head-dim",
        QWEN3_8,
        {"head_dim": "128"},
        rc=BAD_INPUT,
        input="model_config.head_dim",
        fix="write it as a JSON number, e.g. 128",
    ),
    Case(
        "zero-kv-heads",
        LLAMA8,
        {"num_key_value_heads": 0},
        rc=BAD_INPUT,
        input="model_config.num_key_value_heads",
        fix="set it to the value in the checkpoint's published",
    ),
    Case(
        "negative-kv-heads",
        LLAMA8,
        {"num_key_value_heads": -1},
        rc=BAD_INPUT,
        input="model_config.num_key_value_heads",
        fix="set it to the value in the checkpoint's published",
    ),
    Case(
        "zero-head-dim",
        QWEN3_8,
        {"head_dim": 0},
        rc=BAD_INPUT,
        input="model_config.head_dim",
        fix="set it to the value in the checkpoint's published",
    ),
    Case(
        "zero-hidden",
        LLAMA8,
        {"hidden_size": 0},
        rc=BAD_INPUT,
        input="model_config.hidden_size",
        fix="set it to the value in the checkpoint's published",
    ),
    Case(
        "zero-layers",
        LLAMA8,
        {"num_hidden_layers": 0},
        rc=BAD_INPUT,
        input="model_config.num_hidden_layers",
        fix="set it to the value in the checkpoint's published",
    ),
    Case(
        "zero-max-pos",
        LLAMA8,
        {"max_position_embeddings": 0},
        rc=BAD_INPUT,
        input="model_config.max_position_embeddings",
        fix="set it to the value in the checkpoint's published",
    ),
    Case(
        "heads-not-divisible-by-kv",
        LLAMA8,
        {"num_key_value_heads": 6},
        rc=BAD_INPUT,
        input="model_config.num_key_value_heads",
        fix="set num_key_value_heads to a divisor of num_attention_heads (32)",
    ),
    Case(
        "text-config-string",
        VL,
        {"text_config.num_key_value_heads": "8"},
        rc=BAD_INPUT,
        input="model_config.text_config.num_key_value_heads",
        fix="write it as a JSON number, e.g. 8",
    ),
    Case(
        "text-config-heads-vs-kv",
        VL,
        {"text_config.num_key_value_heads": 5},
        rc=BAD_INPUT,
        input="model_config.text_config.num_key_value_heads",
        fix="set num_key_value_heads to a divisor",
    ),
    Case(
        "string-rope-factor",
        LLAMA8,
        {"rope_scaling.factor": "8.0"},
        rc=BAD_INPUT,
        input="model_config.rope_scaling.factor",
        fix="write it as a JSON number, e.g. 4.0",
    ),
    Case(
        "rope-not-object",
        LLAMA8,
        {"rope_scaling": "llama3"},
        rc=BAD_INPUT,
        input="model_config.rope_scaling",
        fix="e.g. null",
    ),
    Case(
        "string-rope-original",
        LLAMA8,
        {"rope_scaling.original_max_position_embeddings": "8192"},
        rc=BAD_INPUT,
        input="model_config.rope_scaling.original_max_position_embeddings",
        fix="write it as a JSON number, e.g. 8192",
    ),
    Case(
        "zero-block-size",
        QWEN3_FP8,
        {"quantization_config.weight_block_size": [0, 0]},
        rc=BAD_INPUT,
        input="model_config.quantization_config.weight_block_size",
        fix="e.g. [128, 128]",
    ),
    Case(
        "short-block-size",
        QWEN3_FP8,
        {"quantization_config.weight_block_size": [128]},
        rc=BAD_INPUT,
        input="model_config.quantization_config.weight_block_size",
        fix="e.g. [128, 128]",
    ),
    Case(
        "string-block-size",
        QWEN3_FP8,
        {"quantization_config.weight_block_size": ["128", "128"]},
        rc=BAD_INPUT,
        input="model_config.quantization_config.weight_block_size",
        fix="e.g. [128, 128]",
    ),
    Case(
        "quant-config-string",
        LLAMA8,
        {"quantization_config": "fp8"},
        rc=BAD_INPUT,
        input="model_config.quantization_config",
        fix="remove it or restore the object",
    ),
    Case(
        "quant-method-number",
        LLAMA8,
        {"quantization_config": {"quant_method": 8}},
        rc=BAD_INPUT,
        input="model_config.quantization_config.quant_method",
        fix='e.g. "fp8"',
    ),
    Case(
        "string-group-size",
        LLAMA8,
        {"quantization_config": {**AWQ, "group_size": "128"}},
        rc=BAD_INPUT,
        input="model_config.quantization_config.group_size",
        fix="write it as a JSON number",
    ),
    Case(
        "string-kv-lora",
        DSV3,
        {"kv_lora_rank": "512"},
        rc=BAD_INPUT,
        input="model_config.kv_lora_rank",
        fix="write it as a JSON number, e.g. 512",
    ),
    Case(
        "string-moe-inter",
        "Qwen__Qwen3-30B-A3B",
        {"moe_intermediate_size": "768"},
        rc=BAD_INPUT,
        input="model_config.moe_intermediate_size",
        fix="write it as a JSON number, e.g. 768",
    ),
    Case(
        "negative-top-k",
        "Qwen__Qwen3-30B-A3B",
        {"num_experts_per_tok": -2},
        rc=BAD_INPUT,
        input="model_config.num_experts_per_tok",
        fix="set it to the value in the checkpoint's published",
    ),
    Case(
        "string-window",
        "mistralai__Mixtral-8x7B-v0.1",
        {"sliding_window": "4096"},
        rc=BAD_INPUT,
        input="model_config.sliding_window",
        fix="write it as a JSON number, e.g. 4096",
    ),
    Case(
        "vision-string",
        VL,
        {"vision_config.depth": "deep"},
        rc=BAD_INPUT,
        input="model_config.vision_config.depth",
        fix="write it as a JSON number",
    ),
    Case(
        "vision-zero-heads",
        VL,
        {"vision_config.num_heads": 0},
        rc=BAD_INPUT,
        input="model_config.vision_config.num_heads",
        fix="set it to the value in the checkpoint's published",
    ),
    Case(
        "layer-types-number",
        VL,
        {"text_config.layer_types": 7},
        rc=BAD_INPUT,
        input="model_config.text_config.layer_types",
        fix="or remove it",
    ),
    Case(
        "sub-config-unreadable",
        VL,
        {"audio_config": {"d_model": "wide", "encoder_layers": 2}},
        rc=BAD_INPUT,
        input="model_config",
        fix="compare it with the checkpoint's published config.json",
    ),
    Case(
        "non-utf8",
        LLAMA8,
        raw=b'{"architectures": ["Llama\xff"]}',
        rc=BAD_INPUT,
        input="model-config",
        fix="save it as UTF-8",
    ),
    Case(
        "not-json",
        LLAMA8,
        raw=b'{"architectures": [',
        rc=BAD_INPUT,
        input="model-config",
        fix="repair the JSON",
    ),
    Case(
        "json-array",
        LLAMA8,
        raw=b"[1, 2]",
        rc=BAD_INPUT,
        input="model-config",
        fix="pass the model's config.json",
    ),
    Case(
        "dtype-word",
        LLAMA8,
        {"torch_dtype": "bf17"},
        rc=BAD_INPUT,
        input="model_config.torch_dtype",
        fix='e.g. "bfloat16"',
    ),
    Case(
        "model-type-number",
        LLAMA8,
        {"model_type": 7},
        rc=BAD_INPUT,
        input="model_config.model_type",
        fix='e.g. "llama"',
    ),
    Case(
        "tie-string",
        LLAMA8,
        {"tie_word_embeddings": "no"},
        rc=BAD_INPUT,
        input="model_config.tie_word_embeddings",
        fix="write true or false",
    ),
    Case(
        "rope-theta-string",
        LLAMA8,
        {"rope_theta": "500000"},
        rc=BAD_INPUT,
        input="model_config.rope_theta",
        fix="write it as a JSON number",
    ),
    # --- quantization: methods the release lacks, minimum compute capability ---------------------------
    Case(
        "fp8-ckpt-on-t4-0.13",
        QWEN3_FP8,
        flags={**T4, "--vllm-version": "0.13.0"},
        input="model_config.quantization_config.quant_method",
        fix="compute capability >= 8.0",
    ),
    Case(
        "fp8-option-on-v100",
        LLAMA8,
        flags={**V100, "--vllm-version": "0.11.0", "--quantization": "fp8"},
        input="quantization",
        fix="compute capability >= 8.0",
    ),
    Case(
        "fp8-option-on-v100-0.14",
        LLAMA8,
        flags={**V100, "--vllm-version": "0.14.0", "--quantization": "fp8"},
        input="quantization",
        fix="compute capability >= 7.5",
    ),
    Case(
        "fp8-on-0.4.0",
        LLAMA8,
        flags=V("0.4.0", **{"--quantization": "fp8"}),
        input="quantization",
        fix="set vllm_version >= 0.4.1",
    ),
    Case(
        "fp8-on-4090-0.4.1",
        LLAMA8,
        flags={**RTX4090, "--vllm-version": "0.4.1", "--quantization": "fp8"},
        input="quantization",
        fix="compute capability >= 9.0",
    ),
    Case(
        "mxfp4-on-t4",
        OSS20,
        flags={**T4, "--vllm-version": "0.11.0"},
        input="model_config.quantization_config.quant_method",
        fix="compute capability >= 8.0",
    ),
    Case(
        "mxfp4-on-0.10.0",
        OSS20,
        flags=V("0.10.0"),
        input="model_config.quantization_config.quant_method",
        fix="set vllm_version >= 0.10.1",
    ),
    Case(
        "unknown-ckpt-method",
        LLAMA8,
        {"quantization_config": {"quant_method": "foo"}},
        input="model_config.quantization_config.quant_method",
        fix="set model_config.quantization_config.quant_method to the method the checkpoint was quantized",
    ),
    Case(
        "awq-on-v100",
        LLAMA8,
        {"quantization_config": AWQ},
        flags={**V100, "--vllm-version": "0.11.0"},
        input="model_config.quantization_config.quant_method",
        fix="compute capability >= 7.5",
    ),
    Case(
        "bnb-after-removal",
        LLAMA8,
        flags=V("0.30.0", **{"--quantization": "bitsandbytes"}),
        input="quantization",
        fix="set vllm_version <= 0.27.1",
    ),
    Case(
        "modelopt-on-a100-0.20",
        "nvidia__Llama-3.1-70B-Instruct-FP8",
        flags={**A100, "--vllm-version": "0.20.0"},
        input="model_config.quantization_config.quant_method",
        fix="compute capability >= 8.9",
    ),
    Case(
        "experts-int8-on-t4",
        "Qwen__Qwen3-30B-A3B",
        flags={**T4, "--vllm-version": "0.11.0", "--quantization": "experts_int8"},
        input="quantization",
        fix="compute capability >= 8.0",
    ),
    Case(
        "unknown-quant-option",
        LLAMA8,
        flags={"--quantization": "foo"},
        rc=BAD_INPUT,
        input="quantization",
        fix="unset quantization",
    ),
    Case(
        "awq-option-unquantized",
        LLAMA8,
        flags={"--quantization": "awq"},
        rc=BAD_INPUT,
        input="quantization",
        fix="unset quantization, set it to fp8",
    ),
    Case(
        "quant-mismatch",
        QWEN3_FP8,
        flags={"--quantization": "awq"},
        input="quantization",
        fix="remove the quantization option",
    ),
    # --- platform minimum -----------------------------------------------------------------------------
    Case(
        "pascal-gtx1080",
        LLAMA8,
        flags={"--compute-capability": "6.1", "--gpu-name": "GTX 1080"},
        input="gpu.compute_capability",
        fix="compute capability >= 7.0",
    ),
    Case(
        "pascal-gptq",
        LLAMA8,
        {"quantization_config": GPTQ},
        flags={**P100, "--vllm-version": "0.11.0"},
        input="gpu.compute_capability",
        fix="compute capability >= 7.0",
    ),
    Case(
        "maxwell",
        LLAMA8,
        flags={"--compute-capability": "5.2"},
        input="gpu.compute_capability",
        fix="compute capability >= 7.0",
    ),
    # --- KV-cache dtype -------------------------------------------------------------------------------
    Case(
        "ds-mla-on-llama",
        LLAMA8,
        flags={"--kv-cache-dtype": "fp8_ds_mla"},
        input="kv_cache_dtype",
        fix="set kv_cache_dtype fp8 or auto",
    ),
    Case(
        "ds-mla-on-dense-mla",
        DSV3,
        flags={"--kv-cache-dtype": "fp8_ds_mla"},
        input="kv_cache_dtype",
        fix="set kv_cache_dtype fp8 or auto",
    ),
    Case(
        "ds-mla-on-0.10",
        DSV3,
        {"index_topk": 2048},
        flags=V("0.10.0", **{"--kv-cache-dtype": "fp8_ds_mla"}),
        input="kv_cache_dtype",
        fix="set vllm_version >= 0.11.1",
    ),
    Case(
        "ds-mla-on-a100",
        DSV3,
        {"index_topk": 2048},
        flags={**A100, "--kv-cache-dtype": "fp8_ds_mla"},
        input="kv_cache_dtype",
        fix="use such GPUs, or set kv_cache_dtype auto",
    ),
    Case(
        "bf16-kv-on-0.10",
        LLAMA8,
        flags=V("0.10.0", **{"--kv-cache-dtype": "bfloat16"}),
        input="kv_cache_dtype",
        fix="set vllm_version >= 0.11.0",
    ),
    Case(
        "fp16-kv-on-0.17",
        LLAMA8,
        flags=V("0.17.0", **{"--kv-cache-dtype": "float16"}),
        input="kv_cache_dtype",
        fix="set vllm_version >= 0.18.0",
    ),
    Case(
        "fp8-kv-on-0.2.7",
        LLAMA8,
        flags=V("0.2.7", **{"--kv-cache-dtype": "fp8"}),
        input="kv_cache_dtype",
        fix="set vllm_version >= 0.4.1",
    ),
    Case(
        "e4m3-kv-on-0.4.1",
        LLAMA8,
        flags=V("0.4.1", **{"--kv-cache-dtype": "fp8_e4m3"}),
        input="kv_cache_dtype",
        fix="set vllm_version >= 0.4.3",
    ),
    Case(
        "kv-dtype-word",
        LLAMA8,
        flags={"--kv-cache-dtype": "int3"},
        rc=BAD_INPUT,
        input="kv_cache_dtype",
        fix="set kv_cache_dtype auto or fp8",
    ),
    # --- GPU memory in the wrong unit -----------------------------------------------------------------
    Case(
        "gib-as-mib",
        LLAMA8,
        flags={"--gpu-memory-mib": "80", "--gpu-memory-reserved-mib": None},
        rc=BAD_INPUT,
        input="gpu.memory_mib",
        fix="pass nvidia-smi memory.total in MiB",
    ),
    Case(
        "bytes-as-mib",
        LLAMA8,
        flags={"--gpu-memory-mib": "85520809984"},
        rc=BAD_INPUT,
        input="gpu.memory_mib",
        fix="pass nvidia-smi memory.total in MiB (81559)",
    ),
    Case(
        "kib-as-mib",
        LLAMA8,
        flags={"--gpu-memory-mib": "83516416"},
        rc=BAD_INPUT,
        input="gpu.memory_mib",
        fix="pass nvidia-smi memory.total in MiB (81559)",
    ),
    Case(
        "tiny-mib",
        LLAMA8,
        flags={"--gpu-memory-mib": "1500", "--gpu-memory-reserved-mib": None},
        rc=BAD_INPUT,
        input="gpu.memory_mib",
        fix="pass nvidia-smi memory.total in MiB",
    ),
    Case(
        "zero-mib",
        LLAMA8,
        flags={"--gpu-memory-mib": "0"},
        rc=BAD_INPUT,
        input="gpu.memory_mib",
        fix="set gpu.memory_mib >= 1",
    ),
    Case(
        "zero-gpus",
        LLAMA8,
        flags={"--gpus-per-node": "0"},
        rc=BAD_INPUT,
        input="gpu.count",
        fix="set gpu.count >= 1",
    ),
    Case(
        "bad-cc",
        LLAMA8,
        flags={"--compute-capability": "hopper"},
        rc=BAD_INPUT,
        input="gpu.compute_capability",
        fix="pass nvidia-smi --query-gpu=compute_cap",
    ),
    Case(
        "reserved-over-total",
        LLAMA8,
        flags={"--gpu-memory-reserved-mib": "90000"},
        rc=BAD_INPUT,
        input="gpu.memory_reserved_mib",
        fix="pass nvidia-smi -q 'FB Memory Usage: Reserved'",
    ),
    # --- options vLLM refuses -------------------------------------------------------------------------
    Case(
        "tp-6-heads",
        LLAMA8,
        flags={"--tensor-parallel-size": "6"},
        input="tensor_parallel_size",
        fix="set tensor_parallel_size to one of 1, 2, 4, 8",
    ),
    Case(
        "tp-3-kv-heads",
        "Qwen__Qwen2.5-1.5B",
        flags={"--tensor-parallel-size": "3"},
        input="tensor_parallel_size",
        fix="set tensor_parallel_size to one of",
    ),
    Case(
        "tp-over-node",
        LLAMA8,
        flags={"--tensor-parallel-size": "16"},
        input="tensor_parallel_size",
        fix="set tensor_parallel_size <= 8",
    ),
    Case(
        "pp-over-layers",
        "Qwen__Qwen2.5-1.5B",
        flags={"--pipeline-parallel-size": "64", "--nodes": "64"},
        input="pipeline_parallel_size",
        fix="lower pipeline_parallel_size",
    ),
    Case(
        "pp-over-gpus",
        LLAMA8,
        flags={"--pipeline-parallel-size": "4", "--tensor-parallel-size": "8"},
        input="pipeline_parallel_size",
        fix="tensor_parallel_size x pipeline_parallel_size must be <= 8",
    ),
    Case(
        "len-over-derived",
        LLAMA8,
        flags={"--max-model-len": "200000"},
        input="max_model_len",
        fix="set max_model_len <= 131072",
    ),
    Case(
        "mnbt-under-seqs",
        LLAMA8,
        flags={"--max-num-seqs": "512", "--max-num-batched-tokens": "256"},
        input="max_num_batched_tokens",
        fix="set max_num_batched_tokens >= 512",
    ),
    Case("bf16-on-t4", LLAMA8, flags={**T4, "--dtype": "bfloat16"}, input="dtype", fix="set dtype float16"),
    Case(
        "gmu-percent",
        LLAMA8,
        flags={"--gpu-memory-utilization": "90"},
        rc=BAD_INPUT,
        input="gpu_memory_utilization",
        fix="e.g. gpu_memory_utilization 0.9",
    ),
    Case(
        "len-word",
        LLAMA8,
        flags={"--max-model-len": "long"},
        rc=BAD_INPUT,
        input="max_model_len",
        fix="set max_model_len to an integer",
    ),
    Case(
        "kv-bytes-decimal-binary",
        LLAMA8,
        flags={"--kv-cache-memory-bytes": "8.5G"},
        rc=BAD_INPUT,
        input="kv_cache_memory_bytes",
        fix="set kv_cache_memory_bytes to a byte count",
    ),
    Case(
        "version-word",
        LLAMA8,
        flags={"--vllm-version": "latest"},
        rc=BAD_INPUT,
        input="vllm_version",
        fix="set vllm_version to the image's vLLM release",
    ),
    Case(
        "version-too-old",
        LLAMA8,
        flags={"--vllm-version": "0.1.7"},
        rc=BAD_INPUT,
        input="vllm_version",
        fix="set vllm_version >= 0.2.0",
    ),
    Case(
        "concurrency-unreachable",
        "Qwen__Qwen2.5-7B",
        flags={
            **RTX4090,
            "--vllm-version": "0.10.1",
            "--target-concurrency": "4096",
            "--quantization": "bitsandbytes",
        },
        input="target_concurrency",
        fix="lower target_concurrency to <= ",
    ),
    # --- issue #27: inputs a new user gets wrong -------------------------------------------------------
    Case(
        "gpu-name-no-driver-prints",
        QWEN3_8,
        flags={"--gpu-name": "NVIDIA H100 80GB", "--compute-capability": None},
        rc=BAD_INPUT,
        input="gpu.name",
        fix="pass --gpu-name exactly as `nvidia-smi --query-gpu=name --format=csv,noheader` prints it",
    ),
    Case(
        "fp8-kv-on-a100-0.11",
        QWEN3_8,
        flags={**A100, **V("0.11.0", **{"--kv-cache-dtype": "fp8"})},
        input="kv_cache_dtype",
        fix="set kv_cache_dtype fp8_e5m2",
    ),
    Case(
        "fp8-kv-on-t4-0.34",
        QWEN3_8,
        flags={**T4, **V("0.34.0", **{"--kv-cache-dtype": "fp8_e5m2"})},
        input="kv_cache_dtype",
        fix="set kv_cache_dtype auto or float16",
    ),
    Case(
        "fp8-kv-on-t4-0.11",
        QWEN3_8,
        flags={**T4, **V("0.11.0", **{"--kv-cache-dtype": "fp8"})},
        input="kv_cache_dtype",
        fix="set kv_cache_dtype auto",
    ),
    Case(
        "moe-top-k-above-experts",
        "Qwen__Qwen3-30B-A3B",
        {"num_experts_per_tok": 200},
        rc=BAD_INPUT,
        input="model_config.num_experts_per_tok",
        fix="set it to at most 128",
    ),
    Case(
        "moe-top-k-zero",
        "Qwen__Qwen3-30B-A3B",
        {"num_experts_per_tok": 0},
        rc=BAD_INPUT,
        input="model_config.num_experts_per_tok",
        fix="set it to the value in the checkpoint's published config.json",
    ),
    Case(
        "awq-3-bit",
        LLAMA8,
        {"quantization_config": {**AWQ, "bits": 3}},
        rc=BAD_INPUT,
        input="model_config.quantization_config.bits",
        fix="use a 4-bit AWQ checkpoint (bits: 4)",
    ),
    Case(
        "nan-in-config",
        QWEN3_8,
        rc=BAD_INPUT,
        input="model-config",
        fix="replace it with the value in the checkpoint's published file",
        raw=(CONFIGS / QWEN3_8 / "config.json")
        .read_text()
        .replace('"max_position_embeddings": 40960', '"max_position_embeddings": NaN')
        .encode(),
    ),
    Case(
        "infinity-in-config",
        QWEN3_8,
        rc=BAD_INPUT,
        input="model-config",
        fix="replace it with the value in the checkpoint's published file",
        raw=(CONFIGS / QWEN3_8 / "config.json")
        .read_text()
        .replace('"rope_theta": 1000000', '"rope_theta": Infinity')
        .encode(),
    ),
    Case(
        "yarn-on-0.34-max-len",
        QWEN3_8,
        {"rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}},
        flags=V("0.34.0", **{"--max-model-len": "128K"}),
        input="max_model_len",
        fix="set max_position_embeddings to 131072",
    ),
    Case(
        "version-with-trailing-text",
        QWEN3_8,
        flags=V("0.10abc"),
        rc=BAD_INPUT,
        input="vllm_version",
        fix="set vllm_version to the image's vLLM release as it reports it",
    ),
    Case(
        "version-not-a-version",
        QWEN3_8,
        flags=V("latest"),
        rc=BAD_INPUT,
        input="vllm_version",
        fix="set vllm_version to",
    ),
]


def _set(node: dict[str, Any], path: str, value: Any) -> None:
    *parents, last = path.split(".")
    for key in parents:
        node = node.setdefault(key, {})
    if value is DROP:
        node.pop(last, None)
    else:
        node[last] = copy.deepcopy(value)


def write_inputs(case: Case, folder: Path) -> list[str]:
    """The case's config.json (and ModelOpt sidecar) under folder/<model>/, and the CLI's argv."""
    src = CONFIGS / case.model
    dest = folder / case.model
    dest.mkdir(parents=True, exist_ok=True)
    if case.raw is not None:
        (dest / "config.json").write_bytes(case.raw)
    else:
        cfg = json.loads((src / "config.json").read_text())
        for path, value in case.changes.items():
            _set(cfg, path, value)
        (dest / "config.json").write_text(json.dumps(cfg))
    side = src / "hf_quant_config.json"
    if side.is_file():
        (dest / side.name).write_text(side.read_text())
    flags: dict[str, str | None] = {**H100_FLAGS, **case.flags}
    argv = ["--model-config", str(dest / "config.json")]
    for flag, value in flags.items():
        if value is not None:
            argv += [flag, value]
    return argv
