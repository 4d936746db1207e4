"""Record real vLLM 0.34 startups on the GPU host: each start in its own process group, its log kept.

usage: python3 tests/gpu/record_034.py OUTDIR NAME [NAME ...]   (after `source tests/gpu/host_setup.sh`)
Each NAME is a start below; the model is a real config.json from tests/data/model-configs, the weights are
vLLM's dummy weights (load_format="dummy", the memory of real ones of the same dtypes).
"""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = ROOT / "tests" / "data" / "model-configs"

# name: (model folder, usage, engine args)
STARTS = {
    "llama-3.1-8b-offline": ("meta-llama__Meta-Llama-3.1-8B", "offline", {}),
    "llama-3.1-8b-serve-eager": ("meta-llama__Meta-Llama-3.1-8B", "serve", {"enforce_eager": True}),
    "llama-3.1-8b-serve-kvfp8-eager": (
        "meta-llama__Meta-Llama-3.1-8B",
        "serve",
        {"enforce_eager": True, "kv_cache_dtype": "fp8"},
    ),
    "qwen3-8b-serve-gmu09-eager": (
        "Qwen__Qwen3-8B",
        "serve",
        {"enforce_eager": True, "gpu_memory_utilization": 0.9},
    ),
    "qwen3-8b-serve-noext-eager": (
        "Qwen__Qwen3-8B",
        "serve",
        {"enforce_eager": True, "enable_extensible_kv_cache": False},
    ),
    "qwen3-8b-serve": ("Qwen__Qwen3-8B", "serve", {}),
    "qwen3-30b-a3b-serve-eager": ("Qwen__Qwen3-30B-A3B", "serve", {"enforce_eager": True}),
    "gpt-oss-20b-serve-eager": ("openai__gpt-oss-20b", "serve", {"enforce_eager": True}),
    "gpt-oss-20b-offline": ("openai__gpt-oss-20b", "offline", {}),
    "qwen3-14b-serve-gmu085-eager": (
        "Qwen__Qwen3-14B",
        "serve",
        {"enforce_eager": True, "gpu_memory_utilization": 0.85},
    ),
    "llama-3.2-3b-offline-eager-32k": (
        "meta-llama__Llama-3.2-3B",
        "offline",
        {"enforce_eager": True, "max_model_len": 32768},
    ),
    "qwen2.5-7b-serve-eager": ("Qwen__Qwen2.5-7B", "serve", {"enforce_eager": True}),
    "mixtral-8x7b-serve-eager-fails": ("mistralai__Mixtral-8x7B-v0.1", "serve", {"enforce_eager": True}),
    "qwen3-32b-fp8-serve-eager": ("Qwen__Qwen3-32B-FP8", "serve", {"enforce_eager": True}),
}

CHILD = r"""
import json, sys, time
t0 = time.time()
import torch, vllm
print("VERSIONS vllm", vllm.__version__, "torch", torch.__version__, torch.version.cuda, flush=True)
from vllm import EngineArgs
from vllm.usage.usage_lib import UsageContext
from vllm.v1.engine.llm_engine import LLMEngine
model, usage, args = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
ea = EngineArgs(model=model, load_format="dummy", skip_tokenizer_init=True, **args)
ctx = UsageContext.OPENAI_API_SERVER if usage == "serve" else UsageContext.LLM_CLASS
eng = LLMEngine.from_engine_args(ea, usage_context=ctx)
cc = eng.vllm_config.cache_config
print("RESULT", json.dumps({"num_gpu_blocks": cc.num_gpu_blocks, "block_size": cc.block_size,
      "extensible": cc.enable_extensible_kv_cache, "gmu": cc.gpu_memory_utilization,
      "max_model_len": eng.vllm_config.model_config.max_model_len,
      "max_num_seqs": eng.vllm_config.scheduler_config.max_num_seqs,
      "max_num_batched_tokens": eng.vllm_config.scheduler_config.max_num_batched_tokens}), flush=True)
print(f"READY after {time.time() - t0:.1f}s", flush=True)
"""


def smi_used() -> str:
    try:
        return subprocess.run(
            ["nvidia-smi", "--query-gpu=memory.used,memory.total,name", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
        ).stdout.strip()
    except Exception as e:  # noqa: BLE001
        return f"nvidia-smi failed: {e}"


def model_dir(folder: str) -> Path:
    """A folder holding the model's real config.json (and its generation/quantization side files)."""
    mdir = Path("/tmp/models") / folder
    mdir.mkdir(parents=True, exist_ok=True)
    (mdir / "config.json").write_bytes((CONFIGS / folder / "config.json").read_bytes())
    for side in ("generation_config.json", "hf_quant_config.json"):
        if (CONFIGS / folder / side).is_file():
            (mdir / side).write_bytes((CONFIGS / folder / side).read_bytes())
    return mdir


def wait_idle() -> str:
    """nvidia-smi's line once the GPU is idle (the last start's memory is returned when its group is gone)."""
    used = ""
    for _ in range(30):
        used = smi_used()
        try:
            if int(used.split(",")[0].split()[0]) < 1024:
                break
        except (ValueError, IndexError):
            break
        time.sleep(1)
    return used


def run_in_group(argv: list[str], log, limit: float) -> int | str:
    """Run argv in its own process group, its output into log; its exit code, or "timeout" after limit
    seconds. The whole group is killed either way: vLLM's workers must not hold the GPU for the next run."""
    p = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        rc: int | str = p.wait(timeout=limit)
    except subprocess.TimeoutExpired:
        rc = "timeout"
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    p.wait()
    return rc


def plain_lines(log: Path) -> None:
    """vLLM's progress bars end lines with a carriage return; the logs are committed, and the collection's
    sanity test accepts only newline endings."""
    raw = log.read_bytes()
    log.write_bytes(raw.replace(b"\r\n", b"\n").replace(b"\r", b"\n"))


def main():
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    limit = float(os.environ.get("START_LIMIT_S", "240"))
    for name in sys.argv[2:]:
        folder, usage, args = STARTS[name]
        mdir = model_dir(folder)
        used = wait_idle()
        log = out / f"{name}.log"
        with log.open("w") as f:
            f.write(f"START {name} model={folder} usage={usage} args={json.dumps(args)}\n")
            f.write(f"NVIDIA-SMI before: {used}\n")
            f.flush()
            t = time.time()
            rc = run_in_group([sys.executable, "-c", CHILD, str(mdir), usage, json.dumps(args)], f, limit)
            f.write(f"\nEXIT {rc} after {time.time() - t:.1f}s\n")
        plain_lines(log)
        print(name, "rc", rc, f"{time.time() - t:.0f}s", flush=True)


if __name__ == "__main__":
    main()
