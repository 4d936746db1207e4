"""The running vLLM containers a host record owns (the probe lists every container of the engine)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def vllm_containers(rec: Mapping[str, Any], settings: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The running vLLM containers of this host (``container_scope``: ``all`` or only ``labelled``)."""
    prefix = settings["label_prefix"]
    out = []
    for container in (rec.get("probe") or {}).get("containers") or []:
        if not container.get("vllm") or not container.get("running"):
            continue
        labels = container.get("labels") or {}
        owner = labels.get(prefix + ".host")
        if owner is not None and owner != rec["host"]:
            continue  # another host's container on a shared engine
        if owner is None and settings["container_scope"] == "labelled":
            continue
        out.append(container)
    return out
