"""Import what an offline vLLM start on Hopper loads, to catch missing dependencies before device time."""

import importlib
import sys

MODULES = [
    "torch",
    "triton",
    "vllm",
    "vllm.entrypoints.llm",
    "vllm.v1.engine.core",
    "vllm.v1.engine.llm_engine",
    "vllm.v1.worker.gpu_worker",
    "vllm.v1.worker.gpu.model_runner",  # vllm/v1/worker/gpu_model_runner.py before 0.34
    "vllm.v1.attention.backends.flash_attn",
    "vllm.v1.attention.backends.mla.flashattn_mla",
    "vllm.model_executor.models.llama",
    "vllm.model_executor.models.qwen3",
    "vllm.model_executor.models.qwen3_moe",
    "vllm.model_executor.models.mixtral",
    "vllm.model_executor.models.deepseek_v2",
    "vllm.model_executor.models.gpt_oss",
    "vllm.model_executor.layers.fused_moe",
    "vllm.model_executor.layers.quantization.mxfp4",
    "vllm.compilation.backends",
    "vllm.entrypoints.openai.api_server",
]
bad = 0
for m in MODULES:
    try:
        importlib.import_module(m)
        print("ok  ", m)
    except Exception as e:  # noqa: BLE001 - report every failure
        bad += 1
        print("FAIL", m, type(e).__name__, e)
import torch  # noqa: E402

print("VERSIONS torch", torch.__version__, "vllm", importlib.import_module("vllm").__version__)
sys.exit(1 if bad else 0)
