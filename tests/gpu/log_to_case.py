"""Turn a startup log recorded by record_034.py (or a features_034.py run, whose first line names its model
and engine args) into a tests/accuracy/cases/*.json (the log's figures only).

usage: python3 tests/gpu/log_to_case.py LOG GPU_NAME MEMORY_MIB > case.json
"""

import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from record_034 import STARTS  # noqa: E402


def figures(text):
    out = {}
    m = re.search(r"Model loading took ([\d.]+) GiB", text)
    if m:
        out["weights_gib"] = float(m.group(1))
    m = re.findall(r"Available KV cache memory: ([\d.]+) GiB", text)
    if m:
        out["available_kv_gib"] = float(m[-1])
    m = re.findall(r"GPU KV cache size: ([\d,]+) tokens", text)
    if m:
        out["kv_cache_tokens"] = int(m[-1].replace(",", ""))
    m = re.search(r"Graph capturing finished in \d+ secs, took ([\d.]+) GiB", text)
    if m:
        out["cuda_graph_gib"] = float(m.group(1))
    return out


def main():
    log, gpu_name, mib = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    name = log.stem
    text = log.read_text(errors="replace")
    head = re.match(r"FEATURE (\S+) mode=\S+ model=(\S+) args=(\{.*\}) limit=", text)
    if head:
        # features_034 starts LLM() with dummy weights; a plain start of it is a start like record_034's
        folder, usage, args = head.group(2), "offline", json.loads(head.group(3))
        if "GPU KV cache size" in text:
            text += "\nREADY (features_034: the engine started)"
    else:
        folder, usage, args = STARTS[name]
    expected = figures(text)
    lines = [
        ln.strip()
        for ln in text.splitlines()
        if re.search(
            r"Model loading took|Available KV cache|GPU KV cache size|Extended KV cache|Maximum concurrency"
            r"|Graph capturing finished|torch peak memory|non-torch|NVIDIA-SMI before|VERSIONS|RESULT|READY",
            ln,
        )
    ]
    if "READY" not in text:
        err = [ln for ln in text.splitlines() if re.search(r"Error|error", ln)]
        expected = {"starts": False, "error": (err[-1].strip() if err else "no READY line")[:400]} | expected
    case_args = {
        k: v
        for k, v in args.items()
        if k in ("gpu_memory_utilization", "max_model_len", "kv_cache_dtype", "enforce_eager")
    }
    gpu_slug = "h200" if "H200" in gpu_name else "h100"
    case = {
        "name": f"{gpu_slug}-v0.34-{name}",
        "source": f"tests/data/vllm-logs/{gpu_slug}-0.34.0-{name}.log (#27, tests/gpu/record_034.py)",
        "notes": f"vLLM 0.34.0, torch 2.14.0+cu130 on one {gpu_name}; dummy weights of the real config, "
        f"{'vllm serve' if usage == 'serve' else 'LLM()'} usage context, args {json.dumps(args)}. Log: "
        + " | ".join(lines)[:1500],
        "model": folder,
        "gpu": {"name": gpu_name, "memory_mib": mib, "count": 1, "compute_capability": "9.0"},
        "vllm_version": "0.34.0",
        "usage": usage,
        "args": case_args,
        "expected": expected,
    }
    print(json.dumps(case, indent=2))


if __name__ == "__main__":
    main()
