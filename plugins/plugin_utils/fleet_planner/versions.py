"""vLLM version families and the version-dependent switches of its memory accounting.

vLLM changed how it sizes the KV cache several times. Each switch below is keyed to the
first release that behaves that way, so any release from 0.2 on maps onto a behaviour.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from functools import lru_cache

from .errors import PlanInputError
from .v0_engine import v0_family

DEFAULT_VLLM_VERSION = "0.34.0"
# Newest release whose accounting is modelled; newer releases are planned like it.
NEWEST_MODELLED = (0, 34, 0)
# Oldest family modelled: the V0 engine of 0.4 (v0_engine.py). Older releases are planned like it.
OLDEST_MODELLED = (0, 4, 0)

_VERSION_RE = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?")
# What may follow X.Y[.Z] in a version vLLM or an image reports: more release numbers (0.10.1.1), a
# pre-release (rc1), .postN, .devN, a +local part, or an image tag's build suffix (-cu128); anything else
# is not a version (0.10abc) and is refused rather than read as its leading numbers.
_TAIL_RE = re.compile(
    r"^(?P<more>(?:\.\d+)*)(?P<pre>(?:rc|a|b)\d+)?(?:\.post\d+)?(?:\.dev\d*)?(?:\+[0-9a-z.]+)?"
    r"(?P<build>[-_][0-9a-z][0-9a-z._-]*)?$",
    re.IGNORECASE,
)
# setuptools-scm builds between releases: 0.11.1.dev123+gabc1234 (main after 0.11.0), 0.12.0rc1.dev4
_DEV_RE = re.compile(r"(?:\.dev\d*|\+g?[0-9a-f]{6,})", re.IGNORECASE)
_COMMIT_RE = re.compile(r"^[0-9a-f]{7,40}$", re.IGNORECASE)
# image tags: vllm/vllm-openai:v0.11.0, registry:5000/vllm:0.10.1.1-cu128, ...:nightly-<sha>
_TAG_RE = re.compile(r"^v?(\d+\.\d+(?:\.\d+)*(?:(?:rc|\.post|\.dev)\d+)*)(?:[-_].*)?$", re.IGNORECASE)

Version = tuple[int, int, int]


def parse_version(text: str | None) -> Version:
    """Parse '0.11.2', 'v0.8.5.post1', '0.20.0rc1' into a (major, minor, patch) tuple."""
    if text is None or str(text).strip() == "":
        text = DEFAULT_VLLM_VERSION
    return _parse_release(str(text).strip())


@lru_cache(maxsize=1024)
def _parse_release(text: str) -> Version:
    """parse_version of stripped text, cached: the vLLM tables parse their releases on every plan."""
    match = _VERSION_RE.match(text)
    if not match and _COMMIT_RE.match(text):
        raise PlanInputError(
            f"vllm_version: {text!r} is a commit, not a release, so its memory accounting cannot be told. "
            "Fix: set vllm_version to the release the build reports (python -c 'import vllm; "
            "print(vllm.__version__)' in the image, e.g. 0.11.1.dev123+gabc1234), or run an image tagged "
            "with a release."
        )
    if not match:
        raise PlanInputError(
            f"vllm_version: cannot parse {text!r}; expected a release such as 0.11.2. Fix: set vllm_version "
            "to the image's vLLM release (python -c 'import vllm; print(vllm.__version__)')."
        )
    if not _TAIL_RE.match(text[match.end() :]):
        raise PlanInputError(
            f"vllm_version: {text!r} is not a version: only {text[: match.end()]!r} of it reads as one. Fix: "
            "set vllm_version to the image's vLLM release as it reports it (python -c 'import vllm; "
            "print(vllm.__version__)'), e.g. 0.11.2."
        )
    major, minor, patch = int(match.group(1)), int(match.group(2)), int(match.group(3) or 0)
    if (major, minor) < (0, 2):
        raise PlanInputError(
            f"vllm_version: {text!r} is older than 0.2, the oldest release accepted. Fix: set vllm_version "
            ">= 0.2.0."
        )
    return (major, minor, patch)


def is_dev_build(text: str | None) -> bool:
    """A build from between releases (vLLM's main branch): its behaviour may differ from the release."""
    return text is not None and bool(_DEV_RE.search(str(text)))


def version_from_image(image: str | None) -> str | None:
    """The vLLM release an image tag names (vllm/vllm-openai:v0.11.0 -> 0.11.0); None when the tag names
    no release (latest, nightly, a commit) or the reference has no tag or pins only a digest."""
    if not image:
        return None
    ref = str(image).strip().split("@", 1)[0]
    last = ref.rsplit("/", 1)[-1]
    if ":" not in last:
        return None
    tag = last.rsplit(":", 1)[1]
    match = _TAG_RE.match(tag)
    return match.group(1) if match else None


def resolve_version_text(version: str | None, image: str | None) -> str | None:
    """The release to plan for: vllm_version, else the release named by the image tag.

    Raises PlanInputError when neither is given as a release but an image is: a tag such as latest or
    nightly names no release, and planning it as the newest family would silently be wrong.
    """
    if version is not None and str(version).strip() != "":
        return str(version)
    if not image:
        return None
    tagged = version_from_image(image)
    if tagged is None:
        raise PlanInputError(
            f"vllm_version: unset, and the tag of vllm_image {image!r} names no vLLM release, so the "
            "memory accounting to plan with is unknown. Fix: set vllm_version to the release the image "
            "runs (python -c 'import vllm; print(vllm.__version__)' inside it), or use an image tagged "
            "with a release such as vllm/vllm-openai:v0.11.0."
        )
    return tagged


@dataclass(frozen=True, slots=True)
class VersionInfo:
    """Behaviour switches of one vLLM release."""

    version: Version
    family: str
    # gpu_memory_utilization that vLLM uses when the flag is not given (0.34: when extensible is off).
    gmu_default: float
    # 0.8.x: the budget is absolute (everything on the GPU counts against total*gmu). Before 0.8 the
    # V0 engine's accounting (v0_engine.py) applies instead.
    absolute_budget: bool
    # 0.9-0.10: the baseline snapshot precedes NCCL init, so NCCL buffers are inside the budget.
    nccl_in_budget: bool
    # 0.20+: the estimated CUDA-graph pool is subtracted from the KV budget.
    cudagraph_in_budget: bool
    # 0.34+: extensible KV cache sized after warmup from measured free memory.
    extensible: bool
    # 0.34+: cuBLAS handles exist before the snapshot (outside the budget).
    cublas_before_snapshot: bool
    default_block_size: int
    # 0.9+: the A100 is excluded from the large-GPU scheduler defaults.
    a100_excluded: bool
    # 0.30+: GPUs with >= 160 GiB get 16384/1024 scheduler defaults.
    huge_gpu_class: bool
    # 0.20.1+: logged token count = int(max_concurrency * max_model_len).
    tokens_from_concurrency: bool
    # 0.29+: the max_model_len check keeps one null block aside.
    null_block_in_check: bool
    # <= 0.29: YaRN rope scaling multiplies the derived max_model_len.
    yarn_multiplies: bool
    # 0.12+: longrope models default to original_max_position_embeddings.
    longrope_original_default: bool
    # 0.14+: checkpoint-declared KV-cache quantization is honoured by kv_cache_dtype=auto.
    checkpoint_kv_dtype: bool
    # 0.26+: sliding-window sizing uses in-flight tokens (mnbt x (pp + 1) with async scheduling).
    in_flight_tokens: bool
    # 0.14+: async scheduling on by default for generative models.
    async_scheduling: bool
    # 0.20+: world size larger than local GPUs is a ValueError (before: Ray was tried).
    world_size_error: bool
    # 0.9+: fp32 checkpoints resolve to bf16 (0.8.x: fp16).
    fp32_to_bf16: bool
    # 0.18+: block size picked per attention backend (MLA backends need 64 / 128).
    backend_block_size: bool
    # Text variant of the "To serve at least one request" error: "early" (0.8-0.21), "mid" (0.22-0.33), "new".
    kv_error_variant: str
    # 0.13+: the KV error ends with the conserving-memory docs link.
    kv_error_link: bool
    # 0.27+: non-KV memory measured as consumed + transient peak (numerically the same decomposition).
    profile_consumed: bool
    # The profile's dummy sampler pass uses FlashInfer's top-k/top-p kernels: 0.8.x (FlashInfer < 0.2.3, as
    # its images ship it) and 0.21+ (VLLM_USE_FLASHINFER_SAMPLER defaults to on, flashinfer-python a hard
    # dependency since 0.12). 0.9-0.11 used it only when the optional extra was installed; 0.12-0.20 only
    # on opt-in (vllm/v1/sample/ops/topk_topp_sampler.py TopKTopPSampler.__init__ per tag). The
    # `sampler_backend` option replaces it for one deployment (planner.plan).
    flashinfer_sampler: bool
    # 0.17+: PyTorch path masks top-k/top-p with the Triton kernel for >= 8 rows instead of sorting.
    triton_topk: bool
    # 0.17+: -O2 enables the FlashInfer all-reduce + RMSNorm fusion on Hopper/Blackwell TP (no PP), whose
    # IPC workspace is created when the profile run compiles the model (after the snapshot).
    allreduce_rms_fusion: bool
    # 0.17-0.26 pin FlashInfer 0.6.4-0.6.14, whose SymmDeviceMemory rounds each workspace buffer up to the
    # multicast granularity and needs a multicast-capable GPU (0.27+ pin 0.6.16+: 2 MiB, no multicast).
    fi_workspace_mc_rounded: bool
    # 0.34+: only the GPU model runner of vllm/v1/worker/gpu/ exists (0.22-0.33 used it for some dense,
    # unquantized architectures only), with its persistent penalty state per request.
    v2_model_runner: bool
    # 0.27+: on one node `_resolve_fi_ar_backend` picks FlashInfer's MNNVL backend (auto-selected since 0.25,
    # trtllm only where the node lacks NVSwitch multicast), whose workspace FlashInfer 0.6.16+ allocates as
    # one multicast buffer rounded to the multicast granularity (non_torch.mnnvl_workspace_bytes). 0.25-0.26
    # (FlashInfer 0.6.13/0.6.14) allocate it through torch symmetric memory: not modelled, planned as trtllm.
    fi_ar_mnnvl: bool
    # 0.29+: the standalone FlashInfer all-reduce is on by default (VLLM_ALLREDUCE_USE_FLASHINFER=1) and
    # creates the same workspace on the first all-reduce, with PP too.
    flashinfer_allreduce: bool
    # 0.10.2+: built on torch 2.8, which MXFP4's Triton MoE kernels need (0.10.1 ships torch 2.7.1, so
    # Hopper falls back to Marlin).
    torch_28: bool
    # Through 0.19 (torch <= 2.10) PyTorch gives each cuBLAS handle and stream a workspace from its caching
    # allocator at the first GEMM, which is inside the profile run (torch_cublas_workspace).
    cublas_workspace_torch: bool
    # True when the release is outside the modelled range.
    extrapolated: bool
    # The V0 engine runs (v0_engine.py): every release before 0.8, and 0.8.x where vLLM falls back to it.
    v0_engine: bool = False
    # No version was given: planned for DEFAULT_VLLM_VERSION.
    assumed: bool = False
    # A development build (.devN / +g<commit>): planned as the release family it reports.
    dev_build: bool = False
    # The text it was parsed from.
    raw: str = ""
    # How that text was read where it is not plainly the release (version_reading); "" otherwise.
    reading: str = ""

    @property
    def text(self) -> str:
        return _release_text(self.version)


def version_reading(text: str | None, version: Version) -> str:
    """How a version text was read, where it is not plainly the release planned for ("" otherwise):
    a minor release without its patch, a release candidate, an image's build suffix, a fourth number."""
    raw = str(text or "").strip()
    match = _VERSION_RE.match(raw)
    tail = _TAIL_RE.match(raw[match.end() :]) if match else None
    if match is None or tail is None or is_dev_build(raw):
        return ""  # none given, or a development build (version_warnings says so)
    reasons = []
    if match.group(3) is None:
        reasons.append("names no patch release")
    if tail.group("more"):
        reasons.append(f"has the extra release number(s) {tail.group('more')!r}, not modelled apart")
    if tail.group("pre"):
        reasons.append(f"is a pre-release ({tail.group('pre')}), planned as the final release")
    if tail.group("build"):
        reasons.append(f"carries the build suffix {tail.group('build')!r}, which is ignored")
    return "; ".join(reasons)


@lru_cache(maxsize=256)
def _release_text(version: Version) -> str:
    return ".".join(str(p) for p in version)


@lru_cache(maxsize=256)
def version_info(text: str | None) -> VersionInfo:
    v = parse_version(text)
    extrapolated = v < OLDEST_MODELLED or v > (NEWEST_MODELLED[0], NEWEST_MODELLED[1], 999)
    if v < (0, 8):
        family = v0_family(v)
    elif v < (0, 9):
        family = "V1-early"
    elif v < (0, 11):
        family = "V1-snapshot-A"
    elif v < (0, 20):
        family = "V1-snapshot-B"
    elif v < (0, 34):
        family = "V1-cg-profiled"
    else:
        family = "V1-extensible"
    if v < (0, 22):
        variant = "early"
    elif v < (0, 34):
        variant = "mid"
    else:
        variant = "new"
    return VersionInfo(
        version=v,
        family=family,
        gmu_default=0.92 if v >= (0, 20) else 0.9,
        absolute_budget=v < (0, 9),
        nccl_in_budget=(0, 9) <= v < (0, 11),
        cudagraph_in_budget=v >= (0, 20),
        extensible=v >= (0, 34),
        cublas_before_snapshot=v >= (0, 34),
        default_block_size=64 if v >= (0, 34) else 16,
        a100_excluded=v >= (0, 9),
        huge_gpu_class=v >= (0, 30),
        tokens_from_concurrency=v >= (0, 20, 1),
        null_block_in_check=v >= (0, 29),
        yarn_multiplies=v < (0, 30),
        longrope_original_default=v >= (0, 12),
        checkpoint_kv_dtype=v >= (0, 14),
        in_flight_tokens=v >= (0, 26),
        async_scheduling=v >= (0, 14),
        world_size_error=v >= (0, 20),
        fp32_to_bf16=v >= (0, 9),
        backend_block_size=v >= (0, 18),
        kv_error_variant=variant,
        kv_error_link=v >= (0, 13),
        profile_consumed=v >= (0, 27),
        # V0 (before 0.8) sorts: FlashInfer only with VLLM_USE_FLASHINFER_SAMPLER=1 (vllm/envs.py v0.7.3)
        flashinfer_sampler=(0, 8) <= v < (0, 9) or v >= (0, 21),
        triton_topk=v >= (0, 17),
        allreduce_rms_fusion=v >= (0, 17),
        fi_workspace_mc_rounded=(0, 17) <= v < (0, 27),
        fi_ar_mnnvl=v >= (0, 27),
        flashinfer_allreduce=v >= (0, 29),
        v2_model_runner=v >= (0, 34),
        torch_28=v >= (0, 10, 2),
        cublas_workspace_torch=v < (0, 20),
        extrapolated=extrapolated,
        v0_engine=v < (0, 8),
        assumed=text is None or str(text).strip() == "",
        dev_build=is_dev_build(text),
        raw="" if text is None else str(text).strip(),
        reading=version_reading(text, v),
    )


# The variants a plan switches to are made once per release, so caches keyed by the release object
# (evaluation.Ctx) are shared by every plan that uses them.
@lru_cache(maxsize=256)
def with_sampler(vinfo: VersionInfo, flashinfer: bool) -> VersionInfo:
    """The release with the sampler path a deployment sets (`sampler_backend`)."""
    return replace(vinfo, flashinfer_sampler=flashinfer)


@lru_cache(maxsize=256)
def as_v0_fallback(vinfo: VersionInfo) -> VersionInfo:
    """A 0.8 release where vLLM falls back to the V0 engine for this start."""
    return replace(vinfo, v0_engine=True, family="V0-snapshot", flashinfer_sampler=False)
