"""Where each host's vLLM is, for every role that reaches it: one definition.

vllm_server listens on :func:`vllm_address` and records what it deployed in the local fact
``ansible_local.vllm_fleet`` (``models.<name>.current``: url, listen_address, port, image, ...).
The gateway, Prometheus, the bench and the rollout read :func:`endpoints`: the recorded
deployment when there is one, else the same default vllm_server would listen on. None of them
keeps a fallback chain of its own, so setting ``vllm_server_listen_address`` moves them all.

Each function takes one host's variables (``hostvars[host]``: inventory variables, extra vars
and gathered ``ansible_facts``; role defaults are not part of them). Stdlib only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .deploy import ServingError
from .groups import membership
from .mig import serving_units


def _get(mapping: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(mapping, Mapping):
            return None
        mapping = mapping.get(key)
    return mapping


def _text(value: Any) -> str:
    return "" if value is None else str(value).strip()


def host_address(hvars: Mapping[str, Any], host: str = "") -> str:
    """The internal address of a host (exporters, the gateway's own address).

    ``vllm_fleet_internal_address``, else the gathered default IPv4 address, else
    ``ansible_host``, else the inventory name ``host``.
    """
    for value in (
        hvars.get("vllm_fleet_internal_address"),
        _get(hvars, "ansible_facts", "default_ipv4", "address"),
        hvars.get("ansible_host"),
    ):
        if _text(value):
            return _text(value)
    return str(host)


def vllm_address(hvars: Mapping[str, Any]) -> str:
    """The address vLLM of a host listens on when nothing is recorded: the default of
    ``vllm_server_listen_address``.

    ``vllm_server_listen_address`` (inventory or extra vars), else
    ``vllm_fleet_internal_address``, else the gathered default IPv4 address; "" when none is
    known (never ``ansible_host``: that may be an address vLLM does not listen on).
    """
    for value in (
        hvars.get("vllm_server_listen_address"),
        hvars.get("vllm_fleet_internal_address"),
        _get(hvars, "ansible_facts", "default_ipv4", "address"),
    ):
        if _text(value):
            return _text(value)
    return ""


def recorded(hvars: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """Model name -> what vllm_server recorded as running it (``ansible_local.vllm_fleet``)."""
    models = _get(hvars, "ansible_facts", "ansible_local", "vllm_fleet", "models")
    if not isinstance(models, Mapping):
        return {}
    out = {}
    for name, entry in models.items():
        current = _get(entry, "current")
        if isinstance(current, Mapping) and current:
            out[str(name)] = current
    return out


def server(address: str, port: Any) -> str:
    """``address:port`` as nginx and Prometheus name it (a bare IPv6 address in brackets)."""
    if ":" in address and not address.startswith("["):
        address = f"[{address}]"
    return f"{address}:{port}"


def _url(address: str, port: int) -> str:
    return f"http://{server(address, port)}"


def endpoints(hvars: Mapping[str, Any], models: Any = None, host: str = "") -> list[dict[str, Any]]:
    """Each model of a host with where its vLLM is served.

    ``models``: the host's ``vllm_server_models`` when None. Per model ``{name, port,
    address, server, url, image, vllm_version, recorded}`` (``server``: ``address:port``):
    from the recorded deployment of that name when there is one (what runs), else the
    declared port on :func:`vllm_address` (``image``/``vllm_version`` then ""). Entries
    that are not ``{name, port}`` mappings are passed on unchanged for the caller's checks.

    A model served on MIG instances (``mig``) has one entry per instance (``key``
    ``<name>@gpu0-gi2``): its recorded containers, else the ports it will take on the instances
    the host's GPU facts show (the declared port alone when they are not known).
    """
    if models is None:
        models = hvars.get("vllm_server_models")
    if models in (None, ""):
        return []
    member = membership(hvars, host) if host else None
    if member and member[1] > 0:
        return []  # a serving group's followers run workers only: its rank 0 is the replica's endpoint
    if not isinstance(models, list):
        raise ServingError(
            f"{host or 'host'}: vllm_server_models must be a list of {{name, port}}, got {models!r}"
        )
    records = recorded(hvars)
    default_address = vllm_address(hvars)
    out: list[dict[str, Any]] = []
    for model in models:
        if not isinstance(model, Mapping) or not model.get("name") or "port" not in model:
            out.append(model)
            continue
        if model.get("mig") not in (None, "", []):
            out += [_endpoint(unit, records, default_address) for unit in _mig_units(hvars, model, records)]
        else:
            out.append(_endpoint(model, records, default_address))
    if member:
        for entry in out:
            if isinstance(entry, dict) and "server" in entry:
                entry["group"] = member[0].name
    return out


def _mig_units(hvars: Mapping[str, Any], model: Mapping[str, Any], records: Mapping[str, Any]) -> list[Any]:
    """The units of a MIG model: recorded ones, else those the GPU facts give, else the model itself."""
    name = str(model["name"])
    keys = sorted(k for k, r in records.items() if k.startswith(f"{name}@") and _text(r.get("name")) == name)
    if keys:
        return [{**model, "key": key} for key in keys]
    facts = _get(hvars, "ansible_facts", "nvidia_gpu")
    if isinstance(facts, Mapping) and facts.get("gpus"):
        try:
            return serving_units([model], facts)
        except ServingError:
            pass  # the deployment names the problem; until then the declared port stands for the model
    return [{**model, "key": name}]


def _endpoint(model: Mapping[str, Any], records: Mapping[str, Any], default_address: str) -> dict[str, Any]:
    """One endpoint: where the recorded unit of that key listens, else the declared port."""
    entry = {k: v for k, v in model.items() if k not in ("mig_target", "model_index")}
    record = records.get(str(model.get("key") or model["name"]))
    if record and _text(record.get("listen_address")) and _text(record.get("port")):
        address, port = _text(record["listen_address"]), record["port"]
        entry.update(
            address=address,
            port=int(port),
            url=_text(record.get("url")) or _url(address, int(port)),
            image=_text(record.get("image")),
            vllm_version=_text(record.get("vllm_version")),
            recorded=True,
        )
    else:
        try:
            port = int(model["port"])
        except (TypeError, ValueError):
            port = model["port"]
        entry.update(
            address=default_address,
            port=port,
            url=_url(default_address, port) if default_address and isinstance(port, int) else "",
            image="",
            vllm_version="",
            recorded=False,
        )
    entry["server"] = server(entry["address"], entry["port"]) if entry["address"] else ""
    return entry
