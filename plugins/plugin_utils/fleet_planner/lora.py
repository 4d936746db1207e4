"""Memory of vLLM's LoRA slots (``--enable-lora --max-loras N --max-lora-rank R``).

At model load vLLM wraps every linear layer, the token embedding and the LM head, and gives each
wrapper stacked A/B buffers for ``max_loras`` adapters of rank ``max_lora_rank`` in the model's dtype
(vllm/lora/layers: base_linear.py, column_parallel_linear.py, vocab_parallel_embedding.py,
logits_processor.py). They are allocated before the memory profile, so vLLM counts them with the
weights. Per linear layer and slice, with tensor parallelism (fully_sharded_loras off):

* column parallel (qkv, gate_up): A ``R x input`` (replicated), B ``output/tp x R``;
* row parallel (o_proj, down_proj): A ``R x input/tp``, B ``output x R``;
* token embedding: A ``vocab x R``, B ``hidden x R``; LM head: A ``R x hidden``, B ``vocab x R``.

MoE experts get LoRA buffers only on releases that wrap fused MoE; they are not counted here.
"""

from __future__ import annotations

from .config import ModelArch

# vLLM's accepted --max-lora-rank values (LoRAConfig.max_lora_rank, a Literal)
LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)
DEFAULT_LORA_RANK = 16


def lora_rank_slot(rank: int) -> int:
    """The smallest ``--max-lora-rank`` vLLM accepts that holds an adapter of ``rank``."""
    for slot in LORA_RANKS:
        if slot >= rank:
            return slot
    raise ValueError(f"LoRA rank {rank} is above vLLM's largest --max-lora-rank ({LORA_RANKS[-1]})")


def _layer_elements(arch: ModelArch, rank: int, tp: int) -> float:
    """Elements of one decoder layer's LoRA buffers for one adapter slot."""
    h = arch.hidden_size
    q = arch.num_heads * arch.head_dim
    kv = arch.num_kv_heads * arch.head_dim
    attn = 3 * rank * h + (q + 2 * kv) / tp * rank  # qkv_proj: 3 slices
    attn += rank * q / tp + h * rank  # o_proj
    inter = arch.intermediate_size
    slices = 2 if arch.gated_mlp else 1
    mlp = slices * rank * h + slices * inter / tp * rank  # gate_up_proj (or up_proj)
    mlp += rank * inter / tp + h * rank  # down_proj
    return attn + mlp


def lora_bytes(
    arch: ModelArch,
    max_loras: int,
    rank: int,
    tp: int,
    dtype_bytes: int,
    layers: int,
    first_stage: bool = True,
    last_stage: bool = True,
) -> float:
    """Bytes per GPU of the LoRA slots of one pipeline stage holding ``layers`` decoder layers."""
    if max_loras <= 0 or rank <= 0:
        return 0.0
    elements = layers * _layer_elements(arch, rank, tp)
    if first_stage:
        elements += arch.vocab_size * rank + arch.hidden_size * rank  # embed_tokens
    if last_stage:
        elements += rank * arch.hidden_size + arch.vocab_size * rank  # lm_head
    return elements * max_loras * dtype_bytes
