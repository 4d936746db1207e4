"""The multimodal encoder pass of vLLM's profile: which modality, how many items, and its memory.

vLLM sources (0.24.0): vllm/multimodal/encoder_budget.py (MultiModalBudget._get_max_items),
vllm/v1/core/encoder_cache_manager.py (compute_mm_encoder_budget), vllm/v1/worker/gpu_model_runner.py
(profile_run), vllm/model_executor/models/qwen2_vl.py and qwen3_vl.py (get_mm_max_tokens_per_item).
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_planner import PlanInputError, plan
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_planner.config import resolve
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_planner.multimodal import (
    encoder_profile,
    encoder_rows,
    kept_rows,
    max_tokens_per_item,
)
from planner_helpers import H200, config

GIB = 1 << 30
QWEN3_VL = "Qwen__Qwen3-VL-8B-Instruct"


def test_qwen3_vl_tokens_per_item() -> None:
    """16777216 image pixels / (16 x 2)^2 = 16384 tokens; video: two frames at 25165824 // 2 pixels."""
    arch = resolve(config(QWEN3_VL))
    assert max_tokens_per_item(arch, 262144) == {"image": 16384, "video": 12288}


def test_encoder_budget_matches_vllm_log() -> None:
    """max_num_batched_tokens 8192 < 16384 tokens per image: "Encoder cache will be initialized with a
    budget of 16384 tokens, and profiled with 1 image items of the maximum feature size."
    (https://github.com/noonghunna/club-3090/issues/1047, a Qwen3-VL-processor model on vLLM)."""
    arch = resolve(config(QWEN3_VL))
    assert encoder_profile(arch, 8192, 256, 262144, {})[1:] == (16384, 1)
    # a larger batch budget runs more items of the same modality
    assert encoder_profile(arch, 32768, 256, 262144, {})[1:] == (16384, 2)
    # one request at a time, one image per prompt: still budget // tokens is not the limit, requests are
    assert encoder_profile(arch, 65536, 1, 262144, {"image": 1})[1:] == (16384, 1)
    # images off: the video modality is profiled instead; both off: no encoder pass
    assert encoder_profile(arch, 8192, 256, 262144, {"image": 0})[1:] == (12288, 1)
    assert encoder_profile(arch, 8192, 256, 262144, {"image": 0, "video": 0})[1:] == (0, 0)


def test_qwen2_vl_video_frames_follow_max_model_len() -> None:
    """Qwen2-VL / Qwen2.5-VL (patch 14, max_pixels 12845056 = 16384 tokens per image): a video holds the
    most frames (at most 14, padded to pairs) whose tokens fit max_model_len. The Qwen3-VL tower is
    reused with the Qwen2.5-VL processor rules (no Qwen2.5-VL config.json is in the fixtures)."""
    base = resolve(config(QWEN3_VL))
    arch = replace(base, model_type="qwen2_5_vl", vision=replace(base.vision, patch=14))
    assert max_tokens_per_item(arch, 16384) == {"image": 16384, "video": 16384}
    assert max_tokens_per_item(arch, 65536) == {"image": 16384, "video": 65536}
    assert max_tokens_per_item(arch, 128000) == {"image": 16384, "video": 7 * 16384}  # 14 frames
    assert encoder_profile(arch, 8192, 256, 128000, {})[1:] == (7 * 16384, 1)


def _act(**options: object) -> int:
    r = plan(config(QWEN3_VL), H200, options={"vllm_version": "0.24.0", "max_model_len": 32768, **options})
    assert r["feasible"], r["errors"]
    return r["per_gpu"]["activation_peak_bytes"]


def test_limits_and_batch_move_the_profiled_peak() -> None:
    text_only = _act(language_model_only=True)
    default = _act()
    # the encoder pass of one 16384-token image is far above the text-only peak
    assert default > 1.5 * text_only
    assert _act(limit_mm_per_prompt={"image": 0, "video": 0}) == text_only
    # video only: fewer tokens per item
    assert text_only < _act(limit_mm_per_prompt='{"image": 0}') < default
    # two images per batch at max_num_batched_tokens 32768
    assert _act(max_num_batched_tokens=32768) > 1.8 * default - text_only


def test_limit_mm_per_prompt_goes_to_vllm() -> None:
    r = plan(config(QWEN3_VL), H200, options={"vllm_version": "0.24.0", "limit_mm_per_prompt": {"image": 2}})
    args = r["vllm_args"]
    assert args[args.index("--limit-mm-per-prompt") + 1] == '{"image": 2}'


@pytest.mark.parametrize("bad", ['{"image": -1}', "image=2", {"image": True}, [1]])
def test_limit_mm_per_prompt_rejects_bad_values(bad: object) -> None:
    with pytest.raises(PlanInputError, match="limit_mm_per_prompt"):
        plan(config(QWEN3_VL), H200, options={"limit_mm_per_prompt": bad})


def test_weights_include_the_encoder() -> None:
    with_towers = plan(config(QWEN3_VL), H200, options={"vllm_version": "0.24.0"})
    text = plan(config(QWEN3_VL), H200, options={"vllm_version": "0.24.0", "language_model_only": True})
    tower = with_towers["per_gpu"]["weights_bytes"] - text["per_gpu"]["weights_bytes"]
    # the ~0.58 B-parameter Qwen3-VL-8B vision tower and merger in bf16
    assert 0.9 * (1 << 30) < tower < 1.3 * (1 << 30)


def test_v2_runner_before_0_27_does_not_profile_the_encoder() -> None:
    """0.25/0.26 pick the V2 runner for dense Qwen3-VL; its profile_run has no encoder step until 0.27
    (vllm/v1/worker/gpu/model_runner.py), so the KV cache gets the encoder's runtime memory."""

    def run(version: str, **options: object) -> dict:
        r = plan(config(QWEN3_VL), H200, options={"vllm_version": version, "max_model_len": 32768, **options})
        assert r["feasible"], r["errors"]
        return r

    v1, v2, v2_27 = run("0.24.0"), run("0.25.1"), run("0.27.1")
    text = run("0.25.1", language_model_only=True)
    assert v2["per_gpu"]["activation_peak_bytes"] == text["per_gpu"]["activation_peak_bytes"]
    assert v2_27["per_gpu"]["activation_peak_bytes"] == v1["per_gpu"]["activation_peak_bytes"]
    (line,) = [w for w in v2["warnings"] if "vision encoder" in w]
    assert "V2 model runner does not profile the vision encoder" in line
    assert "lower gpu_memory_utilization to 0.91" in line
    # the suggested value keeps the encoder's runtime peak out of the KV cache
    lowered = run("0.25.1", gpu_memory_utilization=0.91)
    assert lowered["available_kv_cache_bytes"] <= (
        v2["available_kv_cache_bytes"]
        - (v1["per_gpu"]["activation_peak_bytes"] - v2["per_gpu"]["activation_peak_bytes"])
    )
    assert all("does not profile" not in w for w in v2_27["warnings"])


def test_qwen2_vl_vision_width_is_embed_dim() -> None:
    """Qwen2-VL's vision_config (transformers Qwen2VLVisionConfig, whose defaults are Qwen2-VL-7B's: depth
    32, embed_dim 1280, hidden_size 3584, mlp_ratio 4, 16 heads, patch 14, temporal patch 2, merge 2)
    names the ViT's width embed_dim and the language model's width hidden_size. The tower is the
    paper's 675M-parameter ViT (Qwen2-VL technical report, arXiv 2409.12191, table 1) with its merger."""
    cfg = config(QWEN3_VL)
    cfg["architectures"] = ["Qwen2VLForConditionalGeneration"]
    cfg["model_type"] = "qwen2_vl"
    cfg["vision_config"] = {
        "depth": 32,
        "embed_dim": 1280,
        "hidden_size": 3584,
        "hidden_act": "quick_gelu",
        "mlp_ratio": 4,
        "num_heads": 16,
        "in_chans": 3,
        "patch_size": 14,
        "spatial_merge_size": 2,
        "temporal_patch_size": 2,
    }
    v = resolve(cfg).vision
    assert v is not None
    assert (v.hidden, v.intermediate, v.heads, v.out_hidden) == (1280, 5120, 16, 3584)
    assert v.params == pytest.approx(675e6, rel=0.01)


def test_qwen3_vl_video_profile_of_0_11_and_its_expanded_cache() -> None:
    """Qwen3-VL-30B-A3B at TP 4 on 4x RTX 3090, vLLM 0.11.0, max_model_len 65536 (sipeed_wiki
    NanoKVM-Pro guide @ 22b7e6f, the accuracy case 4xrtx3090-v0.11-qwen3-vl-30b-a3b-tp4): "Encoder cache
    will be initialized with a budget of 153600 tokens, and profiled with 1 video items of the maximum
    feature size", then "Available KV cache memory: 2.31 GiB". 0.11-0.12 count the video's 12,288 soft
    tokens x 12.5 (timestamp text), so the video outranks the 16,384-token image, and profile_run copies
    the 12,288-row output into a zeroed (153600, 2048 x 4) tensor the encoder cache keeps: 2.34 GiB."""
    arch = resolve(config("Qwen__Qwen3-VL-30B-A3B-Instruct"))
    assert encoder_profile(arch, 2048, 256, 65536, {}, (0, 11, 0)) == ("video", 153600, 1)
    assert encoder_rows(arch, "video", 153600, (0, 11, 0)) == 12288
    assert kept_rows(12288, 153600, (0, 11, 0)) == 153600
    # 0.13 counts the soft tokens and keeps the output as it is
    assert encoder_profile(arch, 2048, 256, 65536, {}, (0, 13, 0)) == ("image", 16384, 1)
    assert kept_rows(12288, 153600, (0, 13, 0)) == 12288
    gpu = {"name": "NVIDIA GeForce RTX 3090", "memory_mib": 24576, "count": 4, "compute_capability": "8.6"}
    opts = {"tensor_parallel_size": 4, "gpu_memory_utilization": 0.9, "max_model_len": 65536}
    opts |= {"max_num_seqs": 256, "max_num_batched_tokens": 2048, "vllm_version": "0.11.0"}
    r = plan(config("Qwen__Qwen3-VL-30B-A3B-Instruct"), gpu, options=opts)
    expanded = 153600 * 2048 * 4 * 2
    assert r["per_gpu"]["activation_peak_bytes"] > expanded
    # the log's 2.31 GiB; without the expanded output the plan had 4.78 GiB (+107 %)
    assert r["available_kv_cache_bytes"] / GIB == pytest.approx(2.31, rel=0.2)
