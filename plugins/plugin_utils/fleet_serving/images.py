"""The vLLM image a model runs and the vLLM release it holds: one tag parser, one fallback chain.

A model's ``image`` (else its GPU group's ``vllm_server_image``, whose default is the fleet's
``vllm_fleet_vllm_image``) is what its container runs; the release the planner sizes it for and whose
flags its command gets must be the one in that image. Every reader (vllm_server, the doctor, the bench,
the toolkit's CUDA check, validate) takes both from :func:`image_version`, so they cannot disagree.

The tag is read by the planner's parser (:func:`..fleet_planner.versions.version_from_image`), the one
the memory accounting already depends on: ``v0.20.0rc1`` is 0.20.0rc1 (not 0.20.0),
``0.10.1.1-cu128`` is 0.10.1.1, ``nightly-0.11.0`` names no release. Stdlib only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..fleet_planner.versions import version_from_image
from .deploy import ServingError


@dataclass(frozen=True)
class ImageRef:
    """An image reference split as Docker reads it: ``registry:5000/repo/name:tag@sha256:...``."""

    name: str
    tag: str
    digest: str


def split_image(image: str | None) -> ImageRef:
    """The name, tag and digest of an image reference ("" for a part it lacks); a colon before the
    last slash is a registry port, not a tag."""
    ref = "" if image is None else str(image).strip()
    name, _sep, digest = ref.partition("@")
    slash = name.rfind("/")
    colon = name.rfind(":")
    if colon > slash:
        return ImageRef(name[:colon], name[colon + 1 :], digest)
    return ImageRef(name, "", digest)


def tag_version(image: str | None) -> str | None:
    """The vLLM release an image's tag names (``vllm/vllm-openai:v0.34.0`` -> ``0.34.0``), None when it
    names none (``latest``, ``nightly-...``, a digest only, a build name)."""
    if not split_image(image).tag:
        return None
    return version_from_image(str(image).strip())


def _text(value: Any) -> str:
    return "" if value is None else str(value).strip()


def image_version(model: Mapping[str, Any] | None, image: Any, vllm_version: Any) -> dict[str, str]:
    """``{image, vllm_version}`` a model is served with.

    ``image``/``vllm_version``: its GPU group's ``vllm_server_image`` / ``vllm_server_vllm_version``.
    The model's own ``image`` wins over the group's; the release is the model's
    ``overrides.vllm_version``, else (own image) the release its tag names, else the group's version,
    else the release the group image's tag names. Raises :class:`ServingError` when a model's own image
    names no release and it sets no version: the group's version would size and flag a vLLM it does not
    run.
    """
    model = model or {}
    name = _text(model.get("name")) or "?"
    options = model.get("overrides") or {}
    own_version = _text(options.get("vllm_version")) if isinstance(options, Mapping) else ""
    own_image = _text(model.get("image"))
    if own_image:
        version = own_version or tag_version(own_image)
        if not version:
            raise ServingError(
                f"vllm_server_models[{name}].image {own_image!r} names no vLLM release in its tag, and "
                "the model sets no overrides.vllm_version: the GPU group's version would size and flag a "
                f"vLLM it may not run. Fix: set overrides.vllm_version of {name} to the release in that "
                "image (python -c 'import vllm; print(vllm.__version__)' inside it)."
            )
        return {"image": own_image, "vllm_version": version}
    group_image = _text(image)
    version = own_version or _text(vllm_version) or tag_version(group_image) or ""
    if not version:
        raise ServingError(
            f"vllm_server_vllm_version is empty and vllm_server_image {group_image!r} names no vLLM "
            "release in its tag. Fix: set vllm_server_vllm_version to the release in that image."
        )
    return {"image": group_image, "vllm_version": version}


def release_of(releases: Any, model: str) -> str | None:
    """The vLLM release ``model`` runs, from ``releases``: one release for every model (a version string,
    or None), or model name -> its own (:func:`image_version`'s result or a version string), as
    vllm_server's preflight keeps them: a model with its own ``image`` gets the flags of its own release,
    not its GPU group's."""
    if not isinstance(releases, Mapping):
        return None if releases is None else str(releases)
    found = releases.get(model)
    if isinstance(found, Mapping):
        found = found.get("vllm_version")
    return None if found is None else str(found)
