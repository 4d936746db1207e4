"""Filters for the monitoring roles: thin shims over module_utils/fleet_monitoring.

fleet_monitoring_vllm_targets(hosts, hostvars, groups, ...)  static_configs for every vLLM /metrics
fleet_monitoring_host_targets(hosts, hostvars, port, ...)    static_configs for a per-host exporter
fleet_monitoring_hosts_without_models(hosts, hostvars)       GPU hosts declaring no models
fleet_monitoring_dcgm_hosts(hosts, hostvars)                GPU hosts that run the DCGM exporter
fleet_monitoring_image_version(image)                        the version label of an image reference
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from ansible.errors import AnsibleFilterError

_MODULE_UTILS = str(Path(__file__).resolve().parent.parent / "module_utils")
if _MODULE_UTILS not in sys.path:
    sys.path.insert(0, _MODULE_UTILS)

from fleet_monitoring import targets  # noqa: E402


def _wrap(name: str, func: Any) -> Any:
    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except targets.TargetError as exc:
            raise AnsibleFilterError(f"{name}: {exc}") from exc

    call.__doc__ = func.__doc__
    return call


class FilterModule:
    """Prometheus scrape targets from the inventory."""

    def filters(self) -> dict[str, Any]:
        return {
            "fleet_monitoring_vllm_targets": _wrap("fleet_monitoring_vllm_targets", targets.vllm_targets),
            "fleet_monitoring_host_targets": _wrap("fleet_monitoring_host_targets", targets.host_targets),
            "fleet_monitoring_hosts_without_models": targets.hosts_without_models,
            "fleet_monitoring_dcgm_hosts": targets.dcgm_hosts,
            "fleet_monitoring_image_version": targets.image_version,
        }
