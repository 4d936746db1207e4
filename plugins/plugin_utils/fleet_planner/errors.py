"""Exceptions and vLLM's own error texts (quoted exactly, so they match what vLLM prints)."""

from __future__ import annotations

GIB = 1 << 30
MIB = 1 << 20


class PlanInputError(ValueError):
    """Raised for malformed input (not for configurations that merely do not fit)."""


class Rejected(Exception):
    """A setting vLLM would reject; `variable` names the planner option, `message` is vLLM's text."""

    def __init__(self, variable: str, message: str) -> None:
        super().__init__(message)
        self.variable = variable
        self.message = message


def fmt_gib(n: float) -> str:
    return f"{n / GIB:.2f}"


def heads_not_divisible(nq: int, tp: int) -> str:
    return f"Total number of attention heads ({nq}) must be divisible by tensor parallel size ({tp})."


def not_divisible(a: int, b: int) -> str:
    return f"{a} is not divisible by {b}"


def world_size_too_large(world: int, gpus: int) -> str:
    return (
        f"World size ({world}) is larger than the number of available GPUs ({gpus}) in this node. "
        "If this is intentional and you are using: ..."
    )


def bf16_unsupported(gpu_name: str, cc: str) -> str:
    return (
        "Bfloat16 is only supported on GPUs with compute capability of at least 8.0. "
        f"Your {gpu_name} GPU has compute capability {cc}. You can use float16 instead by explicitly "
        "setting the `dtype` flag in CLI, for example: --dtype=half."
    )


def fp16_unsupported(model_type: str) -> str:
    return (
        f"The model type {model_type!r} does not support float16. Reason: Numerical instability. "
        "Please use bfloat16 or float32 instead."
    )


def max_len_too_long(user_len: int, key: str, derived: int) -> str:
    return (
        f"User-specified max_model_len ({user_len}) is greater than the derived max_model_len "
        f"({key}={derived} or model_max_length=None in model's config.json). To allow overriding this "
        "maximum, set the env var VLLM_ALLOW_LONG_MAX_MODEL_LEN=1. VLLM_ALLOW_LONG_MAX_MODEL_LEN must be "
        "used with extreme caution. If the model uses relative position encoding (RoPE), positions "
        "exceeding derived_max_model_len lead to nan. If the model uses absolute position encoding, "
        "positions exceeding derived_max_model_len will cause a CUDA array out-of-bounds error."
    )


def mnbt_lt_seqs(mnbt: int, seqs: int) -> str:
    return f"max_num_batched_tokens ({mnbt}) must be greater than or equal to max_num_seqs ({seqs})."


def free_memory_short(free: int, total: int, gmu: float, requested: int) -> str:
    return (
        f"Free memory on device ({fmt_gib(free)}/{fmt_gib(total)} GiB) on startup is less than desired "
        f"GPU memory utilization ({gmu}, {fmt_gib(requested)} GiB). Decrease GPU memory utilization or "
        "reduce GPU memory used by other processes."
    )


NO_CACHE_MEMORY = (
    "No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when "
    "initializing the engine."
)

_DOCS_LINK = " See https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details."


def kv_too_small(
    variant: str,
    link: bool,
    max_len: int,
    needed: int,
    available: int,
    estimated: int,
    *,
    extensible: bool = False,
    gmu: float | None = None,
) -> str:
    """The "To serve at least one request ..." ValueError, in the wording of the given release."""
    owner = "models's" if variant == "early" else "model's"
    head = (
        f"To serve at least one request with the {owner} max seq len ({max_len}), "
        f"({fmt_gib(needed)} GiB KV cache is needed, which is larger than the available KV cache memory "
        f"({fmt_gib(available)} GiB). Based on the available memory, the estimated maximum model length "
        f"is {estimated}."
    )
    if variant == "early":
        hint = " Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the "
        hint += "engine."
    elif variant == "mid":
        hint = (
            " Try increasing `gpu_memory_utilization` (which also controls CPU memory on the CPU backend) "
            "or decreasing `max_model_len` when initializing the engine."
        )
    elif extensible and gmu is None:
        hint = (
            " The extensible KV cache already takes all device memory left after the model, its "
            "activations and CUDA graphs; decrease `max_model_len` or `max_num_seqs`, or the model needs a "
            "device with more memory."
        )
    elif extensible:
        hint = (
            " The KV cache gets what is left after the model and its activations within "
            f"`gpu_memory_utilization`={gmu}; increase it."
        )
    else:
        hint = (
            " Try increasing `gpu_memory_utilization` when initializing the engine (this flag also controls "
            "CPU memory reservation on the CPU backend, despite its name)."
        )
    if variant == "new":
        hint += " Decreasing `max_model_len` also reduces what is needed."
    return head + hint + (_DOCS_LINK if link or variant != "early" else "")


def v0_kv_too_small(max_len: int, tokens: int) -> str:
    return (
        f"The model's max seq len ({max_len}) is larger than the maximum number of tokens that can be "
        f"stored in KV cache ({tokens}). Try increasing `gpu_memory_utilization` or decreasing "
        "`max_model_len` when initializing the engine."
    )


def quant_mismatch(ckpt: str, arg: str) -> str:
    return (
        f"Quantization method specified in the model config ({ckpt}) does not match the quantization "
        f"method specified in the `quantization` argument ({arg})."
    )


def fp8_block_input(size: int, block_k: int) -> str:
    return (
        f"Weight input_size_per_partition = {size} is not divisible by weight quantization "
        f"block_k = {block_k}."
    )


def fp8_block_output(size: int, block_n: int) -> str:
    return (
        f"Weight output_partition_size = {size} is not divisible by weight quantization block_n = {block_n}."
    )


def fp8_moe_block_output(size: int, block_n: int) -> str:
    return (
        f"The output_size of gate's and up's weight = {size} is not divisible by weight quantization "
        f"block_n = {block_n}."
    )


def fp8_moe_block_input(size: int, block_k: int) -> str:
    return (
        f"The input_size of down's weight = {size} is not divisible by weight quantization "
        f"block_k = {block_k}."
    )


def group_not_aligned(size: int, group: int) -> str:
    return f"Weight input_size_per_partition={size} is not divisible by group_size={group}."


def quant_input_not_aligned() -> str:
    return (
        "The input size is not aligned with the quantized weight shape. This can be caused by too large "
        "tensor parallel size."
    )
