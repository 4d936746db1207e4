"""The multimodal encoder pass of vLLM's memory profile, per model family.

``GPUModelRunner.profile_run`` (vllm/v1/worker/gpu_model_runner.py) runs the vision encoder on
``mm_max_items_per_batch`` dummy items of the modality with the most tokens per item, keeps their
outputs in the encoder cache, then runs the text dummy forward with them alive. The item count is
``MultiModalBudget._get_max_items`` (vllm/multimodal/encoder_budget.py, v0.24.0):

    budget = max(max_num_encoder_input_tokens (= max_num_batched_tokens), max tokens per item)
    per_prompt = max(1, min(limit_mm_per_prompt[modality], max_model_len // tokens))
    items = max(1, min(budget // tokens, max_num_seqs * per_prompt))

(``compute_mm_encoder_budget``, vllm/v1/core/encoder_cache_manager.py). A modality whose limit is 0 is
not profiled; a modality left out of limit_mm_per_prompt gets 999 (``MultiModalConfig``,
vllm/config/multimodal.py).
"""

from __future__ import annotations

from collections.abc import Mapping

from .config import ModelArch

DEFAULT_LIMIT = 999  # MultiModalConfig.get_limit_per_prompt: "Unspecified modality is set to 999"
# Qwen2VLProcessingInfo._MAX_FRAMES_PER_VIDEO (vllm/model_executor/models/qwen2_vl.py, v0.24.0)
MAX_FRAMES_PER_VIDEO = 14
# The largest image the checkpoint's processor keeps (preprocessor_config.json): Qwen2-VL and
# Qwen2.5-VL max_pixels 12845056 (patch 14), Qwen3-VL size.longest_edge 16777216 (patch 16).
_MAX_PIXELS = {
    "qwen2_vl": 12845056,
    "qwen2_5_vl": 12845056,
    "qwen3_vl": 16777216,
    "qwen3_vl_moe": 16777216,
}
# Qwen3-VL's video_preprocessor_config.json: size.longest_edge 25165824 over temporal_patch_size 2 frames.
_QWEN3_VIDEO_MAX_PIXELS = 25165824
_TEMPORAL_PATCH = 2
# 0.11.0-0.12.x count a Qwen3-VL video's tokens as its soft tokens x 12.5 ("one video token is converted
# to '<{timestamp} seconds>' (on average 9.5 tokens) + vision_start_token + video_token +
# vision_end_token", Qwen3VLProcessingInfo.get_max_video_tokens); 0.13 counts the soft tokens. The soft
# tokens are the same 12,288 either way: the video processor's longest_edge bounds all frames together.
_QWEN3_VIDEO_TEXT = 12.5
_TIMESTAMP_TEXT_RELEASES = ((0, 11), (0, 13))
# 0.11.0-0.12.x profile_run: an encoder output with fewer rows than the encoder budget is copied into a
# zeroed (budget, width) tensor, "when encoder cache needs to store the embeddings that encoder outputs
# are scattered onto", which the encoder cache keeps through the text dummy forward (gone in 0.13.0).
_EXPANDED_OUTPUT_RELEASES = ((0, 11), (0, 13))
NEWEST = (0, 34, 0)


def _within(version: tuple[int, ...], span: tuple[tuple[int, int], tuple[int, int]]) -> bool:
    return span[0] <= tuple(version[:2]) < span[1]


def _image_tokens(arch: ModelArch) -> int | None:
    v = arch.vision
    pixels = _MAX_PIXELS.get(arch.model_type)
    if v is None or pixels is None:
        return None
    unit = v.patch * v.merge
    # get_image_size_with_most_features factors max_pixels // unit**2 merged patches into h x w
    return pixels // (unit * unit)


def max_tokens_per_item(
    arch: ModelArch, max_model_len: int, version: tuple[int, ...] = NEWEST
) -> dict[str, int]:
    """vLLM's ``get_mm_max_tokens_per_item`` for the families modelled; {} for the others."""
    image = _image_tokens(arch)
    if image is None:
        return {}
    out = {"image": image}
    if arch.model_type in ("qwen3_vl", "qwen3_vl_moe") and arch.vision is not None:
        # Qwen3VLProcessingInfo.get_max_video_tokens: two frames at video max_pixels // temporal patch
        unit = arch.vision.patch * arch.vision.merge
        out["video"] = _QWEN3_VIDEO_MAX_PIXELS // _TEMPORAL_PATCH // (unit * unit)
        if _within(version, _TIMESTAMP_TEXT_RELEASES):
            out["video"] = int(out["video"] * _QWEN3_VIDEO_TEXT)
    if arch.model_type in ("qwen2_vl", "qwen2_5_vl"):
        # get_max_video_tokens: the most frames (at the largest image size) whose tokens fit
        # max_model_len, at most 14; frames are padded to temporal_patch_size 2.
        frames = 1
        while (frames + 1 + (frames + 1) % 2) // 2 * image <= max_model_len:
            frames += 1
        frames = min(frames, MAX_FRAMES_PER_VIDEO)
        out["video"] = max((frames + frames % 2) // 2, 1) * image
    return out


def encoder_rows(arch: ModelArch, modality: str, tokens: int, version: tuple[int, ...] = NEWEST) -> int:
    """Embedding rows the encoder returns for one item that vLLM counts as ``tokens``."""
    qwen3_video = modality == "video" and arch.model_type in ("qwen3_vl", "qwen3_vl_moe")
    if qwen3_video and _within(version, _TIMESTAMP_TEXT_RELEASES):
        return round(tokens / _QWEN3_VIDEO_TEXT)
    return tokens


def kept_rows(rows: int, budget: int, version: tuple[int, ...] = NEWEST) -> int:
    """Rows of one item's output the encoder cache keeps through the text dummy forward."""
    return max(rows, budget) if _within(version, _EXPANDED_OUTPUT_RELEASES) else rows


def encoder_profile(
    arch: ModelArch,
    mnbt: int,
    max_num_seqs: int,
    max_model_len: int,
    limits: Mapping[str, int],
    version: tuple[int, ...] = NEWEST,
) -> tuple[str, int, int]:
    """(modality, tokens per item, items) of the encoder profiling pass; ("", 0, 0) when none runs."""
    per_item = {
        m: t
        for m, t in max_tokens_per_item(arch, max_model_len, version).items()
        if limits.get(m, DEFAULT_LIMIT) > 0
    }
    if not per_item:
        return "", 0, 0
    modality, tokens = max(per_item.items(), key=lambda x: (x[1], x[0]))
    budget = max(mnbt, tokens)
    per_prompt = max(1, min(limits.get(modality, DEFAULT_LIMIT), max_model_len // tokens))
    return modality, tokens, max(1, min(budget // tokens, max_num_seqs * per_prompt))


def encoder_profiled(runner: str, version: tuple[int, int, int]) -> bool:
    """Whether the profile runs the encoder pass: the V2 runner's ``profile_run`` (vllm/v1/worker/gpu/
    model_runner.py) has no multimodal step through 0.26 and calls ``profile_encoder_cache`` with the
    same budget from 0.27; the V1 runner always profiles it."""
    return runner == "v1" or version >= (0, 27)
