"""Command-line front end: `bin/vllm-fleet-plan`.

Exit status: 0 feasible, 2 infeasible (the JSON is still printed), 1 bad input (one line on stderr),
3 a planner bug (one line on stderr naming the input file; no traceback).
"""

from __future__ import annotations

import argparse
import json
import os
import stat
import struct
import sys
from pathlib import Path
from typing import Any, NoReturn

from .errors import GIB, PlanInputError
from .options import add_cli_arguments, gpu_from_cli, options_from_cli
from .planner import plan

EXIT_OK, EXIT_BAD_INPUT, EXIT_INFEASIBLE, EXIT_BUG = 0, 1, 2, 3


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
    add_cli_arguments(p)  # the GPU flags and one flag per planner option (options.OPTIONS)
    p.add_argument("--format", choices=("json", "table"), default="json")
    return p


def _regular_file(path: str, what: str) -> None:
    """Refuse what is not a regular file: opening a FIFO waits for a writer forever, a device never ends."""
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        raise _BadInput(f"{what}: cannot read {path}: {exc.strerror}. Fix: check the path.") from None
    if not stat.S_ISREG(mode):
        kind = "a directory" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode) else "not a file"
        raise _BadInput(
            f"{what}: {path} is {kind}, not a regular file. Fix: pass the path of the file itself "
            "(e.g. the model's config.json), not a pipe, device or folder."
        )


class _NotJsonNumber(Exception):
    pass


def _no_constant(name: str) -> Any:
    raise _NotJsonNumber(name)


def _read_json(path: str, what: str) -> Any:
    _regular_file(path, what)
    try:
        with open(path, encoding="utf-8") as fh:
            # JSON has no NaN or Infinity, though Python's json reads them: refuse them here
            return json.load(fh, parse_constant=_no_constant)
    except OSError as exc:
        raise _BadInput(f"{what}: cannot read {path}: {exc.strerror}. Fix: check the path.") from None
    except json.JSONDecodeError as exc:
        raise _BadInput(
            f"{what}: {path} is not valid JSON ({exc.msg} at line {exc.lineno}). Fix: repair the JSON, or "
            "download the file again."
        ) from None
    except _NotJsonNumber as exc:  # NaN, Infinity or -Infinity
        raise _BadInput(
            f"{what}: {path} holds {exc}, which is not a JSON number (vLLM cannot use it as a size or "
            "count). Fix: replace it with the value in the checkpoint's published file, or download the "
            "file again."
        ) from None
    except UnicodeDecodeError as exc:
        raise _BadInput(
            f"{what}: {path} is not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset {exc.start}). "
            "Fix: save it as UTF-8 (JSON files are UTF-8), e.g. with iconv -t UTF-8."
        ) from None


def _read_index(path: str) -> Any:
    if path.endswith(".safetensors"):
        _regular_file(path, "safetensors-index")
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
        raise _BadInput(
            f"model-config: {path} does not hold a JSON object. Fix: pass the model's config.json."
        )
    side = Path(path).with_name("hf_quant_config.json")
    if "quantization_config" not in cfg and side.is_file():
        cfg["hf_quant_config"] = _read_json(str(side), "hf_quant_config")
    return cfg


def _options(ns: argparse.Namespace, cfg_path: str) -> dict[str, Any]:
    opts = options_from_cli(ns)
    if "model_name" not in opts:
        parent = Path(cfg_path).resolve().parent.name
        if parent:
            opts["model_name"] = parent.replace("__", "/")
    return opts


# the two sets of launch figures, labelled so one is not taken for the other
_RECOMMENDED = "RECOMMENDED LAUNCH"
_GIVEN_ARGS = "vLLM with only the given args (NOT the plan)"
_ARGS = "vllm serve args (recommended)"


def format_table(result: dict[str, Any]) -> str:
    g = result["per_gpu"]

    def gib(n: int) -> str:
        return f"{n / GIB:8.2f} GiB"

    rows = [
        ("model", result.get("model", "")),
        ("feasible", "yes" if result["feasible"] else "NO"),
        ("vLLM", f"{result['vllm_version']} ({result['vllm_family']})"),
        (_RECOMMENDED, "the plan's own figures: launch with the vllm serve args below"),
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
        (
            "  CUDA graphs",
            f"{gib(g['cuda_graph_bytes'])} ({g['cuda_graph_reserved_bytes'] / GIB:.2f} GiB in the budget)",
        ),
        ("  KV cache", gib(g["kv_cache_bytes"])),
        ("KV bytes per token", f"{result['kv_bytes_per_token']:,}"),
        ("KV cache tokens", f"{result['kv_cache_tokens']:,} (block size {result['block_size']})"),
        ("max concurrency", f"{result['max_concurrency']:.2f}x at {result['max_model_len']:,} tokens"),
    ]
    d = result.get("vllm_with_given_args") or result.get("vllm_defaults")
    if d:
        own = (
            f"max_model_len {d['max_model_len']:,}, max_num_seqs {d['max_num_seqs']}, "
            f"max_num_batched_tokens {d['max_num_batched_tokens']}: "
        )
        if d["starts"]:
            own += (
                f"starts, activation peak {d['activation_peak_bytes'] / GIB:.2f} GiB, "
                f"{d['kv_cache_tokens']:,} KV tokens"
            )
        else:
            own += "FAILS TO START"
        rows.append((_GIVEN_ARGS, own))
    width = max(len(k) for k, _unused in [*rows, (_ARGS, None)])
    lines = [f"{k.ljust(width)}  {v}" for k, v in rows]
    if result["vllm_args"]:
        lines.append(f"{_ARGS.ljust(width)}  {' '.join(result['vllm_args'])}")
    for w in result["warnings"]:
        lines.append(f"WARNING: {w}")
    for e in result["errors"]:
        lines.append(f"ERROR: {e}")
    if d and not d["starts"]:
        lines.append(f"{_GIVEN_ARGS.strip()}: {d['error']}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    try:
        return _main(argv)
    except Exception as exc:  # pylint: disable=broad-exception-caught  # a bug ends in one line too
        where = _config_arg(argv if argv is not None else sys.argv[1:])
        print(
            f"vllm-fleet-plan: internal error ({type(exc).__name__}: {exc}) while planning {where}. "
            "This is a planner bug: report it with that file and the command line.",
            file=sys.stderr,
        )
        return EXIT_BUG


def _config_arg(argv: list[str]) -> str:
    for i, a in enumerate(argv):
        if a == "--model-config" and i + 1 < len(argv):
            return argv[i + 1]
        if a.startswith("--model-config="):
            return a.split("=", 1)[1]
    return "the given --model-config"


def _main(argv: list[str] | None) -> int:
    try:
        ns = _parser().parse_args(argv)
        cfg = _model_config(ns.model_config)
        index = _read_index(ns.safetensors_index) if ns.safetensors_index else None
        result = plan(
            cfg,
            gpu_from_cli(ns),
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
