"""The doctor's thresholds: defaults, overridden fleet-wide and per host (``fleet_doctor_*``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

DEFAULT_SETTINGS: dict[str, Any] = {
    "disk_factor": 1.2,
    "ram_factor": 1.5,
    "min_shm_mib": 1024,
    "allow_mig": False,
    "max_clock_skew_s": 5.0,
    "label_prefix": "io.vllm-fleet",
    "container_scope": "all",  # all | labelled
    "model_sizes": {},
}


def host_settings(rec: Mapping[str, Any], settings: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The thresholds for one host record: defaults, then ``settings``, then the record's own ``settings``."""
    return {**DEFAULT_SETTINGS, **(settings or {}), **(rec.get("settings") or {})}
