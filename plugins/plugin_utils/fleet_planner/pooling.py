"""Pooling models (``--runner pooling``, ``--convert embed|classify``): whether vLLM reserves a KV cache.

Exports:
  RUNNERS, CONVERTS
      the planner's ``runner`` and ``convert`` choices (vLLM's --runner / --convert names)
  encoder_only(arch) -> bool
      a BERT / RoBERTa / XLM-R style model: bidirectional attention that keeps no KV cache
  pooling_kv(arch, runner, convert, version) -> PoolingKv
      whether the start reserves a KV cache, and why, as the release does it
  without_kv_cache(arch) -> ModelArch
      the model as the planner sizes it when vLLM reserves no KV cache (no attention layer in the cache)

What vLLM does, per release (vllm-project/vllm):
* V1 from 0.10.0 (#21270, "Support encoder-only models without KV-Cache"):
  ``GPUModelRunner.get_kv_cache_spec`` skips ``AttentionType.ENCODER_ONLY`` layers, so an encoder-only
  model has an empty KV-cache spec;
  ``EngineCore._initialize_kv_caches`` then takes 0 bytes for the KV cache ("Attention free models don't
  need memory for kv cache") and never calls ``determine_available_memory``. The layers come back after the
  cache is built (``may_add_encoder_only_layers_to_kv_cache_config``: an ``EncoderOnlyAttentionSpec`` group
  with no tensors), for the attention metadata only. Nothing is compared with max_model_len.
* A causal LM converted for pooling (Qwen3-Embedding, ``LlamaModel``/``Qwen2Model`` embedders, a Qwen3
  reranker loaded as ``*ForSequenceClassification``) keeps causal attention: its layers have a full-attention
  spec and vLLM profiles and reserves a KV cache exactly as for generation.
* Before 0.10.0 pooling models ran on the V0 engine (V1 refused the pooling runner), whose worker profiles
  and allocates cache blocks for every attention layer, encoder-only ones included.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from .config import ModelArch
from .versions import Version

RUNNERS = ("generate", "pooling")
CONVERTS = ("none", "auto", "embed", "classify", "reward")
# V1 runs pooling models, encoder-only ones without a KV cache (#21270)
V1_POOLING_SINCE: Version = (0, 10, 0)

# vLLM's encoder-only pooling architectures (model_executor/models/bert.py, roberta.py, bert_with_rope.py,
# modernbert.py: attn_type ENCODER_ONLY) and the config model_types that load as them
_ENCODER_ONLY_ARCHS = frozenset(
    {
        "BertModel",
        "BertForSequenceClassification",
        "BertForTokenClassification",
        "BertSpladeSparseEmbeddingModel",
        "RobertaModel",
        "RobertaForSequenceClassification",
        "XLMRobertaModel",
        "XLMRobertaForSequenceClassification",
        "NomicBertModel",
        "GteModel",
        "GteNewModel",
        "GteNewForSequenceClassification",
        "SnowflakeGteNewModel",
        "JinaRobertaModel",
        "ModernBertModel",
        "ModernBertForSequenceClassification",
    }
)
_ENCODER_ONLY_TYPES = frozenset({"bert", "roberta", "xlm-roberta", "nomic_bert", "new", "modernbert"})


@dataclass(frozen=True, slots=True)
class PoolingKv:
    kv_cache: bool
    encoder_only: bool
    why: str

    def as_dict(self, runner: str, convert: str) -> dict[str, object]:
        return {
            "runner": runner,
            "convert": convert,
            "encoder_only": self.encoder_only,
            "kv_cache": self.kv_cache,
            "why": self.why,
        }


def encoder_only(arch: ModelArch) -> bool:
    if any(a in _ENCODER_ONLY_ARCHS for a in arch.architectures):
        return True
    return not arch.architectures and arch.model_type in _ENCODER_ONLY_TYPES


def pooling_kv(arch: ModelArch, runner: str, convert: str, version: Version) -> PoolingKv:
    """Whether vLLM ``version`` reserves a KV cache for this model under ``runner``/``convert``."""
    enc = encoder_only(arch)
    if runner != "pooling":
        return PoolingKv(True, enc, "generate runner: vLLM profiles and reserves a KV cache")
    if version < V1_POOLING_SINCE:
        return PoolingKv(
            True,
            enc,
            "pooling on the V0 engine before vLLM 0.10.0: its worker allocates cache blocks for every "
            "attention layer, encoder-only ones too",
        )
    if enc:
        return PoolingKv(
            False,
            True,
            f"{arch.architectures[0] if arch.architectures else arch.model_type} is encoder-only "
            "(bidirectional attention): vLLM >= 0.10.0 builds no KV-cache spec for it, reserves no KV cache "
            "and skips the memory profile (EngineCore._initialize_kv_caches, vllm#21270)",
        )
    how = f"--convert {convert}" if convert not in ("none", "auto") else "a pooling model"
    return PoolingKv(
        True,
        False,
        f"decoder-based embedder ({how}): causal attention layers keep a full-attention KV cache, profiled "
        "and reserved as for generation",
    )


def without_kv_cache(arch: ModelArch) -> ModelArch:
    """The model with no layer in the KV cache ('none' layers): no KV budget, no max_model_len check."""
    return replace(arch, layer_kinds=("none",) * len(arch.layer_kinds))
