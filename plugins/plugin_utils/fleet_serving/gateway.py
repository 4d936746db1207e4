"""Gateway data: model routes over the serving hosts, client keys, rate-limit tiers."""

from __future__ import annotations

import hashlib
import ipaddress
import re
from collections.abc import Iterable, Mapping
from typing import Any

from .deploy import ServingError

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}$")
_RATE = re.compile(r"^[1-9]\d*r/[sm]$")
_MODEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,199}$")
_MIN_KEY_LENGTH = 16


def upstream_name(model: str) -> str:
    """An nginx-safe, collision-free upstream name for a served model name."""
    safe = re.sub(r"[^A-Za-z0-9]+", "_", model).strip("_").lower()[:40] or "model"
    return f"vf_{safe}_{hashlib.sha256(model.encode()).hexdigest()[:8]}"


def _port(value: Any, where: str) -> int:
    try:
        port = int(value)
    except (TypeError, ValueError):
        raise ServingError(f"{where}: port {value!r} is not a number") from None
    if isinstance(value, bool) or not 1 <= port <= 65535:
        raise ServingError(f"{where}: port {value!r} is outside 1-65535")
    return port


def _server_address(address: str, port: int) -> str:
    try:
        if ipaddress.ip_address(address).version == 6:
            return f"[{address}]:{port}"
    except ValueError:
        pass
    return f"{address}:{port}"


def routes(backends: Iterable[Mapping[str, Any]], drained: Iterable[str] = ()) -> list[dict[str, Any]]:
    """One route per served model and LoRA adapter: the upstream and its servers across every host
    serving it (an adapter's route, with its ``parent`` model, goes to the servers of its base model).

    ``backends``: ``{host, address, models: [{name, port, address}]}`` per serving host (the
    models as the ``vllm_serving_endpoints`` filter gives them: a model's own ``address``, where
    vllm_server recorded it listening, wins over the host's).
    Servers of hosts in ``drained`` are marked ``down`` (nginx stops sending them new
    requests; requests in flight finish). Sorted by model, then host: the rendered
    configuration is stable.
    """
    drained_set = {str(h) for h in drained}
    by_model: dict[str, list[dict[str, Any]]] = {}
    kinds: dict[str, str] = {}  # routed name -> its base model ("" for a model)
    seen_targets: dict[str, str] = {}
    for backend in backends:
        host = str(backend.get("host") or "")
        host_address = str(backend.get("address") or "")
        models = backend.get("models") or []
        if not models:
            continue
        if not isinstance(models, list):
            raise ServingError(f"{host}: vllm_server_models must be a list of {{name, port}}, got {models!r}")
        for index, model in enumerate(models):
            where = f"{host}: vllm_server_models[{index}]"
            if not isinstance(model, Mapping) or not model.get("name"):
                raise ServingError(f"{where} needs a 'name' (the served model name)")
            if "port" not in model:
                raise ServingError(f"{where} ({model['name']}) needs a 'port'")
            address = str(model.get("address") or host_address)
            if not address:
                raise ServingError(
                    f"{host}: no address to reach it; set vllm_server_listen_address (or "
                    f"vllm_fleet_internal_address) for {host} in the inventory "
                    "or gather its facts (the gateway play does, unless it is --limit'ed away)"
                )
            if not _MODEL.match(str(model["name"])):
                raise ServingError(
                    f"{where}: model name {model['name']!r} must start with a letter or digit "
                    "and contain only letters, digits and . _ : / @ + - "
                    "(it is matched in the gateway's configuration)"
                )
            port = _port(model["port"], where)
            target = _server_address(address, port)
            if target in seen_targets:
                raise ServingError(
                    f"{where} ({model['name']}) uses {target}, already used by {seen_targets[target]}; "
                    "give each model on a host its own port"
                )
            seen_targets[target] = f"{host} model {model['name']}"
            server_entry = {"host": host, "server": target, "down": host in drained_set}
            _claim(kinds, str(model["name"]), "", where)
            by_model.setdefault(str(model["name"]), []).append(server_entry)
            # LoRA adapters are served by their base model's vLLM: routed to the same servers
            for adapter in model.get("adapters") or []:
                name = str(adapter.get("name") if isinstance(adapter, Mapping) else adapter or "")
                if not _MODEL.match(name):
                    raise ServingError(
                        f"{where}: adapter name {name!r} must start with a letter or digit "
                        "and contain only letters, digits and . _ : / @ + -"
                    )
                _claim(kinds, name, str(model["name"]), where)
                by_model.setdefault(name, []).append(dict(server_entry))
    result = []
    for model in sorted(by_model):
        servers = sorted(by_model[model], key=lambda s: (s["host"], s["server"]))
        route = {
            "model": model,
            "upstream": upstream_name(model),
            "servers": servers,
            "available": sum(1 for s in servers if not s["down"]),
        }
        if kinds.get(model):
            route["parent"] = kinds[model]
        result.append(route)
    return result


def models_list(routes_: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The body of the gateway's ``GET /v1/models``: every routed model, an adapter with its ``parent``
    (as vLLM lists its LoRA adapters)."""
    data = []
    for route in routes_:
        entry: dict[str, Any] = {"id": route["model"], "object": "model", "owned_by": "vllm-fleet"}
        if route.get("parent"):
            entry["parent"] = route["parent"]
        data.append(entry)
    return {"object": "list", "data": data}


def _claim(kinds: dict[str, str], name: str, parent: str, where: str) -> None:
    """One meaning per routed name: a model everywhere, or an adapter of one base model everywhere."""
    if name in kinds and kinds[name] != parent:
        was = f"an adapter of {kinds[name]}" if kinds[name] else "a served model"
        now = f"an adapter of {parent}" if parent else "a served model"
        raise ServingError(
            f"{where}: {name!r} is {now} here but {was} elsewhere; "
            "give each adapter a name no served model or other base model's adapter uses"
        )
    kinds[name] = parent


def replicas_left(
    models_by_host: Mapping[str, Any], drained: Iterable[str], host: str, minimum: int
) -> list[dict[str, Any]]:
    """Models of ``host`` that would have fewer than ``minimum`` serving hosts once ``host`` is drained.

    ``models_by_host``: inventory name -> its ``vllm_server_models``; ``drained``: hosts already
    drained. Returns ``[{model, available}]`` (empty when draining is safe).
    """
    out_of_service = {str(h) for h in drained} | {str(host)}
    mine = [str(m.get("name")) for m in models_by_host.get(host) or [] if isinstance(m, Mapping)]
    short = []
    for model in sorted(set(mine)):
        available = sum(
            1
            for other, models in models_by_host.items()
            if str(other) not in out_of_service
            and any(isinstance(m, Mapping) and str(m.get("name")) == model for m in models or [])
        )
        if available < int(minimum):
            short.append({"model": model, "available": available})
    return short


def key_sha256(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def clients(keys: Iterable[Mapping[str, Any]], tiers: Mapping[str, Any]) -> list[dict[str, str]]:
    """Client keys as ``{name, sha256, tier}``: the gateway stores and compares hashes only.

    Raises :class:`ServingError` (naming ``gateway_client_keys``) on a missing or unsafe
    name, a key shorter than 16 characters, a duplicate name or key, or an unknown tier.
    """
    out: list[dict[str, str]] = []
    names: set[str] = set()
    hashes: dict[str, str] = {}
    for index, item in enumerate(keys or []):
        if not isinstance(item, Mapping):
            raise ServingError(f"gateway_client_keys[{index}] must be a mapping {{name, key, tier}}")
        name = str(item.get("name") or "")
        if not _NAME.match(name):
            raise ServingError(
                f"gateway_client_keys[{index}].name {name!r} must be 1-64 characters of letters, digits, "
                "'_', '.', "
                "'-' or '@' (it appears in logs and rate-limit keys)"
            )
        key = item.get("key")
        if not isinstance(key, str) or len(key) < _MIN_KEY_LENGTH or any(c.isspace() for c in key):
            raise ServingError(
                f"gateway_client_keys[{index}] ({name}): the key must be a string of at least "
                f"{_MIN_KEY_LENGTH} characters without spaces "
                "(generate one with `openssl rand -hex 24`, store it in Vault)"
            )
        tier = str(item.get("tier") or "default")
        if tier not in tiers:
            raise ServingError(
                f"gateway_client_keys[{index}] ({name}): tier {tier!r} is not in gateway_rate_limit_tiers "
                f"({', '.join(sorted(tiers)) or 'none defined'})"
            )
        if name in names:
            raise ServingError(f"gateway_client_keys: the name {name!r} is used twice; names must be unique")
        digest = key_sha256(key)
        if digest in hashes:
            raise ServingError(
                f"gateway_client_keys: {hashes[digest]} and {name} have the same key; give each its own"
            )
        names.add(name)
        hashes[digest] = name
        out.append({"name": name, "sha256": digest, "tier": tier})
    if not out:
        raise ServingError("gateway_client_keys is empty: add at least one {name, key} (keys from Vault)")
    return sorted(out, key=lambda c: c["name"])


def rate_tiers(tiers: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Rate-limit tiers as ``{name, zone, rate, burst}`` (one nginx ``limit_req_zone`` each)."""
    out = []
    if not isinstance(tiers, Mapping) or not tiers:
        raise ServingError(
            "gateway_rate_limit_tiers must map tier names to {rate, burst}, e.g. default: {rate: 10r/s}"
        )
    for name in sorted(tiers):
        spec = tiers[name]
        if not re.fullmatch(r"[a-z][a-z0-9_]{0,31}", str(name)):
            raise ServingError(f"gateway_rate_limit_tiers: tier name {name!r} must match [a-z][a-z0-9_]*")
        if not isinstance(spec, Mapping) or not _RATE.match(str(spec.get("rate", ""))):
            raise ServingError(
                f"gateway_rate_limit_tiers.{name}.rate must look like 10r/s or 600r/m, got {spec!r}"
            )
        burst = spec.get("burst", 0)
        if isinstance(burst, bool) or not isinstance(burst, int) or burst < 0:
            raise ServingError(
                f"gateway_rate_limit_tiers.{name}.burst must be a whole number >= 0, got {burst!r}"
            )
        out.append({"name": str(name), "zone": f"vf_tier_{name}", "rate": str(spec["rate"]), "burst": burst})
    return out


AFFINITY_KEYS = ("none", "header", "user", "prompt_prefix")
AFFINITY_DEFAULT: dict[str, Any] = {"key": "none", "header": "X-Session-Id", "prompt_prefix_chars": 1024}
_HEADER = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]{0,63}$")
_PREFIX_CHARS = (16, 65536)


def affinity_problems(policy: Any, var: str) -> list[tuple[str, str, str]]:
    """What is wrong with one cache-affinity policy, as ``(variable, what, fix)``; empty when it is valid.

    ``policy``: ``{key, header, prompt_prefix_chars}`` (any of them; missing ones keep their default).
    """
    if not isinstance(policy, Mapping):
        return [
            (
                var,
                f"is {type(policy).__name__}, expected a dict {{key, header, prompt_prefix_chars}}",
                f"write it as {var}: {{key: header, header: X-Session-Id}}",
            )
        ]
    problems = []
    unknown = sorted(set(map(str, policy)) - set(AFFINITY_DEFAULT))
    if unknown:
        problems.append(
            (
                f"{var}.{unknown[0]}",
                "is not a setting of cache affinity",
                "use key, header and prompt_prefix_chars only",
            )
        )
    key = policy.get("key", AFFINITY_DEFAULT["key"])
    if key not in AFFINITY_KEYS:
        problems.append(
            (
                f"{var}.key",
                f"{key!r} is not a session key",
                f"use one of {', '.join(AFFINITY_KEYS)} (none: least connections)",
            )
        )
    header = policy.get("header", AFFINITY_DEFAULT["header"])
    if not isinstance(header, str) or not _HEADER.match(header):
        problems.append(
            (
                f"{var}.header",
                f"{header!r} is not an HTTP header name",
                "use letters, digits and '-', e.g. X-Session-Id",
            )
        )
    chars = policy.get("prompt_prefix_chars", AFFINITY_DEFAULT["prompt_prefix_chars"])
    low, high = _PREFIX_CHARS
    if isinstance(chars, bool) or not isinstance(chars, int) or not low <= chars <= high:
        problems.append(
            (
                f"{var}.prompt_prefix_chars",
                f"{chars!r} is not a whole number of characters in {low}-{high}",
                "set it below the length of a conversation's first turn, e.g. 1024",
            )
        )
    return problems


def affinity_routes(
    routes_: Iterable[Mapping[str, Any]], default: Mapping[str, Any], models: Mapping[str, Any] | None = None
) -> list[dict[str, Any]]:
    """The routes that hash a session key to a replica, each ``{model, upstream, affinity_upstream,
    key, header, prompt_prefix_chars, servers}``.

    ``default`` (``gateway_affinity``) applies to every model; ``models``
    (``gateway_affinity_models``) overrides it per served model name. Raises
    :class:`ServingError` naming the variable on a bad policy or a model no host serves.
    """
    by_model = {str(r["model"]): r for r in routes_}
    problems = affinity_problems(default, "gateway_affinity")
    models = {} if models is None else models
    if not isinstance(models, Mapping):
        problems.append(
            (
                "gateway_affinity_models",
                f"is {type(models).__name__}, expected a dict",
                "map served model names to {key, header, prompt_prefix_chars}",
            )
        )
        models = {}
    for name, policy in models.items():
        var = f"gateway_affinity_models[{name!r}]"
        if str(name) not in by_model:
            problems.append(
                (
                    var,
                    "is not a model any host of the backend group serves",
                    f"use one of {', '.join(sorted(by_model)) or 'the served model names'}",
                )
            )
        problems += affinity_problems(policy, var)
    if problems:
        var, what, fix = problems[0]
        raise ServingError(f"{var}: {what}. Fix: {fix}")
    out = []
    for model, route in sorted(by_model.items()):
        policy = {**AFFINITY_DEFAULT, **default, **(models.get(model) or {})}
        if policy["key"] == "none":
            continue
        out.append(
            {
                "model": model,
                "upstream": route["upstream"],
                "affinity_upstream": f"{route['upstream']}_affinity",
                "key": policy["key"],
                "header": policy["header"],
                "prompt_prefix_chars": policy["prompt_prefix_chars"],
                "servers": route["servers"],
            }
        )
    return out
