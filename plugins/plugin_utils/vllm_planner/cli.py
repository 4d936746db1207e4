"""Command-line front end: `bin/vllm-fleet-plan`.

Exit status: 0 feasible, 2 infeasible (the JSON is still printed), 1 bad input (one line on stderr).
"""

from __future__ import annotations

import argparse
import json
import struct
import sys
from pathlib import Path
from typing import Any, NoReturn

from .errors import GIB, PlanInputError
from .planner import plan

EXIT_OK, EXIT_BAD_INPUT, EXIT_INFEASIBLE = 0, 1, 2


class _BadInput(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise _BadInput(message)


def _parser() -> _Parser:
    p = _Parser(
        prog="vllm-fleet-plan",
        description="Plan vLLM launch parameters (TP/PP, gpu_memory_utilization, max_model_len, "
        "max_num_seqs, "
        "max_num_batched_tokens) and predict per-GPU memory as vLLM accounts it.",
    )
    p.add_argument(
        "--model-config",
        required=True,
        metavar="FILE",
        help="the model's config.json (a ModelOpt hf_quant_config.json beside it is read too)",
    )
    w = p.add_mutually_exclusive_group()
    w.add_argument(
        "--safetensors-index",
        metavar="FILE",
        help="model.safetensors.index.json, a JSON safetensors header, or a .safetensors file",
    )
    w.add_argument("--weights-bytes", type=int, metavar="N", help="total checkpoint tensor bytes")
    p.add_argument("--gpu-memory-mib", type=int, required=True, metavar="N", help="nvidia-smi memory.total")
    p.add_argument("--gpus-per-node", type=int, required=True, metavar="N")
    p.add_argument("--nodes", type=int, default=1, metavar="N")
    p.add_argument("--gpu-name", default="unknown", metavar="NAME")
    p.add_argument("--compute-capability", default="8.0", metavar="X.Y")
    p.add_argument(
        "--gpu-memory-reserved-mib",
        type=int,
        metavar="N",
        help="nvidia-smi -q 'FB Memory Usage: Reserved' (estimated when omitted)",
    )
    p.add_argument("--shared-gpu", action="store_true", help="other processes use these GPUs too")
    p.add_argument("--tensor-parallel-size", type=int, metavar="N")
    p.add_argument("--pipeline-parallel-size", type=int, metavar="N")
    p.add_argument("--max-model-len", metavar="N")
    p.add_argument("--gpu-memory-utilization", type=float, metavar="F")
    p.add_argument("--max-num-seqs", type=int, metavar="N")
    p.add_argument("--max-num-batched-tokens", type=int, metavar="N")
    p.add_argument("--dtype", metavar="D")
    p.add_argument("--kv-cache-dtype", metavar="D")
    p.add_argument("--quantization", metavar="Q")
    p.add_argument("--vllm-version", metavar="X.Y.Z")
    p.add_argument("--enforce-eager", action="store_true")
    p.add_argument("--target-context-len", type=int, metavar="N")
    p.add_argument("--target-concurrency", type=int, metavar="N")
    p.add_argument("--workload", choices=("chat", "batch"))
    p.add_argument("--language-model-only", action="store_true")
    p.add_argument(
        "--kv-cache-memory-bytes",
        metavar="SIZE",
        help="a fixed KV cache per GPU, read as vLLM reads it (8G = 8 GiB, 8g = 8e9); "
        "gpu_memory_utilization then does not size the KV cache",
    )
    p.add_argument(
        "--model-name", metavar="NAME", help="name used in messages (default: from the config path)"
    )
    p.add_argument("--format", choices=("json", "table"), default="json")
    return p


def _read_json(path: str, what: str) -> Any:
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except OSError as exc:
        raise _BadInput(f"{what}: cannot read {path}: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise _BadInput(f"{what}: {path} is not valid JSON ({exc.msg} at line {exc.lineno})") from None


def _read_index(path: str) -> Any:
    if path.endswith(".safetensors"):
        try:
            with open(path, "rb") as fh:
                raw = fh.read(8)
                if len(raw) != 8:
                    raise _BadInput(f"safetensors-index: {path} is too short to be a safetensors file")
                (n,) = struct.unpack("<Q", raw)
                if n > 100 * 1024 * 1024:
                    raise _BadInput(f"safetensors-index: {path} declares a {n}-byte header")
                return json.loads(fh.read(n))
        except OSError as exc:
            raise _BadInput(f"safetensors-index: cannot read {path}: {exc.strerror}") from None
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise _BadInput(f"safetensors-index: {path} has no JSON header") from None
    return _read_json(path, "safetensors-index")


def _model_config(path: str) -> dict[str, Any]:
    cfg = _read_json(path, "model-config")
    if not isinstance(cfg, dict):
        raise _BadInput(f"model-config: {path} does not hold a JSON object")
    side = Path(path).with_name("hf_quant_config.json")
    if "quantization_config" not in cfg and side.is_file():
        cfg["hf_quant_config"] = _read_json(str(side), "hf_quant_config")
    return cfg


def _options(ns: argparse.Namespace, cfg_path: str) -> dict[str, Any]:
    opts: dict[str, Any] = {}
    for key in (
        "tensor_parallel_size",
        "pipeline_parallel_size",
        "max_model_len",
        "gpu_memory_utilization",
        "max_num_seqs",
        "max_num_batched_tokens",
        "dtype",
        "kv_cache_dtype",
        "quantization",
        "vllm_version",
        "target_context_len",
        "target_concurrency",
        "workload",
        "model_name",
        "kv_cache_memory_bytes",
    ):
        v = getattr(ns, key)
        if v is not None:
            opts[key] = v
    if ns.enforce_eager:
        opts["enforce_eager"] = True
    if ns.language_model_only:
        opts["language_model_only"] = True
    if "model_name" not in opts:
        parent = Path(cfg_path).resolve().parent.name
        if parent:
            opts["model_name"] = parent.replace("__", "/")
    return opts


def format_table(result: dict[str, Any]) -> str:
    g = result["per_gpu"]

    def gib(n: int) -> str:
        return f"{n / GIB:8.2f} GiB"

    rows = [
        ("model", result.get("model", "")),
        ("feasible", "yes" if result["feasible"] else "NO"),
        ("vLLM", f"{result['vllm_version']} ({result['vllm_family']})"),
        ("tensor_parallel_size", result["tensor_parallel_size"]),
        ("pipeline_parallel_size", result["pipeline_parallel_size"]),
        ("gpu_memory_utilization", result["gpu_memory_utilization"]),
        ("max_model_len", result["max_model_len"]),
        ("max_num_seqs", result["max_num_seqs"]),
        ("max_num_batched_tokens", result["max_num_batched_tokens"]),
        ("dtype / kv_cache_dtype", f"{result['dtype']} / {result['kv_cache_dtype']}"),
        ("quantization", result["quantization"] or "none"),
        ("per GPU: CUDA total", gib(g["total_bytes"])),
        ("  weights", gib(g["weights_bytes"])),
        ("  activation peak", gib(g["activation_peak_bytes"])),
        ("  non-torch", gib(g["non_torch_bytes"])),
        ("  CUDA graphs", gib(g["cuda_graph_bytes"])),
        ("  KV cache", gib(g["kv_cache_bytes"])),
        ("KV bytes per token", f"{result['kv_bytes_per_token']:,}"),
        ("KV cache tokens", f"{result['kv_cache_tokens']:,} (block size {result['block_size']})"),
        ("max concurrency", f"{result['max_concurrency']:.2f}x at {result['max_model_len']:,} tokens"),
    ]
    width = max(len(k) for k, _ in rows)
    lines = [f"{k.ljust(width)}  {v}" for k, v in rows]
    if result["vllm_args"]:
        lines.append(f"{'vllm serve args'.ljust(width)}  {' '.join(result['vllm_args'])}")
    for w in result["warnings"]:
        lines.append(f"WARNING: {w}")
    for e in result["errors"]:
        lines.append(f"ERROR: {e}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    try:
        ns = _parser().parse_args(argv)
        cfg = _model_config(ns.model_config)
        index = _read_index(ns.safetensors_index) if ns.safetensors_index else None
        gpu = {
            "name": ns.gpu_name,
            "memory_mib": ns.gpu_memory_mib,
            "count": ns.gpus_per_node,
            "compute_capability": ns.compute_capability,
            "nodes": ns.nodes,
            "shared": ns.shared_gpu,
        }
        if ns.gpu_memory_reserved_mib is not None:
            gpu["memory_reserved_mib"] = ns.gpu_memory_reserved_mib
        result = plan(
            cfg,
            gpu,
            safetensors_index=index,
            weights_bytes=ns.weights_bytes,
            options=_options(ns, ns.model_config),
        )
    except (_BadInput, PlanInputError) as exc:
        print(f"vllm-fleet-plan: error: {str(exc).splitlines()[0]}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if ns.format == "table":
        print(format_table(result))
    else:
        print(json.dumps(result, indent=2))
    return EXIT_OK if result["feasible"] else EXIT_INFEASIBLE


if __name__ == "__main__":
    sys.exit(main())
