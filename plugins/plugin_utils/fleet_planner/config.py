"""Resolve a Hugging Face config.json into the quantities vLLM uses (vLLM's `hf_text_config` view).

Resolution follows vLLM's rules: the text config is found through the nesting keys multimodal models
use; head size, KV heads, layer kinds (full / sliding / chunked-local / Mamba-like) and MoE/MLA fields
are read with vLLM's aliases. Results are cached per config object.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .config_checks import check_config
from .errors import PlanInputError

# Sub-config keys that hold the language model, in the order vLLM/transformers look for them.
_TEXT_KEYS: tuple[tuple[str, ...], ...] = (
    ("text_config",),
    ("llm_config",),
    ("language_config",),
    ("thinker_config", "text_config"),
    ("decoder",),
    ("generator",),
)
_VISION_KEYS = ("vision_config", "visual", "vision_tower_config")
_AUDIO_KEYS = ("audio_config",)

_LAYER_KEYS = ("num_hidden_layers", "n_layer", "num_layers", "n_layers")
_HEAD_KEYS = ("num_attention_heads", "n_head", "n_heads", "num_heads")
_KV_KEYS = (
    "n_head_kv",
    "num_kv_heads",
    "num_key_value_heads",
    "multi_query_group_num",
    "num_attention_groups",
)
_MAX_LEN_KEYS = (
    "max_position_embeddings",
    "n_positions",
    "max_seq_len",
    "seq_length",
    "model_max_length",
    "max_target_positions",
    "max_sequence_length",
    "max_seq_length",
    "seq_len",
)
_MLA_TYPES = {
    "deepseek_v2",
    "deepseek_v3",
    "deepseek_v32",
    "deepseek_mtp",
    "kimi_k2",
    "kimi_vl",
    "kimi_linear",
    "glm4_moe_lite",
    "longcat_flash",
    "pangu_ultra_moe",
    "pangu_ultra_moe_mtp",
    "mistral_large_3",
    "deepseek_vl_v2",
    "minicpm3",
    "glm_moe_dsa",
}
_NO_FP16_TYPES = ("gemma2", "gemma3", "glm4")
# Model types whose linear-attention layers are Gated DeltaNet / lightning attention / Mamba.
_GDN_TYPES = ("qwen3_next", "qwen3_5", "qwen3_5_moe")

DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2, "float8": 1, "fp8": 1}
_DTYPE_ALIASES = {
    "float": "float32",
    "float32": "float32",
    "fp32": "float32",
    "torch.float32": "float32",
    "half": "float16",
    "float16": "float16",
    "fp16": "float16",
    "torch.float16": "float16",
    "bfloat16": "bfloat16",
    "bf16": "bfloat16",
    "torch.bfloat16": "bfloat16",
}


def normalize_dtype(value: Any) -> str | None:
    if value is None:
        return None
    return _DTYPE_ALIASES.get(str(value).strip().lower())


@dataclass(frozen=True, slots=True)
class MlaSpec:
    kv_lora_rank: int
    q_lora_rank: int | None
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int


@dataclass(frozen=True, slots=True)
class MoeSpec:
    num_experts: int
    top_k: int
    expert_intermediate: int
    shared_intermediate: int  # total intermediate width of shared experts (0 if none)
    moe_layers: tuple[bool, ...]  # per layer: MoE (True) or dense MLP (False)
    router_bias: bool
    expert_bias: bool  # gpt-oss style per-expert biases


@dataclass(frozen=True, slots=True)
class MambaSpec:
    kind: str  # mamba1 | mamba2 | gdn | linear
    d_state: int = 0
    d_conv: int = 0
    intermediate: int = 0
    n_heads: int = 0
    head_dim: int = 0
    n_groups: int = 1
    k_heads: int = 0
    k_dim: int = 0
    v_heads: int = 0
    v_dim: int = 0
    state_dtype_bytes: int | None = None


# ModelArch.layer_kinds that hold an attention layer (the others: mamba, none).
ATTENTION_KINDS = ("full", "sliding", "chunked")


@dataclass(frozen=True, slots=True)
class VisionSpec:
    hidden: int
    layers: int
    intermediate: int
    heads: int
    patch: int
    out_hidden: int
    params: int  # estimated encoder + projector parameters
    merge: int = 1  # spatial_merge_size: patches per output token = merge**2
    deepstack: int = 0  # deepstack_visual_indexes: extra feature maps the encoder hands the LM


@dataclass(frozen=True, slots=True)
class MaxLenInfo:
    key: str | None
    base: int | None
    model_max_length: int | None
    rope_type: str | None
    rope_factor: float | None
    original_max: int | None
    skip_rope: bool


@dataclass(frozen=True, slots=True)
class ModelArch:
    name: str
    architectures: tuple[str, ...]
    model_type: str
    text_model_type: str
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    vocab_size: int
    intermediate_size: int
    tie_word_embeddings: bool
    qkv_bias: bool
    o_bias: bool
    qk_norm: bool
    gated_mlp: bool
    layer_kinds: tuple[str, ...]  # full | sliding | chunked | mamba | none
    layer_mlp: tuple[str, ...]  # dense | moe | none
    sliding_window: int | None
    chunk_size: int | None
    mla: MlaSpec | None
    moe: MoeSpec | None
    mamba: MambaSpec | None
    vision: VisionSpec | None
    audio_params: int
    mtp_layers: int
    max_len: MaxLenInfo
    config_dtype: str | None
    quant_config: Mapping[str, Any] | None
    raw_text: Mapping[str, Any] = field(repr=False, hash=False, compare=False)

    @property
    def is_mla(self) -> bool:
        return self.mla is not None

    @property
    def is_moe(self) -> bool:
        return self.moe is not None

    @property
    def attention_layers(self) -> int:
        return sum(1 for k in self.layer_kinds if k in ATTENTION_KINDS)

    @property
    def no_fp16(self) -> bool:
        return self.text_model_type.startswith(_NO_FP16_TYPES) or self.model_type.startswith(_NO_FP16_TYPES)

    @property
    def is_multimodal(self) -> bool:
        return self.vision is not None or self.audio_params > 0

    def derived_max_len(self, yarn_multiplies: bool) -> tuple[int, str]:
        """vLLM's derived max_model_len (`_get_and_verify_max_len`) and the key it came from."""
        info = self.max_len
        if info.model_max_length is not None and info.base is None:
            return info.model_max_length, "model_max_length"
        if info.base is None:
            return 2048, "default"
        derived = info.base
        key = info.key or "max_position_embeddings"
        if not info.skip_rope and info.rope_type and info.rope_factor:
            rt = info.rope_type
            if rt in ("su", "longrope", "llama3"):
                pass
            elif rt in ("yarn", "deepseek_yarn", "deepseek_llama_scaling"):
                if yarn_multiplies:
                    if rt == "yarn" and info.original_max:
                        derived = int(info.original_max * info.rope_factor)
                    else:
                        derived = int(derived * info.rope_factor)
            elif rt not in ("mrope", "default"):
                derived = int(derived * info.rope_factor)
        if info.model_max_length is not None:
            derived = info.model_max_length
            key = "model_max_length"
        return derived, key


def _get(cfg: Mapping[str, Any], *keys: str, default: Any = None) -> Any:
    for k in keys:
        v = cfg.get(k)
        if v is not None:
            return v
    return default


def text_config_path(config: Mapping[str, Any]) -> str:
    """Where the language model's sub-config sits ("" for the top level)."""
    for path in _TEXT_KEYS:
        node: Any = config
        for key in path:
            node = node.get(key) if isinstance(node, Mapping) else None
        if isinstance(node, Mapping) and node:
            return ".".join(path)
    return ""


def text_config_of(config: Mapping[str, Any]) -> Mapping[str, Any]:
    """The sub-config holding the language model (vLLM `get_hf_text_config`)."""
    if not isinstance(config, Mapping):
        return config
    for path in _TEXT_KEYS:
        node: Any = config.get(path[0])  # most configs have none of these keys: one lookup each
        if node is None:
            continue
        for key in path[1:]:
            node = node.get(key) if isinstance(node, Mapping) else None
        if isinstance(node, Mapping) and node:
            return node
    return config


def _int(cfg: Mapping[str, Any], keys: tuple[str, ...] | str, name: str, default: int | None = None) -> int:
    if isinstance(keys, str):
        keys = (keys,)
    v = _get(cfg, *keys)
    if v is None:
        if default is not None:
            return default
        raise PlanInputError(f"model_config: missing {name} (looked for {', '.join(keys)})")
    if isinstance(v, bool) or not isinstance(v, (int, float)) or int(v) != v or v < 0:
        raise PlanInputError(f"model_config: {keys[0]} must be a non-negative integer, got {v!r}")
    return int(v)


def _layer_kinds(tc: Mapping[str, Any], n_layers: int, model_type: str, has_mamba: bool) -> tuple[str, ...]:
    layer_types = tc.get("layer_types")
    if isinstance(layer_types, list) and len(layer_types) >= n_layers:
        mapping = {
            "full_attention": "full",
            "attention": "full",
            "global": "full",
            "sliding_attention": "sliding",
            "sliding_window": "sliding",
            "local": "sliding",
            "chunked_attention": "chunked",
            "linear_attention": "mamba",
            "mamba": "mamba",
            "mamba2": "mamba",
            "conv": "mamba",
            "short_conv": "mamba",
            "ssm": "mamba",
        }
        kinds = []
        for t in layer_types[:n_layers]:
            kinds.append(mapping.get(str(t), "full"))
        return tuple(kinds)
    pattern = tc.get("hybrid_override_pattern")
    if isinstance(pattern, str) and pattern:
        kinds = []
        for ch in pattern:
            kinds.append("mamba" if ch == "M" else "full" if ch == "*" else "none")
        return tuple(kinds)
    period = tc.get("attn_layer_period")
    if has_mamba and isinstance(period, int) and period > 0:
        offset = int(tc.get("attn_layer_offset") or 0)
        return tuple("full" if i % period == offset else "mamba" for i in range(n_layers))
    interval = tc.get("full_attention_interval")
    if has_mamba and isinstance(interval, int) and interval > 0:
        return tuple("full" if (i + 1) % interval == 0 else "mamba" for i in range(n_layers))
    if model_type in ("mamba", "mamba2", "falcon_mamba"):
        return tuple("mamba" for _unused in range(n_layers))
    window = tc.get("sliding_window")
    if model_type.startswith(("qwen2", "qwen3")) or "use_sliding_window" in tc:
        if not tc.get("use_sliding_window", False) or not window:
            return tuple("full" for _unused in range(n_layers))
        mwl = int(tc.get("max_window_layers") or 0)
        return tuple("sliding" if i >= mwl else "full" for i in range(n_layers))
    if model_type.startswith("gemma2") and window:
        return tuple("sliding" if i % 2 == 0 else "full" for i in range(n_layers))
    if model_type.startswith("gemma3") and window:
        pat = int(tc.get("sliding_window_pattern") or 6)
        return tuple("full" if (i + 1) % pat == 0 else "sliding" for i in range(n_layers))
    if model_type.startswith("cohere2") and window:
        pat = int(tc.get("sliding_window_pattern") or 4)
        return tuple("full" if (i + 1) % pat == 0 else "sliding" for i in range(n_layers))
    chunk = tc.get("attention_chunk_size")
    if chunk:
        no_rope = tc.get("no_rope_layers")
        if isinstance(no_rope, list) and len(no_rope) >= n_layers:
            # no_rope_layers[i] == 0 marks a NoPE (global) layer; the others use chunked local attention.
            return tuple("chunked" if no_rope[i] else "full" for i in range(n_layers))
        step = int(tc.get("no_rope_layer_interval") or 4)
        return tuple("full" if (i + 1) % step == 0 else "chunked" for i in range(n_layers))
    if window and isinstance(window, int) and window > 0:
        return tuple("sliding" for _unused in range(n_layers))
    return tuple("full" for _unused in range(n_layers))


def _layer_mlp(tc: Mapping[str, Any], kinds: tuple[str, ...], moe: MoeSpec | None) -> tuple[str, ...]:
    pattern = tc.get("hybrid_override_pattern")
    if isinstance(pattern, str) and len(pattern) == len(kinds):
        return tuple("moe" if ch == "E" else "dense" if ch == "-" else "none" for ch in pattern)
    if moe is None:
        return tuple("dense" for _unused in kinds)
    return tuple("moe" if moe.moe_layers[i] else "dense" for i in range(len(kinds)))


def _moe(tc: Mapping[str, Any], n_layers: int, model_type: str, hidden: int) -> MoeSpec | None:
    experts = _get(tc, "num_experts", "n_routed_experts", "num_local_experts", "moe_num_experts")
    if not experts or int(experts) <= 1:
        return None
    experts = int(experts)
    top_k = int(_get(tc, "num_experts_per_tok", "experts_per_token", "moe_top_k", "top_k", default=2))
    inter = int(_get(tc, "moe_intermediate_size", "expert_intermediate_size", default=0) or 0)
    if not inter:
        inter = int(tc.get("intermediate_size") or 0)
    shared = 0
    n_shared = tc.get("n_shared_experts") or tc.get("num_shared_experts")
    if n_shared:
        shared = int(n_shared) * inter
    elif tc.get("shared_expert_intermediate_size"):
        shared = int(tc["shared_expert_intermediate_size"])
    if model_type.startswith("llama4"):
        shared = inter  # one shared expert of intermediate_size per MoE layer
    layers = [True] * n_layers
    first_dense = tc.get("first_k_dense_replace")
    freq = tc.get("moe_layer_freq")
    if first_dense is not None or (isinstance(freq, int) and freq > 1):
        fd = int(first_dense or 0)
        fq = int(freq or 1)
        layers = [i >= fd and i % fq == 0 for i in range(n_layers)]
    step = tc.get("decoder_sparse_step")
    if isinstance(step, int) and step > 1:
        layers = [(i + 1) % step == 0 for i in range(n_layers)]
    only = tc.get("mlp_only_layers")
    if isinstance(only, list) and only:
        for i in only:
            if isinstance(i, int) and 0 <= i < n_layers:
                layers[i] = False
    inter_step = tc.get("interleave_moe_layer_step")
    if isinstance(inter_step, int) and inter_step > 1:
        layers = [(i + 1) % inter_step == 0 for i in range(n_layers)]
    router_bias = bool(tc.get("topk_method") == "noaux_tc" or model_type.startswith("gpt_oss"))
    expert_bias = model_type.startswith("gpt_oss")
    return MoeSpec(experts, top_k, inter, shared, tuple(layers), router_bias, expert_bias)


def _mamba(tc: Mapping[str, Any], model_type: str, hidden: int) -> MambaSpec | None:
    if model_type.startswith(_GDN_TYPES) or tc.get("linear_num_value_heads"):
        return MambaSpec(
            kind="gdn",
            d_conv=int(tc.get("linear_conv_kernel_dim") or 4),
            k_heads=int(tc.get("linear_num_key_heads") or 16),
            k_dim=int(tc.get("linear_key_head_dim") or 128),
            v_heads=int(tc.get("linear_num_value_heads") or 32),
            v_dim=int(tc.get("linear_value_head_dim") or 128),
        )
    n_heads = _get(tc, "mamba_n_heads", "mamba_num_heads")
    d_state = _get(tc, "ssm_state_size", "mamba_d_state", "state_size")
    if n_heads and d_state:
        head_dim = int(_get(tc, "mamba_head_dim", "mamba_d_head", default=64))
        expand = tc.get("mamba_expand") or tc.get("expand")
        inter = int(n_heads) * head_dim if not expand else int(expand * hidden)
        if int(n_heads) * head_dim != inter:
            inter = int(n_heads) * head_dim
        return MambaSpec(
            kind="mamba2",
            d_state=int(d_state),
            d_conv=int(_get(tc, "conv_kernel", "mamba_d_conv", default=4)),
            intermediate=inter,
            n_heads=int(n_heads),
            head_dim=head_dim,
            n_groups=int(_get(tc, "n_groups", "mamba_n_groups", default=1)),
        )
    if d_state and (model_type in ("jamba", "mamba", "falcon_mamba") or tc.get("mamba_expand")):
        expand = tc.get("mamba_expand") or tc.get("expand") or 2
        return MambaSpec(
            kind="mamba1",
            d_state=int(d_state),
            d_conv=int(_get(tc, "mamba_d_conv", "conv_kernel", default=4)),
            intermediate=int(_get(tc, "intermediate_size", default=0))
            if model_type in ("mamba", "falcon_mamba")
            else int(expand * hidden),
        )
    if model_type.startswith("minimax") and tc.get("attn_type_list"):
        heads = int(tc.get("num_attention_heads") or 1)
        hd = int(tc.get("head_dim") or hidden // heads)
        return MambaSpec(kind="linear", n_heads=heads, head_dim=hd)
    return None


def _vision(cfg: Mapping[str, Any]) -> VisionSpec | None:
    vc = None
    for key in _VISION_KEYS:
        if isinstance(cfg.get(key), Mapping):
            vc = cfg[key]
            break
    if not vc:
        return None
    width = vc.get("embed_dim")
    lm_width = vc.get("hidden_size")
    if isinstance(width, int) and isinstance(lm_width, int) and width != lm_width:
        # Qwen2-VL (Qwen2VLVisionConfig) names the ViT's width embed_dim; its hidden_size is the language
        # model's, the width the patch merger projects to
        hidden, out_default = width, lm_width
    else:
        hidden, out_default = int(_get(vc, "hidden_size", "embed_dim", "width", default=0) or 0), 0
    if not hidden:
        return None
    layers = int(_get(vc, "depth", "num_hidden_layers", "num_layers", "layers", default=0) or 0)
    ratio = vc.get("mlp_ratio")
    inter_default = int(hidden * ratio) if isinstance(ratio, int | float) and ratio > 0 else 4 * hidden
    inter = int(_get(vc, "intermediate_size", "mlp_dim", default=inter_default) or inter_default)
    heads = int(_get(vc, "num_heads", "num_attention_heads", default=max(1, hidden // 64)) or 1)
    patch = int(_get(vc, "patch_size", default=14) or 14)
    tps = int(vc.get("temporal_patch_size") or 1)
    chans = int(vc.get("in_channels") or vc.get("in_chans") or vc.get("num_channels") or 3)
    out = int(_get(vc, "out_hidden_size", "projection_dim", default=out_default) or 0)
    merge = int(vc.get("spatial_merge_size") or 1)
    gated = str(vc.get("hidden_act", "")).endswith("silu") and "mlp" not in str(vc.get("model_type", ""))
    per_layer = 4 * hidden * hidden + (3 if gated else 2) * hidden * inter + 4 * hidden + inter
    params = layers * per_layer + chans * patch * patch * tps * hidden
    pos = vc.get("num_position_embeddings")
    if isinstance(pos, int):
        params += pos * hidden
    text = text_config_of(cfg)
    text_hidden = int(_get(text, "hidden_size", "d_model", default=0) or 0) if text is not cfg else 0
    proj_out = out or text_hidden
    if proj_out:
        merged = hidden * merge * merge
        params += merged * merged + merged * proj_out
        deep = vc.get("deepstack_visual_indexes")
        if isinstance(deep, list):
            params += len(deep) * (merged * merged + merged * proj_out)
    deep_n = (
        len(vc["deepstack_visual_indexes"]) if isinstance(vc.get("deepstack_visual_indexes"), list) else 0
    )
    return VisionSpec(hidden, layers, inter, heads, patch, proj_out, params, merge, deep_n)


def _audio_params(cfg: Mapping[str, Any]) -> int:
    for key in _AUDIO_KEYS:
        ac = cfg.get(key)
        if isinstance(ac, Mapping):
            d = int(_get(ac, "d_model", "hidden_size", default=0) or 0)
            n = int(_get(ac, "encoder_layers", "num_hidden_layers", default=0) or 0)
            f = int(_get(ac, "encoder_ffn_dim", "intermediate_size", default=4 * d) or 4 * d)
            return n * (4 * d * d + 2 * d * f)
    return 0


def _max_len(tc: Mapping[str, Any], model_type: str) -> MaxLenInfo:
    base = None
    key = None
    for k in _MAX_LEN_KEYS:
        if k == "model_max_length":
            continue
        v = tc.get(k)
        if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0:
            if base is None or int(v) < base:
                base, key = int(v), k
    mml = tc.get("model_max_length")
    mml = int(mml) if isinstance(mml, (int, float)) and not isinstance(mml, bool) and mml > 0 else None
    rope = tc.get("rope_scaling") or tc.get("rope_parameters")
    rope_type = factor = orig = None
    if isinstance(rope, Mapping):
        rope_type = rope.get("rope_type") or rope.get("type")
        f = rope.get("factor")
        factor = float(f) if isinstance(f, (int, float)) else None
        o = rope.get("original_max_position_embeddings")
        orig = int(o) if isinstance(o, (int, float)) else None
    return MaxLenInfo(
        key, base, mml, str(rope_type) if rope_type else None, factor, orig, skip_rope="gemma3" in model_type
    )


def _quant_config(config: Mapping[str, Any], tc: Mapping[str, Any]) -> Mapping[str, Any] | None:
    q = config.get("quantization_config") or tc.get("quantization_config") or config.get("compression_config")
    if isinstance(q, Mapping):
        return q
    hq = config.get("hf_quant_config")  # ModelOpt's separate hf_quant_config.json, merged by the caller
    if isinstance(hq, Mapping):
        inner = hq.get("quantization") if isinstance(hq.get("quantization"), Mapping) else hq
        merged = dict(inner)
        merged.setdefault("quant_method", "modelopt")
        return merged
    return None


def _config_dtype(config: Mapping[str, Any], tc: Mapping[str, Any]) -> str | None:
    for node in (config, tc, config.get("vision_config") or {}, config.get("encoder_config") or {}):
        if isinstance(node, Mapping):
            d = normalize_dtype(node.get("dtype") or node.get("torch_dtype"))
            if d:
                return d
    return None


def resolve(config: Mapping[str, Any]) -> ModelArch:
    """Resolve a config.json mapping (uncached); a value it cannot read is a PlanInputError."""
    if not isinstance(config, Mapping):
        raise PlanInputError(
            f"model_config: expected a mapping (parsed config.json), got {type(config).__name__}"
        )
    tc = text_config_of(config)
    check_config(config, tc, text_config_path(config))
    try:
        return _resolve(config, tc)
    except PlanInputError:
        raise
    except (TypeError, ValueError, KeyError, IndexError, AttributeError, ZeroDivisionError) as exc:
        raise PlanInputError(
            f"model_config: cannot read a value of config.json ({type(exc).__name__}: {exc}). Fix: compare "
            "it with the checkpoint's published config.json (counts are JSON integers, "
            "sub-configs are objects)."
        ) from None


def _resolve(config: Mapping[str, Any], tc: Mapping[str, Any]) -> ModelArch:
    archs = config.get("architectures") or tc.get("architectures") or []
    if isinstance(archs, str):
        archs = [archs]
    model_type = str(config.get("model_type") or tc.get("model_type") or "")
    text_type = str(tc.get("model_type") or model_type)
    hidden = _int(tc, ("hidden_size", "d_model", "n_embd", "dim"), "hidden_size")
    n_layers = _int(tc, _LAYER_KEYS, "num_hidden_layers")
    if hidden <= 0 or n_layers <= 0:
        raise PlanInputError("model_config: hidden_size and num_hidden_layers must be positive")
    nq = _int(tc, _HEAD_KEYS, "num_attention_heads", default=0)
    mamba = _mamba(tc, text_type, hidden)
    kinds = _layer_kinds(tc, n_layers, text_type, mamba is not None)
    n_layers = len(kinds)
    if nq <= 0 and any(k != "mamba" and k != "none" for k in kinds):
        raise PlanInputError("model_config: missing num_attention_heads")
    # KV heads: first alias present; null means missing.
    nkv = None
    for k in _KV_KEYS:
        v = tc.get(k)
        if v is not None:
            nkv = int(v)
            break
    if text_type == "falcon" and tc.get("multi_query") and not tc.get("new_decoder_architecture"):
        nkv = 1
    attn_cfg = tc.get("attn_config")
    if nkv is None and isinstance(attn_cfg, Mapping) and attn_cfg.get("kv_n_heads"):
        nkv = int(attn_cfg["kv_n_heads"])
    if nkv is None:
        nkv = nq
    kv_lora = tc.get("kv_lora_rank")
    mla = None
    if kv_lora and (text_type in _MLA_TYPES or model_type in _MLA_TYPES or "qk_rope_head_dim" in tc):
        mla = MlaSpec(
            kv_lora_rank=int(kv_lora),
            q_lora_rank=int(tc["q_lora_rank"]) if tc.get("q_lora_rank") else None,
            qk_nope_head_dim=int(tc.get("qk_nope_head_dim") or 128),
            qk_rope_head_dim=int(tc.get("qk_rope_head_dim") or 64),
            v_head_dim=int(tc.get("v_head_dim") or 128),
        )
    if mla:
        head_dim = mla.kv_lora_rank + mla.qk_rope_head_dim
    else:
        hd = _get(tc, "head_dim", "hidden_size_per_head", "kv_channels", "attention_head_dim")
        head_dim = int(hd) if hd and int(hd) > 0 else (hidden // nq if nq else 0)
    vocab = _int(tc, ("vocab_size", "padded_vocab_size", "n_vocab"), "vocab_size", default=32000)
    inter = _int(
        tc,
        ("intermediate_size", "ffn_hidden_size", "n_inner", "ffn_dim"),
        "intermediate_size",
        default=4 * hidden,
    )
    if text_type.startswith("llama4"):
        inter = int(tc.get("intermediate_size_mlp") or inter)
    tie = config.get("tie_word_embeddings")
    if tie is None:
        tie = tc.get("tie_word_embeddings", False)
    act = str(_get(tc, "hidden_act", "activation_function", default="silu"))
    gated = text_type not in (
        "gpt2",
        "gpt_neox",
        "opt",
        "falcon",
        "phi",
        "starcoder2",
        "bloom",
        "mpt",
        "gptj",
    )
    qkv_bias = bool(
        tc.get("attention_bias")
        or tc.get("qkv_bias")
        or text_type in ("qwen2", "qwen2_moe", "qwen2_vl", "qwen2_5_vl")
    )
    if text_type.startswith("qwen3"):
        qkv_bias = bool(tc.get("attention_bias") or tc.get("qkv_bias"))
    o_bias = bool(tc.get("attention_bias")) and text_type.startswith(("gpt_oss", "llama", "mistral"))
    qk_norm = text_type.startswith(("qwen3", "gemma3", "olmo2", "llama4")) and not mla
    if text_type.startswith("llama4"):
        qk_norm = False  # Llama-4's qk norm has no weights
    window = tc.get("sliding_window") if isinstance(tc.get("sliding_window"), int) else None
    chunk = tc.get("attention_chunk_size") if isinstance(tc.get("attention_chunk_size"), int) else None
    mtp = int(tc.get("num_nextn_predict_layers") or tc.get("mtp_num_hidden_layers") or 0)
    name = str(config.get("_name_or_path") or (archs[0] if archs else model_type or "model"))
    del act
    moe = _moe(tc, n_layers, text_type, hidden)
    return ModelArch(
        name=name,
        architectures=tuple(str(a) for a in archs),
        model_type=model_type,
        text_model_type=text_type,
        hidden_size=hidden,
        num_layers=n_layers,
        num_heads=nq,
        num_kv_heads=0 if all(k in ("mamba", "none") for k in kinds) else nkv,
        head_dim=head_dim,
        vocab_size=vocab,
        intermediate_size=inter,
        tie_word_embeddings=bool(tie),
        qkv_bias=qkv_bias,
        o_bias=o_bias,
        qk_norm=qk_norm,
        gated_mlp=gated,
        layer_kinds=kinds,
        layer_mlp=_layer_mlp(tc, kinds, moe),
        sliding_window=window,
        chunk_size=chunk,
        mla=mla,
        moe=moe,
        mamba=mamba,
        vision=_vision(config),
        audio_params=_audio_params(config),
        mtp_layers=mtp,
        max_len=_max_len(tc, text_type),
        config_dtype=_config_dtype(config, tc),
        quant_config=_quant_config(config, tc),
        raw_text=tc,
    )


# Cache keyed by object identity; the entry keeps the object alive so its id is not reused, and a
# cheap fingerprint (top-level length and text-config length) guards against in-place edits.
_CACHE: dict[int, tuple[Mapping[str, Any], int, int, ModelArch]] = {}
_CACHE_MAX = 512


def resolve_cached(config: Mapping[str, Any]) -> ModelArch:
    key = id(config)
    hit = _CACHE.get(key)
    if hit is not None and hit[0] is config:
        tc = text_config_of(config)
        if hit[1] == len(config) and hit[2] == len(tc):
            return hit[3]
    arch = resolve(config)
    if len(_CACHE) >= _CACHE_MAX:
        _CACHE.pop(next(iter(_CACHE)))
    _CACHE[key] = (config, len(config), len(text_config_of(config)), arch)
    return arch
