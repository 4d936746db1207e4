"""Torch memory of the dummy sampler pass that ends vLLM's profile run, by sampler code path.

On the last PP stage `profile_run` runs `_dummy_sampler_run` (vllm/v1/worker/gpu_model_runner.py,
0.8-0.33; vllm/v1/worker/gpu/model_runner.py in 0.34) over rows = min(max_num_seqs, max_num_batched_tokens)
dummy requests (`_dummy_run`: num_reqs = min(num_tokens, max_num_reqs)). Every release from 0.8.5 to 0.33
gives each row temperature 0.5, top_p 0.9 and top_k = vocab - 1, no penalties, no bad words and no logprobs
(`dummy_metadata`), so top-k/top-p filtering always runs and the penalty, bad-words and logprobs buffers
never exist in the profile. Which filter runs decides the peak:

* "flashinfer": FlashInfer's `top_k_top_p_sampling_from_logits` (flashinfer/sampling.py 0.2.11 to 0.7.3):
  `top_k_mask_logits` writes a new fp32 tensor and `torch.softmax` of it another, nothing sorted.
* "flashinfer_legacy": 0.8.x with FlashInfer < 0.2.3 (`forward_cuda` of 0.8.5): softmax probabilities, then
  rejection sampling into int32 ids.
* "sort": PyTorch `apply_top_k_top_p` (vllm/v1/sample/ops/topk_topp_sampler.py): `logits.sort()` of the
  whole fp32 batch, whose CUDA kernel (ATen Sort.cu `segmented_sort_pairs`) fills an int64 index iota and
  runs cub's segmented radix sort, whose temporary storage holds a third key and value buffer.
* "triton": 0.17+ `apply_top_k_top_p_triton` (vllm/v1/sample/ops/topk_topp_triton.py) masks the fp32
  logits in place for batches of >= 8 rows, with one cached fp32 row buffer per Triton program; then
  `forward_native` takes the softmax and exponential noise of `random_sample`.

The default per release is on VersionInfo (`flashinfer_sampler`, `triton_topk`). FlashInfer is counted only
where vLLM both defaults to it and installs it with every wheel: 0.9-0.11 used it by default only when the
optional `flashinfer` extra was present, and measured 0.11 starts show the sort peak, so those releases are
planned with the sort path (also the larger of the two, so the KV cache is not over-promised).
The `sampler_backend` option overrides that default where the deployment differs: 0.9.2-0.11.0's
`TopKTopPSampler.__init__` takes FlashInfer whenever `import flashinfer.sampling` succeeds and
VLLM_USE_FLASHINFER_SAMPLER is not 0 (their wheels install it only with the `flashinfer` extra,
flashinfer-python 0.2.11 for 0.10.1; their Dockerfiles build FlashInfer 0.2.6.post1-0.3.1 into the image), and
logs "Using FlashInfer for top-p & top-k sampling." when it does; 0.12-0.20 take it on
VLLM_USE_FLASHINFER_SAMPLER=1.
"""

from __future__ import annotations

from functools import lru_cache

from .versions import VersionInfo

FP32 = 4  # the sampler works in float32 (Sampler.forward: logits.to(torch.float32))
INT64 = 8  # torch.sort indices
BOOL = 1

# Bytes per logit (row x vocab) on top of the logits the LM head produced (model dtype, kept alive by
# _dummy_sampler_run while the sampler runs). Each is the set of tensors alive at that path's peak.
# FlashInfer: fp32 logits 4 + top_k_mask_logits output 4 (torch.empty_like(logits)) + softmax probs 4.
FLASHINFER_BYTES = FP32 + FP32 + FP32
# FlashInfer < 0.2.3 (0.8.x forward_cuda): fp32 logits 4 + softmax probs 4; uniform samples are 32 x rows.
FLASHINFER_LEGACY_BYTES = FP32 + FP32
# Sort (peak inside logits.sort): fp32 logits 4 + sorted values 4 + int64 indices 8 + the int64 index iota
# that segmented_sort_pairs allocates 8 + cub's alternate key 4 and value 8 buffers (is_overwrite_okay is
# false for the non-DoubleBuffer SortPairs that ATen calls). The masks, softmax and scatter that follow
# reuse less than the sort's 20 temporary bytes.
SORT_BYTES = FP32 + FP32 + INT64 + INT64 + (FP32 + INT64)
# Triton (in-place masking): fp32 logits 4 + softmax probs 4 + exponential noise q 4 (random_sample).
TRITON_BYTES = FP32 + FP32 + FP32
TRITON_MIN_ROWS = 8  # apply_top_k_top_p: `if HAS_TRITON and logits.shape[0] >= 8`
# FlashInferBackend.supports_compute_capability (vllm/v1/attention/backends/flashinfer.py, 0.21):
# 7.5 <= capability <= 12.1; outside it 0.21+ falls back to the native (Triton) path.
FLASHINFER_MIN_CC = (7, 5)
FLASHINFER_MAX_CC = (12, 1)

# Streaming multiprocessors per GPU (vendor specifications); sizes the Triton path's row buffer.
_SMS = (
    ("B300", 148),
    ("B200", 148),
    ("GB200", 152),
    ("H200", 132),
    ("H100 PCIE", 114),
    ("H100 NVL", 132),
    ("H100", 132),
    ("H800", 132),
    ("GH200", 132),
    ("H20", 78),
    ("A100", 108),
    ("A800", 108),
    ("A30", 56),
    ("A40", 84),
    ("A10G", 80),
    ("A10", 72),
    ("L40S", 142),
    ("L40", 142),
    ("L4", 58),
    ("T4", 40),
    ("V100", 80),
    ("RTX 6000 ADA", 142),
    ("RTX PRO 6000", 188),
    ("RTX A6000", 84),
    ("RTX A5000", 64),
    ("RTX A4000", 48),
    ("RTX 5090", 170),
    ("RTX 4090", 128),
    ("RTX 3090", 82),
)
DEFAULT_SMS = 132  # unknown GPU: the largest common data-centre count (an upper bound for the buffer)


@lru_cache(maxsize=256)
def sm_count(gpu_name: str) -> int:
    """Streaming multiprocessors of a GPU named as nvidia-smi names it (longest known name that matches)."""
    name = gpu_name.upper()
    for key, sms in _SMS:
        if key in name:
            return sms
    return DEFAULT_SMS


def _next_power_of_2(n: int) -> int:
    return 1 << (n - 1).bit_length() if n > 0 else 1


def sampler_path(vinfo: VersionInfo, rows: int, cc: tuple[int, int] = (9, 0)) -> str:
    """The top-k/top-p code path the profile's dummy sampler pass takes on a CUDA GPU (default env)."""
    if vinfo.flashinfer_sampler and FLASHINFER_MIN_CC <= cc <= FLASHINFER_MAX_CC:
        return "flashinfer_legacy" if vinfo.version < (0, 9) else "flashinfer"
    if vinfo.triton_topk and rows >= TRITON_MIN_ROWS:
        return "triton"
    return "sort"


_PER_LOGIT = {
    "flashinfer": FLASHINFER_BYTES,
    "flashinfer_legacy": FLASHINFER_LEGACY_BYTES,
    "triton": TRITON_BYTES,
    "sort": SORT_BYTES,
}


def sampler_bytes(
    vinfo: VersionInfo,
    rows: int,
    vocab: int,
    hidden: int,
    d: int,
    num_sms: int = DEFAULT_SMS,
    cc: tuple[int, int] = (9, 0),
) -> int:
    """Torch bytes alive at the peak of the dummy sampler pass (d = bytes of the model dtype)."""
    if rows <= 0 or vocab <= 0:
        return 0
    path = sampler_path(vinfo, rows, cc)
    per_logit = _PER_LOGIT[path]
    # The LM head's logits stay referenced by _dummy_sampler_run; .to(float32) makes a copy unless the
    # model already runs in fp32 (then the fp32 term above is the same tensor).
    lm_head = d if d != FP32 else 0
    total = rows * vocab * (per_logit + lm_head)
    if path == "triton":
        # _TRITON_BUFFER_CACHE: new_empty((min(next_power_of_2(min(num_sm, rows)), num_sm), vocab)) in fp32
        programs = min(num_sms, rows)
        total += min(_next_power_of_2(programs), num_sms) * vocab * FP32
    # torch.rand_like(hidden_states) of the sampled rows, next to the rows gathered by _dummy_run
    total += 2 * rows * hidden * d
    return total


# vLLM 0.34's RejectionSampler (vllm/v1/worker/gpu/spec_decode/rejection_sampler.py) copies the target
# logits to fp32 one chunk of whole requests at a time (MAX_CHUNK_BYTES, get_max_chunk_logits,
# _iter_request_chunks).
VERIFY_CHUNK_BYTES = 1 << 30


def spec_warmup_bytes(
    vinfo: VersionInfo,
    max_num_seqs: int,
    mnbt: int,
    spec_tokens: int,
    draft_slots: int,
    vocab: int,
    hidden: int,
    d: int,
) -> int:
    """Torch bytes alive at the peak of the warm-up's spec-decode verify step (last PP stage), which the
    extensible KV cache keeps free (0 where vLLM sizes the cache otherwise or runs no such step).

    0.34's ``warmup_kernels`` (vllm/v1/worker/gpu/warmup.py) runs after the profile, before the KV cache is
    sized, and records its transient peak (``ExtensibleKVCache.record_transient_peak``, read by
    ``measure_kv_cache_blocks``) whatever the speculative method. Its first decode step sends
    ``_cap_num_warmup_reqs`` = min(max_num_seqs, mnbt // (K + 2 + slots)) requests, each verifying
    K drafts plus the bonus token with ``SamplingParams.for_sampler_warmup()``: the RejectionSampler holds the
    model-dtype logits of every row while ``Sampler.apply_sampling_params`` copies one chunk of them to fp32.
    The profile's own sampler pass has one row per request, so it never sees this.
    """
    if not vinfo.extensible or spec_tokens <= 0 or max_num_seqs <= 0 or vocab <= 0:
        return 0
    per_req = spec_tokens + 1  # decode_query_len: the drafts and the bonus token
    reqs = min(max_num_seqs, mnbt // (per_req + 1 + max(draft_slots, 0)))
    if reqs <= 0:
        return 0
    rows = reqs * per_req
    limit = max(1, VERIFY_CHUNK_BYTES // (vocab * FP32))
    chunk = min(rows, max(per_req, limit // per_req * per_req))  # a request is never split
    # the step's hidden states and the rows gathered from them for the LM head, as in sampler_bytes
    return rows * vocab * d + chunk * vocab * FP32 + 2 * rows * hidden * d


def sampler_state_bytes(vinfo: VersionInfo, max_num_seqs: int, vocab: int) -> int:
    """Persistent per-request vocabulary buffers of the sampler (last PP stage), outside the profile peak.

    The GPU model runner of 0.34 (vllm/v1/worker/gpu/sample/penalties.py, PenaltiesState) allocates
    output_bin_counts (max_num_reqs x vocab, int32) and prompt_bin_mask (max_num_reqs x cdiv(vocab, 32),
    int32) in load_model after the weights are measured; the consumed-memory measurement counts them.
    """
    if not vinfo.v2_model_runner or max_num_seqs <= 0 or vocab <= 0:
        return 0
    return max_num_seqs * (vocab + -(-vocab // 32)) * 4
