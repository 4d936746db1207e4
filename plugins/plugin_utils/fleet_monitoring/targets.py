"""Prometheus scrape targets computed from the Ansible inventory.

Each function takes plain data (host names, a host -> variables mapping, the
``groups`` mapping) and returns Prometheus ``static_configs`` entries:
``{"targets": ["address:port"], "labels": {...}}``. No I/O, no Ansible imports. Where a vLLM
listens and what it runs come from ``fleet_serving.fleet`` (the record vllm_server wrote), as for
the gateway.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_serving import fleet, images
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_validate.values import role_value

_RESERVED_GROUPS = frozenset({"all", "ungrouped"})


class TargetError(ValueError):
    """The inventory describes a target that cannot be scraped."""


def host_address(host: str, hostvars: Mapping[str, Any]) -> str:
    """The address Prometheus reaches an exporter of ``host`` at: the fleet's internal address of
    the host (``fleet_serving.fleet.host_address``: ``vllm_fleet_internal_address``, the gathered
    default IPv4 address, ``ansible_host``, the inventory name)."""
    return fleet.host_address(hostvars.get(host) or {}, host)


def _port(value: Any, where: str) -> int:
    try:
        port = int(value)
    except (TypeError, ValueError):
        raise TargetError(f"{where}: port {value!r} is not a number") from None
    if isinstance(value, bool) or not 1 <= port <= 65535:
        raise TargetError(f"{where}: port {value!r} is outside 1-65535")
    return port


def _target(address: str, port: int) -> str:
    if ":" in address and not address.startswith("["):  # a bare IPv6 address
        address = f"[{address}]"
    return f"{address}:{port}"


def image_version(image: str | None) -> str:
    """The deployed version carried by a container image reference.

    ``vllm/vllm-openai:v0.11.0`` -> ``v0.11.0``; ``repo@sha256:abcdef...`` ->
    ``sha256:abcdef012345`` (12 hex digits); no tag -> ``latest``; empty -> ``unknown``.
    """
    if not image:
        return "unknown"
    ref = images.split_image(image)
    if ref.tag:
        return ref.tag
    if ref.digest:
        algo, _unused, hexpart = ref.digest.partition(":")
        return f"{algo}:{hexpart[:12]}"
    return "latest"


def gpu_group(
    host: str,
    hostvars: Mapping[str, Any],
    groups: Mapping[str, Iterable[str]],
    root_group: str,
    group_var: str = "vllm_fleet_gpu_group",
) -> str:
    """The GPU group label of ``host``.

    ``group_var`` set on the host wins. Otherwise the first (by name) of the host's
    groups whose hosts all belong to ``root_group`` (its child groups, one per GPU
    type); otherwise ``root_group`` itself.
    """
    hvars = hostvars.get(host) or {}
    explicit = hvars.get(group_var)
    if explicit:
        return str(explicit)
    root_hosts = set(groups.get(root_group) or [])
    for name in sorted(hvars.get("group_names") or []):
        if name == root_group or name in _RESERVED_GROUPS:
            continue
        members = set(groups.get(name) or [])
        if host in members and members <= root_hosts:
            return str(name)
    return root_group


def vllm_targets(
    hosts: Iterable[str],
    hostvars: Mapping[str, Any],
    groups: Mapping[str, Iterable[str]],
    *,
    root_group: str = "gpu_nodes",
    models_var: str = "vllm_server_models",
    fallback_models: list[Mapping[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """One static_config per (host, model): the vLLM ``/metrics`` endpoints.

    Each model is scraped where vllm_server recorded it listening (``ansible_local.vllm_fleet``),
    else at the default of ``vllm_server_listen_address`` (``fleet_serving.fleet.endpoints``, the
    gateway's routes too). Labels: ``host`` (inventory name), ``model`` (served model name),
    ``gpu_group`` and ``version`` (tag of the recorded image: what runs; ``unknown`` before the
    first deployment). Hosts declaring no models use ``fallback_models``; with none either, they
    are left out (see :func:`hosts_without_models`).
    """
    configs: list[dict[str, Any]] = []
    seen: dict[str, str] = {}
    for host in hosts:
        hvars = hostvars.get(host) or {}
        models = hvars.get(models_var)
        if models in (None, ""):
            models = fallback_models or []
        if not isinstance(models, list):
            raise TargetError(f"{host}: {models_var} must be a list of {{name, port}}, got {models!r}")
        group = gpu_group(host, hostvars, groups, root_group)
        for index, model in enumerate(fleet.endpoints(hvars, models, host)):
            where = f"{host}: {models_var}[{index}]"
            if not isinstance(model, Mapping) or not model.get("name"):
                raise TargetError(f"{where} needs a 'name' (the served model name), got {model!r}")
            if "port" not in model:
                raise TargetError(f"{where} ({model['name']}) needs a 'port'")
            if not model.get("address"):
                raise TargetError(
                    f"{where} ({model['name']}): no address to scrape it at; set vllm_server_listen_address "
                    f"(or vllm_fleet_internal_address) for {host} in the inventory, or gather its facts"
                )
            target = _target(str(model["address"]), _port(model["port"], where))
            if target in seen:
                raise TargetError(
                    f"{where} ({model['name']}) uses {target}, already used by {seen[target]}; "
                    "give each model on a host its own port"
                )
            seen[target] = f"{host} model {model['name']}"
            configs.append(
                {
                    "targets": [target],
                    "labels": {
                        "host": str(host),
                        "model": str(model["name"]),
                        "gpu_group": group,
                        "version": image_version(model.get("image")),
                    },
                }
            )
    return configs


def hosts_without_models(
    hosts: Iterable[str], hostvars: Mapping[str, Any], models_var: str = "vllm_server_models"
) -> list[str]:
    """Hosts whose ``models_var`` is missing or empty."""
    return [h for h in hosts if not (hostvars.get(h) or {}).get(models_var)]


def sleep_controller_targets(
    hosts: Iterable[str], hostvars: Mapping[str, Any], models_var: str = "vllm_server_models"
) -> list[dict[str, Any]]:
    """One static_config per host running vllm_server's sleep controller (a model with ``sleep``): its own
    /metrics (wakes, wake seconds, sleeps per model) at the address its models were recorded listening on
    (else vllm_server_listen_address's default) and vllm_server_sleep_controller_port."""
    configs = []
    for host in hosts:
        hvars = hostvars.get(host) or {}
        models = hvars.get(models_var)
        listed = models if isinstance(models, list) else []
        sleepers = [
            str(m.get("name"))
            for m in listed
            if isinstance(m, Mapping) and m.get("sleep") not in (None, False)
        ]
        if not sleepers:
            continue
        record = fleet.recorded(hvars).get(sleepers[0]) or {}
        address = str(record.get("listen_address") or fleet.vllm_address(hvars))
        if not address:
            raise TargetError(
                f"{host}: no address to scrape its sleep controller at; set vllm_server_listen_address "
                f"(or vllm_fleet_internal_address) for {host} in the inventory, or gather its facts"
            )
        port = _port(role_value(hvars, "vllm_server_sleep_controller_port"), f"{host}: sleep controller")
        configs.append({"targets": [_target(address, port)], "labels": {"host": str(host)}})
    return configs


def _truthy(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() not in ("", "0", "false", "no", "off", "n", "f")
    return bool(value)


def dcgm_hosts(
    hosts: Iterable[str], hostvars: Mapping[str, Any], enabled_var: str = "dcgm_exporter_enabled"
) -> list[str]:
    """GPU hosts that run the DCGM exporter.

    A host is left out when ``enabled_var`` is false on it, or when its gathered
    ``ansible_facts.nvidia_gpu.present`` says it has no GPU (unknown counts as present).
    """
    selected = []
    for host in hosts:
        hvars = hostvars.get(host) or {}
        if not _truthy(hvars.get(enabled_var, True)):
            continue
        facts = hvars.get("ansible_facts") or {}
        gpu = facts.get("nvidia_gpu") if isinstance(facts, Mapping) else None
        if isinstance(gpu, Mapping) and "present" in gpu and not _truthy(gpu["present"]):
            continue
        selected.append(host)
    return selected


def host_targets(
    hosts: Iterable[str],
    hostvars: Mapping[str, Any],
    port: Any,
    *,
    labels: Mapping[str, str] | None = None,
) -> list[dict[str, Any]]:
    """One static_config per host for an exporter listening on ``port``, labelled ``host``."""
    configs = []
    for host in hosts:
        target = _target(host_address(host, hostvars), _port(port, f"{host}: exporter"))
        configs.append({"targets": [target], "labels": {**(labels or {}), "host": str(host)}})
    return configs
