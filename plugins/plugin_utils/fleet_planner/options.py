"""The planner's options: one table, and everything derived from it.

Each option is named once here, with how it is read, its ``bin/vllm-fleet-plan`` flag, the ``vllm serve``
flags it owns and whether the plan reports it under the same key. The planner's validation, the CLI, the
plan report's equivalent command and the serving role's guard on ``extra_args`` all read this table, and
``merge_plan_options`` is the one place the fleet's option layers are combined.
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .config import normalize_dtype
from .errors import PlanInputError
from .lora import LORA_RANKS
from .pooling import CONVERTS, RUNNERS
from .speculative import parse_speculative

WORKLOADS = ("chat", "batch")
# The top-k/top-p code path of vLLM's sampler (sampler.py): "auto" takes the release's default install
SAMPLER_BACKENDS = ("auto", "flashinfer", "pytorch")
KV_CACHE_DTYPES = ("auto", "bfloat16", "float16", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_ds_mla", "half", "bf16")

# --- value parsers: (options, key) -> value; messages name the key -------------------------------


def _number(
    options: Mapping[str, Any], key: str, parse_text: Callable[[str], int], expected: str, minimum: int = 1
) -> int | None:
    """An integer option given as a number or as text that ``parse_text`` reads."""
    v = options.get(key)
    if v is None or v == "":
        return None
    if isinstance(v, str):
        try:
            n = parse_text(v.strip())
        except ValueError:
            raise PlanInputError(
                f"{key}: expected {expected}, got {v!r}. Fix: set {key} to {expected}."
            ) from None
    elif isinstance(v, (int, float)) and not isinstance(v, bool) and int(v) == v:
        n = int(v)
    else:
        raise PlanInputError(f"{key}: expected {expected}, got {v!r}. Fix: set {key} to {expected}.")
    if n < minimum:
        raise PlanInputError(
            f"{key}: must be >= {minimum}, got {v!r}. Fix: set {key} >= {minimum} or unset it."
        )
    return n


def length_text(text: str) -> int:
    """max_model_len as vLLM reads it (`human_readable_int`): 32k = 32,000, 32K = 32,768, 1M = 1,048,576,
    1m = 1,000,000; no decimals with a binary suffix."""
    return bytes_text(text)


_HUMAN_INT = re.compile(r"(\d+(?:\.\d+)?)([kKmMgGtT])")
_DECIMAL = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
_BINARY = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def bytes_text(text: str) -> int:
    """vLLM's ``human_readable_int``: 64M = 64 MiB, 64m = 64,000,000; no decimals with binary suffixes."""
    match = _HUMAN_INT.fullmatch(text)
    if match and match.group(2) in _DECIMAL:
        return int(float(match.group(1)) * _DECIMAL[match.group(2)])
    if match:
        return int(match.group(1)) * _BINARY[match.group(2)]
    return int(text)


def parse_int(options: Mapping[str, Any], key: str) -> int | None:
    return _number(options, key, int, "an integer")


def parse_length(options: Mapping[str, Any], key: str) -> int | None:
    """A length, or None for vLLM's own derivation (auto, -1 or unset)."""
    v = options.get(key)
    if isinstance(v, str) and v.strip().lower() in ("auto", "-1") or v == -1:
        return None
    return _number(options, key, length_text, "an integer such as 32768, 32K or 1M")


def parse_bytes(options: Mapping[str, Any], key: str) -> int | None:
    return _number(options, key, bytes_text, "a byte count such as 8G (GiB), 8g (10^9) or 8589934592")


def parse_bool(options: Mapping[str, Any], key: str) -> bool:
    v = options.get(key, False)
    if v is None:
        return False
    if isinstance(v, bool):
        return v
    if isinstance(v, str) and v.strip().lower() in ("true", "yes", "1", "false", "no", "0", ""):
        return v.strip().lower() in ("true", "yes", "1")
    raise PlanInputError(f"{key}: expected true/false, got {v!r}. Fix: set {key} true or false.")


def parse_fraction(options: Mapping[str, Any], key: str) -> float | None:
    v = options.get(key)
    if v is None or v == "":
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        raise PlanInputError(f"{key}: expected a number, got {v!r}. Fix: e.g. {key} 0.9.") from None
    if not 0.0 < f <= 1.0:
        raise PlanInputError(
            f"{key}: must be in (0, 1], got {f} (a fraction of the GPU, not a percentage). "
            f"Fix: e.g. {key} 0.9."
        )
    return f


def parse_dtype(options: Mapping[str, Any], key: str) -> str | None:
    """The normalized dtype, or None for auto (the checkpoint's)."""
    v = options.get(key)
    if v in (None, "", "auto"):
        return None
    d = normalize_dtype(v)
    if d is None:
        raise PlanInputError(
            f"{key}: expected auto, bfloat16, float16 or float32, got {v!r}. Fix: set {key} auto."
        )
    return d


def parse_kv_cache_dtype(options: Mapping[str, Any], key: str) -> str:
    v = str(options.get(key) or "auto").strip().lower()
    if v not in KV_CACHE_DTYPES:
        raise PlanInputError(
            f"{key}: expected one of {', '.join(KV_CACHE_DTYPES)}, got {v!r}. Fix: set {key} auto or fp8."
        )
    return v


def parse_workload(options: Mapping[str, Any], key: str) -> str:
    v = str(options.get(key) or "chat").strip().lower()
    if v not in WORKLOADS:
        raise PlanInputError(
            f"{key}: expected one of {', '.join(WORKLOADS)}, got {options.get(key)!r}. Fix: set {key} chat."
        )
    return v


def parse_sampler_backend(options: Mapping[str, Any], key: str) -> str:
    v = str(options.get(key) or "auto").strip().lower()
    if v not in SAMPLER_BACKENDS:
        raise PlanInputError(
            f"{key}: expected one of {', '.join(SAMPLER_BACKENDS)}, got {options.get(key)!r}. "
            f"Fix: set {key} auto."
        )
    return v


def _choice(options: Mapping[str, Any], key: str, choices: tuple[str, ...]) -> str:
    v = str(options.get(key) or choices[0]).strip().lower()
    if v not in choices:
        raise PlanInputError(
            f"{key}: expected one of {', '.join(choices)}, got {options.get(key)!r}. "
            f"Fix: set {key} {choices[0]} or unset it."
        )
    return v


def parse_runner(options: Mapping[str, Any], key: str) -> str:
    return _choice(options, key, RUNNERS)


def parse_convert(options: Mapping[str, Any], key: str) -> str:
    return _choice(options, key, CONVERTS)


def parse_config(options: Mapping[str, Any], key: str) -> dict[str, Any] | None:
    """A config.json given as a mapping or its JSON text."""
    v = options.get(key)
    if v in (None, "", {}):
        return None
    if isinstance(v, str):
        try:
            v = json.loads(v)
        except ValueError:
            v = None
    if not isinstance(v, Mapping):
        raise PlanInputError(
            f"{key}: expected a config.json (a mapping or its JSON). Fix: give the file's content."
        )
    return dict(v)


def parse_text(options: Mapping[str, Any], key: str) -> str | None:
    v = options.get(key)
    return None if v in (None, "") else str(v)


def parse_mm_limits(options: Mapping[str, Any], key: str) -> tuple[tuple[str, int], ...]:
    """--limit-mm-per-prompt: a mapping (or its JSON) of modality to items per prompt."""
    v = options.get(key)
    if v in (None, "", {}):
        return ()
    if isinstance(v, str):
        try:
            v = json.loads(v)
        except ValueError:
            v = None
    if not isinstance(v, Mapping) or not all(
        isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in v.values()
    ):
        raise PlanInputError(
            f"{key}: expected a mapping of modality to a count >= 0, got {options.get(key)!r}. "
            f'Fix: set {key} as vLLM takes it, e.g. {{"image": 2, "video": 0}}.'
        )
    return tuple(sorted((str(m), int(n)) for m, n in v.items()))


def parse_lora_rank(options: Mapping[str, Any], key: str) -> int | None:
    rank = parse_int(options, key)
    if rank is not None and rank not in LORA_RANKS:
        raise PlanInputError(
            f"{key}: vLLM accepts {', '.join(str(r) for r in LORA_RANKS)}, got {rank}. "
            f"Fix: set {key} to the next of these at or above the adapters' rank."
        )
    return rank


def parse_name(options: Mapping[str, Any], key: str) -> str | None:
    v = options.get(key)
    return str(v) if v else None


def parse_version(options: Mapping[str, Any], key: str) -> str | None:
    # an empty version is passed on: version_info rejects it with its own message
    v = options.get(key)
    return None if v is None else str(v)


# --- the table ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PlanOption:
    name: str  # key in the planner's options, vllm_server_plan_options and overrides
    parse: Callable[[Mapping[str, Any], str], Any]
    help: str
    cli_type: Callable[[str], Any] | None = str  # argparse type; None: a bare (true) flag
    metavar: str = "V"
    choices: tuple[str, ...] | None = None  # argparse choices
    vllm_flags: tuple[str, ...] = ()  # `vllm serve` flags it owns, the one the planner emits first
    plan_field: bool = False  # the plan holds the launch value under this key

    @property
    def cli_flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    @property
    def vllm_flag(self) -> str | None:
        return self.vllm_flags[0] if self.vllm_flags else None


# Order: the order of the plan's `vllm serve` arguments (it is part of the deployed command's hash),
# then the options that only steer the planner.
OPTIONS: tuple[PlanOption, ...] = (
    PlanOption(
        "tensor_parallel_size",
        parse_int,
        "GPUs one model is split across (within a node)",
        int,
        "N",
        vllm_flags=("--tensor-parallel-size", "-tp"),
        plan_field=True,
    ),
    PlanOption(
        "pipeline_parallel_size",
        parse_int,
        "pipeline stages (one per node)",
        int,
        "N",
        vllm_flags=("--pipeline-parallel-size", "-pp"),
        plan_field=True,
    ),
    PlanOption(
        "max_model_len",
        parse_length,
        "context length; 32k = 32,000, 32K = 32,768, 1M = 1,048,576, auto = the model's",
        str,
        "N",
        vllm_flags=("--max-model-len",),
        plan_field=True,
    ),
    PlanOption(
        "max_num_seqs",
        parse_int,
        "requests scheduled at once",
        int,
        "N",
        vllm_flags=("--max-num-seqs",),
        plan_field=True,
    ),
    PlanOption(
        "max_num_batched_tokens",
        parse_int,
        "tokens per scheduler step",
        int,
        "N",
        vllm_flags=("--max-num-batched-tokens",),
        plan_field=True,
    ),
    PlanOption(
        "gpu_memory_utilization",
        parse_fraction,
        "fraction of GPU memory vLLM may use, in (0, 1]",
        float,
        "F",
        vllm_flags=("--gpu-memory-utilization",),
        plan_field=True,
    ),
    PlanOption(
        "dtype",
        parse_dtype,
        "auto, bfloat16, float16 or float32",
        str,
        "D",
        vllm_flags=("--dtype",),
        plan_field=True,
    ),
    PlanOption(
        "kv_cache_dtype",
        parse_kv_cache_dtype,
        "auto, fp8, fp8_e4m3, fp8_e5m2, bfloat16 or float16",
        str,
        "D",
        vllm_flags=("--kv-cache-dtype",),
        plan_field=True,
    ),
    PlanOption(
        "quantization",
        parse_text,
        "quantization method (the checkpoint's, or fp8 applied online)",
        str,
        "Q",
        vllm_flags=("--quantization", "-q"),
        plan_field=True,
    ),
    PlanOption(
        "enforce_eager",
        parse_bool,
        "no CUDA graphs",
        None,
        vllm_flags=("--enforce-eager",),
    ),
    PlanOption(
        "kv_cache_memory_bytes",
        parse_bytes,
        "a fixed KV cache per GPU, read as vLLM reads it (8G = 8 GiB, 8g = 8e9); "
        "gpu_memory_utilization then does not size the KV cache",
        str,
        "SIZE",
        vllm_flags=("--kv-cache-memory-bytes", "--kv-cache-memory"),
    ),
    PlanOption(
        "block_size",
        parse_int,
        "KV-cache block size in tokens (default: the attention backend's)",
        int,
        "N",
        vllm_flags=("--block-size",),
        plan_field=True,
    ),
    PlanOption(
        "language_model_only",
        parse_bool,
        "load no vision/audio encoder (text requests only)",
        None,
        vllm_flags=("--language-model-only",),
    ),
    PlanOption(
        "limit_mm_per_prompt",
        parse_mm_limits,
        'items per prompt by modality, as vLLM takes it ({"image": 2, "video": 0}); vLLM profiles the '
        "encoder with the largest of them",
        str,
        "JSON",
        vllm_flags=("--limit-mm-per-prompt",),
    ),
    PlanOption(
        "max_loras",
        parse_int,
        "LoRA adapters served in one batch (turns LoRA on; the planner counts their buffers)",
        int,
        "N",
        vllm_flags=("--max-loras", "--enable-lora"),
    ),
    PlanOption(
        "max_lora_rank",
        parse_lora_rank,
        "largest LoRA rank served: " + ", ".join(str(r) for r in LORA_RANKS),
        int,
        "R",
        vllm_flags=("--max-lora-rank",),
    ),
    PlanOption("vllm_version", parse_version, "vLLM release to plan for", str, "X.Y.Z"),
    PlanOption(
        "vllm_image",
        parse_name,
        "image the instance runs; its tag gives the release when vllm_version is unset",
        str,
        "IMAGE",
    ),
    PlanOption("target_context_len", parse_int, "context length to aim for", int, "N"),
    PlanOption("target_concurrency", parse_int, "requests that should fit at once", int, "N"),
    PlanOption("workload", parse_workload, "chat or batch (scheduler defaults)", str, "W", choices=WORKLOADS),
    PlanOption(
        "sampler_backend",
        parse_sampler_backend,
        "top-k/top-p path of the sampler, which sizes the profile's sampler peak: auto (the release's "
        "default install), flashinfer (the log says 'Using FlashInfer for top-p & top-k sampling': "
        "FlashInfer installed on 0.9-0.11, VLLM_USE_FLASHINFER_SAMPLER=1 on 0.12-0.20) or pytorch (no "
        "FlashInfer, or VLLM_USE_FLASHINFER_SAMPLER=0); V1 engine (0.8+) only",
        str,
        "S",
        choices=SAMPLER_BACKENDS,
    ),
    # the serving role renders --runner/--convert from model_features (its FEATURE_FLAGS own them): these
    # two only tell the planner how vLLM sizes a pooling model
    PlanOption(
        "runner",
        parse_runner,
        "vLLM's --runner: generate, or pooling (embedding / score models; an encoder-only one reserves no "
        "KV cache from vLLM 0.10)",
        str,
        "R",
        choices=RUNNERS,
    ),
    PlanOption(
        "convert",
        parse_convert,
        "vLLM's --convert for a pooling runner: none, auto, embed, classify or reward",
        str,
        "C",
        choices=CONVERTS,
    ),
    # the serving role renders --speculative-config from vllm_server_models[].speculative (FEATURE_FLAGS):
    # the planner only counts the drafter (speculative.py)
    PlanOption(
        "speculative",
        parse_speculative,
        "vLLM's --speculative-config (mapping or JSON): the planner counts the drafter's weights and KV",
        str,
        "JSON",
    ),
    PlanOption(
        "speculative_draft_config",
        parse_config,
        "config.json of the EAGLE head or draft model of speculative (mapping or JSON)",
        str,
        "JSON",
    ),
    PlanOption(
        "model_name", parse_name, "name used in messages (default: from the config path)", metavar="NAME"
    ),
)
OPTION_KEYS = frozenset(o.name for o in OPTIONS)
BY_NAME: dict[str, PlanOption] = {o.name: o for o in OPTIONS}
_DEFAULTS: dict[str, Any] = {o.name: o.parse({}, o.name) for o in OPTIONS}  # what an unset option reads as


@dataclass(frozen=True, slots=True)
class PlanOptions:
    """The options, read and checked (field names are the table's; a unit test keeps them equal)."""

    tensor_parallel_size: int | None
    pipeline_parallel_size: int | None
    max_model_len: int | None  # None: derived from the model
    max_num_seqs: int | None
    max_num_batched_tokens: int | None
    gpu_memory_utilization: float | None
    dtype: str | None  # None: auto
    kv_cache_dtype: str  # "auto" or the requested dtype
    quantization: str | None
    enforce_eager: bool
    kv_cache_memory_bytes: int | None
    block_size: int | None
    language_model_only: bool
    limit_mm_per_prompt: tuple[tuple[str, int], ...]
    max_loras: int | None
    max_lora_rank: int | None
    vllm_version: str | None
    vllm_image: str | None
    target_context_len: int | None
    target_concurrency: int | None
    workload: str
    sampler_backend: str  # auto | flashinfer | pytorch
    runner: str  # generate | pooling
    convert: str  # none | auto | embed | classify | reward
    speculative: dict[str, Any] | None  # vLLM's --speculative-config
    speculative_draft_config: dict[str, Any] | None  # the draft's config.json
    model_name: str | None


def check_known(options: Mapping[str, Any]) -> None:
    unknown = sorted(set(options) - OPTION_KEYS)
    if unknown:
        raise PlanInputError(
            f"options: unknown key(s) {', '.join(unknown)}; expected {', '.join(sorted(OPTION_KEYS))}. "
            "Fix: remove or rename them."
        )


def parse_options(options: Mapping[str, Any], check: bool = True) -> PlanOptions:
    """Read the options, in table order; raises PlanInputError naming the first bad one.

    ``check=False`` skips the unknown-key check, for a caller that made it already.
    """
    if check:
        check_known(options)
    try:
        # a fleet plans many hosts with the same options: parse each set once (PlanOptions is immutable)
        key: tuple[Any, ...] | None = tuple((k, type(v), v) for k, v in options.items())
        hit = _PARSED.get(key)
    except TypeError:  # unhashable values (a mapping for limit_mm_per_prompt): parse every time
        key, hit = None, None
    if hit is not None:
        return hit
    values = dict(_DEFAULTS)  # a plan sets few options: parse only those (the planner's hot path)
    for o in OPTIONS:
        if o.name in options:
            values[o.name] = o.parse(options, o.name)
    parsed = PlanOptions(**values)
    if key is not None:
        if len(_PARSED) > 1024:
            _PARSED.clear()
        _PARSED[key] = parsed
    return parsed


_PARSED: dict[tuple[Any, ...], PlanOptions] = {}


# --- merging the fleet's layers -------------------------------------------------------------------


def merge_plan_options(
    vllm_version: Any = None,
    group_options: Mapping[str, Any] | None = None,
    model_options: Mapping[str, Any] | None = None,
    model_name: Any = None,
) -> dict[str, Any]:
    """The planner options of one served model, from its layers; a later layer wins.

    The layers: ``vllm_version`` (the release the image runs; skipped when empty), the GPU group's options
    (``vllm_server_plan_options``), the model's (``vllm_server_models[].overrides``), then ``model_name``
    when no layer names the model. Null values are dropped (the planner reads null as unset, so a model
    can unset a group option with one). Keys are not checked here: the planner rejects unknown ones.
    """
    merged: dict[str, Any] = {} if vllm_version in (None, "") else {"vllm_version": vllm_version}
    for layer in (group_options, model_options):
        if layer is not None and not isinstance(layer, Mapping):
            raise PlanInputError(f"plan options: expected a mapping, got {type(layer).__name__}")
        merged.update(layer or {})
    if model_name is not None:
        merged.setdefault("model_name", model_name)
    return {k: v for k, v in merged.items() if v is not None}


# --- the CLI ------------------------------------------------------------------------------------------

# GPU description: planner gpu key -> (CLI flag, argparse keyword arguments)
GPU_FLAGS: dict[str, tuple[str, dict[str, Any]]] = {
    "memory_mib": (
        "--gpu-memory-mib",
        {"type": int, "required": True, "metavar": "N", "help": "nvidia-smi memory.total"},
    ),
    "count": ("--gpus-per-node", {"type": int, "required": True, "metavar": "N"}),
    "nodes": ("--nodes", {"type": int, "default": 1, "metavar": "N"}),
    "name": (
        "--gpu-name",
        {"default": "unknown", "metavar": "NAME", "help": "as nvidia-smi --query-gpu=name prints it"},
    ),
    "compute_capability": (
        "--compute-capability",
        {
            "metavar": "X.Y",
            "help": "nvidia-smi --query-gpu=compute_cap (default: told from --gpu-name)",
        },
    ),
    "memory_reserved_mib": (
        "--gpu-memory-reserved-mib",
        {
            "type": int,
            "metavar": "N",
            "help": "nvidia-smi -q 'FB Memory Usage: Reserved' (default: measured per GPU, else estimated)",
        },
    ),
    "memory_used_mib": (
        "--gpu-memory-used-mib",
        {
            "type": int,
            "default": 0,
            "metavar": "N",
            "help": "nvidia-smi memory.used by other processes before vLLM starts",
        },
    ),
}
SHARED_FLAG = "--shared-gpu"
NO_P2P_FLAG = "--no-gpu-p2p"


def add_cli_arguments(parser: argparse.ArgumentParser) -> None:
    """The GPU flags and one flag per option (dest = the option's name)."""
    for key, (flag, kwargs) in GPU_FLAGS.items():
        parser.add_argument(flag, dest=f"gpu_{key}", **kwargs)
    parser.add_argument(SHARED_FLAG, action="store_true", help="other processes use these GPUs too")
    parser.add_argument(
        NO_P2P_FLAG,
        dest="no_gpu_p2p",
        action="store_true",
        help="the GPUs have no CUDA peer access to each other (vLLM: 'Custom allreduce is disabled because "
        "your platform lacks GPU P2P capability')",
    )
    for o in OPTIONS:
        if o.cli_type is None:
            parser.add_argument(o.cli_flag, dest=o.name, action="store_true", help=o.help)
        else:
            parser.add_argument(
                o.cli_flag,
                dest=o.name,
                type=o.cli_type,
                metavar=None if o.choices else o.metavar,  # argparse then lists the choices
                choices=o.choices,
                help=o.help,
            )


def options_from_cli(ns: argparse.Namespace) -> dict[str, Any]:
    """The options given on the command line (unset flags are left out)."""
    out: dict[str, Any] = {}
    for o in OPTIONS:
        v = getattr(ns, o.name)
        if o.cli_type is None:
            if v:
                out[o.name] = True
        elif v is not None:
            out[o.name] = v
    return out


def gpu_from_cli(ns: argparse.Namespace) -> dict[str, Any]:
    gpu = {key: getattr(ns, f"gpu_{key}") for key in GPU_FLAGS}
    for key in ("memory_reserved_mib", "compute_capability"):
        if gpu[key] is None:
            del gpu[key]
    if not gpu["memory_used_mib"]:
        del gpu["memory_used_mib"]
    gpu["shared"] = ns.shared_gpu
    if getattr(ns, "no_gpu_p2p", False):
        gpu["p2p"] = False
    return gpu


def cli_arguments(gpu: Mapping[str, Any], options: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """The GPU and option flags of ``bin/vllm-fleet-plan`` for these inputs, and keys it has no flag for."""
    argv: list[str] = []
    for key, (flag, _unused) in GPU_FLAGS.items():
        if gpu.get(key) not in (None, ""):
            argv += [flag, str(gpu[key])]
    if gpu.get("shared"):
        argv.append(SHARED_FLAG)
    if gpu.get("p2p") is False:
        argv.append(NO_P2P_FLAG)
    missing = []
    for key in sorted(options):
        value = options[key]
        opt = BY_NAME.get(key)
        if opt is None:
            missing.append(key)
        elif isinstance(value, bool):
            if value:
                argv.append(opt.cli_flag)
        elif value is not None:
            argv += [opt.cli_flag, str(value)]
    return argv, missing


# --- vLLM's flags ---------------------------------------------------------------------------------


def vllm_flag_owners() -> dict[str, str]:
    """Every `vllm serve` flag an option owns (aliases included) -> the option."""
    return {flag: o.name for o in OPTIONS for flag in o.vllm_flags}


def vllm_arguments(values: Mapping[str, str | bool | None]) -> list[str]:
    """`vllm serve` arguments in table order: a text value becomes ``flag value``, True a bare flag;
    None, False and options without a vLLM flag are left out."""
    args: list[str] = []
    for name, flag in _FLAGGED:
        v = values.get(name)
        if v is None or v is False:
            continue
        args += [flag] if v is True else [flag, str(v)]
    return args


# (option, its first `vllm serve` flag) in table order, for the options that have one
_FLAGGED = tuple((o.name, o.vllm_flags[0]) for o in OPTIONS if o.vllm_flags)


def plan_fields() -> tuple[str, ...]:
    """Plan keys holding a launch value."""
    return tuple(o.name for o in OPTIONS if o.plan_field)
