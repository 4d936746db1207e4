"""Checks across roles: what one role serves, another must fetch; keys, tiers, groups and ports must agree."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from ..fleet_serving.gateway import affinity_problems
from ..fleet_serving.images import tag_version
from ..fleet_serving.lora import ADAPTER_KEYS
from .names import closest
from .problems import Problem, Unresolved, has_unresolved, is_unresolved
from .specs import Catalogue
from .values import REFERENCE

HUB_SOURCES = ("huggingface", "modelscope", "local")
_RATE = re.compile(r"^[1-9][0-9]*r/[sm]$")
_REPO = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")
_REVISION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/-]*$")
_KEY_MIN = 16


class HostView:
    """One host's variables: the inventory's value, else the role default (when it is a plain value)."""

    def __init__(self, host: str, values: Mapping[str, Any], cat: Catalogue) -> None:
        self.host, self.values, self.cat = host, values, cat

    def has(self, name: str) -> bool:
        return name in self.values

    def get(self, name: str, fallback: Any = None) -> Any:
        if name in self.values:
            return self.values[name]
        option = self.cat.options.get(name)
        default = self.cat.defaults.get(name, option.spec.get("default", fallback) if option else fallback)
        if isinstance(default, str) and "{{" in default:
            # a default naming a fleet-wide value (model_weights_root: "{{ vllm_fleet_models_root }}") is it
            found = REFERENCE.match(default.strip())
            if found and found.group(1) != name:
                return self.get(found.group(1), fallback)
            return Unresolved("role default is a template")
        return default


def _entries(value: Any) -> list[Mapping[str, Any]]:
    if not isinstance(value, list):
        return []
    return [item for item in value if isinstance(item, Mapping)]


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def check_backend_key(view: HostView) -> list[Problem]:
    key = view.get("vllm_fleet_api_key", "")
    fix = (
        "set vllm_fleet_api_key in group_vars/all from Vault "
        '(ansible-vault encrypt_string "$(openssl rand -hex 24)" --name vllm_fleet_api_key)'
    )
    if isinstance(key, Unresolved):
        if key.undefined:
            return [
                Problem(
                    "vllm_fleet_api_key",
                    f"refers to {key.undefined}, which is not defined",
                    f"define {key.undefined}, or {fix}",
                    view.host,
                )
            ]
        return []
    if not isinstance(key, str) or len(key) < _KEY_MIN:
        got = (
            "empty"
            if not key
            else f"{len(str(key))} characters"
            if isinstance(key, str)
            else type(key).__name__
        )
        return [
            Problem(
                "vllm_fleet_api_key",
                f"the backend key must be a string of {_KEY_MIN}+ characters (got {got})",
                fix,
                view.host,
            )
        ]
    return []


def check_gateway(view: HostView, known_groups: Sequence[str] = ()) -> list[Problem]:
    problems: list[Problem] = []
    tiers = view.get("gateway_rate_limit_tiers", {})
    tier_names: list[str] = []
    if isinstance(tiers, Mapping):
        tier_names = [str(t) for t in tiers]
        for name, tier in tiers.items():
            var = f"gateway_rate_limit_tiers.{name}"
            if is_unresolved(tier):
                continue
            if not isinstance(tier, Mapping):
                problems.append(
                    Problem(
                        var,
                        f"is {type(tier).__name__}, expected a dict {{rate, burst}}",
                        f"write it as {name}: {{rate: 10r/s, burst: 20}}",
                        view.host,
                    )
                )
                continue
            rate, burst = tier.get("rate"), tier.get("burst")
            if not is_unresolved(rate) and not (isinstance(rate, str) and _RATE.match(rate)):
                problems.append(
                    Problem(
                        f"{var}.rate",
                        f"{rate!r} is not a rate like 10r/s or 600r/m",
                        f"set rate: <N>r/s or <N>r/m in {var}",
                        view.host,
                    )
                )
            if not is_unresolved(burst) and (
                isinstance(burst, bool) or not isinstance(burst, int) or burst < 0
            ):
                problems.append(
                    Problem(
                        f"{var}.burst",
                        f"{burst!r} is not a whole number of requests",
                        f"set burst: <N> (0 or more) in {var}",
                        view.host,
                    )
                )
        if "default" not in tiers:
            problems.append(
                Problem(
                    "gateway_rate_limit_tiers.default",
                    "is missing: keys without a tier use it",
                    "add default: {rate: 10r/s, burst: 20}",
                    view.host,
                )
            )
    backend = view.get("gateway_backend_group")
    if isinstance(backend, str) and backend not in known_groups:
        guess = closest(backend, [g for g in known_groups if g not in ("all", "ungrouped")], 0.6)
        problems.append(
            Problem(
                "gateway_backend_group",
                f"{backend!r} is not a group of the inventory"
                + (f"; did you mean {guess}?" if guess else ""),
                "set it to the group of the serving hosts (gpu_nodes)",
                view.host,
            )
        )
    problems += _check_affinity(view)
    keys = view.get("gateway_client_keys", [])
    if isinstance(keys, list):
        if not keys:
            problems.append(
                Problem(
                    "gateway_client_keys",
                    "is empty: no client could reach the gateway",
                    "add at least one {name, key} (the key from Vault)",
                    view.host,
                )
            )
        names: dict[str, int] = {}
        secrets: dict[str, int] = {}
        for index, entry in enumerate(keys):
            var = f"gateway_client_keys[{index}]"
            if not isinstance(entry, Mapping):
                continue
            name = entry.get("name")
            if isinstance(name, str):
                if name in names:
                    problems.append(
                        Problem(
                            f"{var}.name",
                            f"{name!r} is also gateway_client_keys[{names[name]}].name",
                            "give every client key its own name",
                            view.host,
                        )
                    )
                names.setdefault(name, index)
            key = entry.get("key")
            if isinstance(key, Unresolved):
                if key.undefined:
                    problems.append(
                        Problem(
                            f"{var}.key",
                            f"refers to {key.undefined}, which is not defined",
                            f"define {key.undefined} (from Vault), or remove this client",
                            view.host,
                        )
                    )
            elif "key" in entry:
                if not isinstance(key, str) or len(key) < _KEY_MIN or any(c.isspace() for c in key):
                    problems.append(
                        Problem(
                            f"{var}.key",
                            f"the client key must be {_KEY_MIN}+ characters without spaces",
                            f"set a new key for {name or 'this client'} from Vault (openssl rand -hex 24)",
                            view.host,
                        )
                    )
                elif key in secrets:
                    problems.append(
                        Problem(
                            f"{var}.key",
                            f"is the same key as gateway_client_keys[{secrets[key]}].key",
                            "give every client its own key",
                            view.host,
                        )
                    )
                else:
                    secrets[key] = index
            tier = entry.get("tier")
            if isinstance(tier, str) and tier_names and tier not in tier_names:
                guess = closest(tier, tier_names, 0.6)
                problems.append(
                    Problem(
                        f"{var}.tier",
                        f"{tier!r} is not a tier of gateway_rate_limit_tiers"
                        + (f"; did you mean {guess}?" if guess else ""),
                        f"use one of {', '.join(tier_names)}, or add {tier} to gateway_rate_limit_tiers",
                        view.host,
                    )
                )
    return problems


def _check_affinity(view: HostView) -> list[Problem]:
    """gateway_affinity and each gateway_affinity_models entry, by the rules the gateway role applies."""
    found: list[tuple[str, str, str]] = []
    default = view.get("gateway_affinity", {})
    if not has_unresolved(default):
        found += affinity_problems(default, "gateway_affinity")
    models = view.get("gateway_affinity_models", {})
    if isinstance(models, Mapping):
        for name, policy in models.items():
            if not has_unresolved(policy):
                found += affinity_problems(policy, f"gateway_affinity_models[{name!r}]")
    return [Problem(var, what, fix, view.host) for var, what, fix in found]


def served_names(views: Sequence[HostView]) -> set[str] | None:
    """Every model and adapter name the given hosts serve, or None when some cannot be read here."""
    names: set[str] = set()
    for view in views:
        served = view.get("vllm_server_models", [])
        if not isinstance(served, list):
            return None
        for entry in _entries(served):
            # only the names matter: a path read from a file the deployment writes does not
            found = [entry.get("name")] + [a.get("name") for a in _entries(entry.get("adapters"))]
            if has_unresolved(found) or is_unresolved(entry.get("adapters")):
                return None
            names |= {n for n in found if isinstance(n, str)}
    return names


def check_affinity_models(view: HostView, served: set[str] | None, backend: str) -> list[Problem]:
    """A gateway_affinity_models entry for a model no backend host serves: the policy would never apply."""
    models = view.get("gateway_affinity_models", {})
    if served is None or not isinstance(models, Mapping):
        return []
    problems = []
    for name in models:
        if str(name) in served:
            continue
        guess = closest(str(name), sorted(served), 0.6)
        problems.append(
            Problem(
                f"gateway_affinity_models[{name!r}]",
                f"{name!r} is not a model or adapter that a host of {backend} serves"
                + (f"; did you mean {guess}?" if guess else ""),
                f"key it by a served name ({', '.join(sorted(served)) or 'none is served'}), or drop it",
                view.host,
            )
        )
    return problems


def check_weights(view: HostView) -> list[Problem]:
    problems: list[Problem] = []
    root = view.get("model_weights_root")
    if isinstance(root, str) and not root.startswith("/"):
        problems.append(
            Problem(
                "model_weights_root",
                f"{root!r} is not an absolute path",
                "set it to the shared storage path, e.g. /srv/models",
                view.host,
            )
        )
    models = view.get("model_weights_models", [])
    seen: dict[str, int] = {}
    for index, entry in enumerate(models if isinstance(models, list) else []):
        var = f"model_weights_models[{index}]"
        if not isinstance(entry, Mapping):
            problems.append(
                Problem(
                    var,
                    f"is {type(entry).__name__}, expected a dict",
                    "write each model as {name, source, repo_id, revision}",
                    view.host,
                )
            )
            continue
        name = entry.get("name")
        if not isinstance(name, str) or not name:
            problems.append(
                Problem(f"{var}.name", "is missing", f"give {var} a name (letters, digits, . _ -)", view.host)
            )
        elif name in seen:
            problems.append(
                Problem(
                    f"{var}.name",
                    f"{name!r} is also model_weights_models[{seen[name]}].name",
                    "give every model its own name",
                    view.host,
                )
            )
        else:
            seen[name] = index
        source = entry.get("source", "huggingface")
        if is_unresolved(source):
            continue
        if source not in HUB_SOURCES:
            guess = closest(str(source), HUB_SOURCES, 0.6)
            problems.append(
                Problem(
                    f"{var}.source",
                    f"{source!r} is not a hub" + (f"; did you mean {guess}?" if guess else ""),
                    f"use one of {', '.join(HUB_SOURCES)}",
                    view.host,
                )
            )
            continue
        if source == "local":
            path = entry.get("path")
            if not is_unresolved(path) and not (isinstance(path, str) and path.startswith("/")):
                problems.append(
                    Problem(
                        f"{var}.path",
                        "a local model needs an absolute path on the writer host",
                        f"set path: /abs/folder in {var}",
                        view.host,
                    )
                )
            continue
        repo = entry.get("repo_id")
        if not is_unresolved(repo) and not (isinstance(repo, str) and _REPO.match(repo)):
            problems.append(
                Problem(
                    f"{var}.repo_id",
                    f"{repo!r} is not ORG/NAME",
                    f"set repo_id: ORG/NAME in {var}, as on the hub",
                    view.host,
                )
            )
        if entry.get("revision") in (None, ""):
            problems.append(
                Problem(
                    f"{var}.revision",
                    "is empty: the hub would quietly serve its default branch",
                    f"pin revision in {var} to a commit id (or a tag or branch to resolve and record)",
                    view.host,
                )
            )
        else:
            revision = entry.get("revision")
            if not is_unresolved(revision) and not (isinstance(revision, str) and _REVISION.match(revision)):
                problems.append(
                    Problem(
                        f"{var}.revision",
                        f"{revision!r} is not a revision (a commit id, tag or branch)",
                        f'quote it as a string: revision: "{revision}"'
                        if not isinstance(revision, str)
                        else f"set a commit id, tag or branch in {var}",
                        view.host,
                    )
                )
    return problems


def check_served(view: HostView) -> list[Problem]:
    problems: list[Problem] = []
    served = view.get("vllm_server_models", [])
    declared = {
        e.get("name"): e
        for e in _entries(view.get("model_weights_models", []))
        if isinstance(e.get("name"), str)
    }
    names: dict[str, int] = {}
    for index, entry in enumerate(_entries(served)):
        var = f"vllm_server_models[{index}]"
        problems += _check_adapters(view, var, entry, declared)
        name = entry.get("name")
        if not isinstance(name, str):
            continue
        if name in names:
            problems.append(
                Problem(
                    f"{var}.name",
                    f"{name!r} is also vllm_server_models[{names[name]}].name on {view.host}",
                    "give every model of a host its own name",
                    view.host,
                )
            )
        names.setdefault(name, index)
        if name not in declared:
            guess = closest(name, [str(n) for n in declared], 0.6)
            problems.append(
                Problem(
                    f"{var}.name",
                    f"{name!r} is served but not declared in model_weights_models, so nothing fetches it"
                    + (f"; did you mean {guess}?" if guess else ""),
                    f"add {{name: {name}, source, repo_id, revision}} to model_weights_models "
                    "(group_vars/all)",
                    view.host,
                )
            )
            continue
        want, have = entry.get("revision"), declared[name].get("revision")
        if isinstance(want, str) and isinstance(have, str) and want and have and want != have:
            problems.append(
                Problem(
                    f"{var}.revision",
                    f"{want!r} differs from model_weights_models {name} revision {have!r}",
                    f"serve the revision the weights stage fetches ({have})",
                    view.host,
                )
            )
    return problems


def _check_adapters(
    view: HostView, var: str, entry: Mapping[str, Any], declared: Mapping[Any, Mapping[str, Any]]
) -> list[Problem]:
    """Each LoRA adapter fetched from a hub is declared in model_weights_models under its name, with the
    same repository and revision, so the weights stage fetches and verifies it like any weights."""
    problems: list[Problem] = []
    for index, adapter in enumerate(_entries(entry.get("adapters", []))):
        where = f"{var}.adapters[{index}]"
        name, repo, revision = adapter.get("name"), adapter.get("repo"), adapter.get("revision")
        if not isinstance(name, str) or adapter.get("path") or set(adapter) - set(ADAPTER_KEYS):
            continue  # argument_specs reports a missing name or misspelt key; a path is not fetched
        if not isinstance(repo, str) or not isinstance(revision, str) or not repo or not revision:
            problems.append(
                Problem(
                    where,
                    f"adapter {name!r} has no repo and revision (nor a path)",
                    f"add repo: ORG/NAME and a pinned revision to {where}",
                    view.host,
                )
            )
            continue
        weights = declared.get(name)
        if weights is None:
            guess = closest(name, [str(n) for n in declared], 0.6)
            problems.append(
                Problem(
                    f"{where}.name",
                    f"adapter {name!r} is served but not declared in model_weights_models, "
                    "so nothing fetches it" + (f"; did you mean {guess}?" if guess else ""),
                    f"add {{name: {name}, source: huggingface, repo_id: {repo}, revision: {revision}}} "
                    "to model_weights_models (group_vars/all)",
                    view.host,
                )
            )
            continue
        for key, theirs in (("repo", "repo_id"), ("revision", "revision")):
            have = weights.get(theirs)
            if isinstance(have, str) and have and have != adapter.get(key):
                problems.append(
                    Problem(
                        f"{where}.{key}",
                        f"{adapter.get(key)!r} differs from model_weights_models {name} {theirs} {have!r}",
                        f"serve what the weights stage fetches ({theirs} {have})",
                        view.host,
                    )
                )
    return problems


def check_image_version(view: HostView) -> list[Problem]:
    """The planner sizes memory for vllm_server_vllm_version, the host runs vllm_server_image: a tag
    naming another release means plans (and flags) made for a vLLM the host does not run."""
    # the fleet's image and version stand in only for the role defaults (templates naming them): a value the
    # inventory sets but that cannot be rendered here is its own problem, not the fleet's image
    image = view.get("vllm_server_image")
    if isinstance(image, Unresolved) and not view.has("vllm_server_image"):
        image = view.get("vllm_fleet_vllm_image")
    version = view.get("vllm_server_vllm_version")
    if isinstance(version, Unresolved) and not view.has("vllm_server_vllm_version"):
        version = view.get("vllm_fleet_vllm_version")
    problems = check_model_images(view)
    if not isinstance(image, str) or not isinstance(version, str):
        return problems
    tagged = tag_version(image)
    if tagged is None or tagged == version.strip().lstrip("v"):
        return problems
    return [
        Problem(
            "vllm_server_vllm_version",
            f"{version!r}, but vllm_server_image {image} is tagged {tagged}: the planner would size "
            "memory and choose flags for a vLLM the host does not run",
            f'set vllm_server_vllm_version: "{tagged}" beside vllm_server_image in this GPU group\'s '
            f"group_vars (or an image of vLLM {version})",
            view.host,
        ),
        *problems,
    ]


def check_model_images(view: HostView) -> list[Problem]:
    """A model with its own image is planned, flagged and recorded for the release in that image
    (fleet_serving/images.py): its tag, else its overrides.vllm_version, which must then agree."""
    problems: list[Problem] = []
    for index, entry in enumerate(_entries(view.get("vllm_server_models", []))):
        own = entry.get("image")
        if not isinstance(own, str) or not own.strip():
            continue
        where = f"vllm_server_models[{entry.get('name', index)}]"
        overrides = entry.get("overrides")
        declared = overrides.get("vllm_version") if isinstance(overrides, Mapping) else None
        tagged = tag_version(own)
        if declared in (None, "") and tagged is None:
            problems.append(
                Problem(
                    f"{where}.image",
                    f"{own!r} names no vLLM release in its tag, and the model sets no "
                    "overrides.vllm_version: its plan and flags would be made for a vLLM it may not run "
                    "(serve refuses it)",
                    f"set {where}.overrides.vllm_version to the release in that image",
                    view.host,
                )
            )
        elif (
            declared not in (None, "") and tagged is not None and tagged != str(declared).strip().lstrip("v")
        ):
            problems.append(
                Problem(
                    f"{where}.overrides.vllm_version",
                    f"{declared!r}, but the model's image {own} is tagged {tagged}: the planner would size "
                    "memory and choose flags for a vLLM the container does not run",
                    f'set {where}.overrides.vllm_version: "{tagged}" (or an image of vLLM {declared})',
                    view.host,
                )
            )
    return problems


def check_ports(view: HostView, groups_of_host: Sequence[str]) -> list[Problem]:
    """Ports that two services of this host would both listen on."""
    used: list[tuple[int, str]] = []

    def add(port: Any, label: str) -> None:
        if isinstance(port, int) and not isinstance(port, bool) and port > 0:
            used.append((port, label))

    def add_address(name: str) -> None:
        listen = view.get(name)
        if isinstance(listen, str) and listen.rsplit(":", 1)[-1].isdigit():
            add(int(listen.rsplit(":", 1)[-1]), name)

    add_address("node_exporter_listen_address")
    if "gpu_nodes" in groups_of_host:
        for index, entry in enumerate(_entries(view.get("vllm_server_models", []))):
            add(entry.get("port"), f"vllm_server_models[{index}].port ({entry.get('name')})")
        if view.get("dcgm_exporter_enabled", True) is True:
            add(view.get("dcgm_exporter_port"), "dcgm_exporter_port")
    if "gateways" in groups_of_host:
        add(view.get("gateway_http_port"), "gateway_http_port")
        if view.get("gateway_tls_enabled") is True:
            add(view.get("gateway_https_port"), "gateway_https_port")
        add(view.get("nginx_exporter_stub_status_port"), "nginx_exporter_stub_status_port")
        add_address("nginx_exporter_listen_address")
        add(view.get("nginx_exporter_mtail_port"), "nginx_exporter_mtail_port")
    if "monitoring" in groups_of_host:
        add(view.get("monitoring_prometheus_port"), "monitoring_prometheus_port")
    if "grafana" in groups_of_host:
        add(view.get("grafana_http_port"), "grafana_http_port")
    problems = []
    first: dict[int, str] = {}
    for port, label in used:
        if port in first:
            variable = label.split(" ", 1)[0]
            problems.append(
                Problem(
                    variable,
                    f"port {port} on {view.host} is also {first[port]}",
                    f"give {label} a port no other service of {view.host} uses",
                    view.host,
                )
            )
        else:
            first[port] = label
    return problems


def check_groups(
    groups: Mapping[str, Sequence[str]],
    children: Mapping[str, Sequence[str]],
    plan_models: Any,
    host: str = "",
) -> list[Problem]:
    problems = []
    gpu_hosts = set(groups.get("gpu_nodes") or [])
    if not gpu_hosts:
        problems.append(
            Problem(
                "gpu_nodes",
                "the inventory has no hosts in the group gpu_nodes",
                "put every GPU host in a child group of gpu_nodes (one per GPU type), "
                "as in inventories/example/hosts.yml",
            )
        )
    for child in sorted(_descendants("gpu_nodes", children)):
        if not groups.get(child):
            problems.append(
                Problem(
                    child,
                    "is a GPU group (a child of gpu_nodes) without hosts",
                    f"add its hosts to {child}, or remove the group",
                )
            )
    for index, entry in enumerate(_entries(plan_models)):
        group = entry.get("group")
        if not isinstance(group, str):
            continue
        var = f"fleet_plan_models[{index}].group"
        if group not in groups:
            guess = closest(group, [g for g in groups if g not in ("all", "ungrouped")], 0.6)
            problems.append(
                Problem(
                    var,
                    f"{group!r} is not a group of the inventory"
                    + (f"; did you mean {guess}?" if guess else ""),
                    "name a child group of gpu_nodes",
                    host,
                )
            )
        elif not groups[group]:
            problems.append(
                Problem(var, f"{group!r} has no hosts", f"add hosts to {group}, or drop this entry", host)
            )
        elif not set(groups[group]) <= gpu_hosts:
            problems.append(
                Problem(
                    var, f"{group!r} has hosts outside gpu_nodes", "name a child group of gpu_nodes", host
                )
            )
    return problems


def _descendants(group: str, children: Mapping[str, Sequence[str]]) -> set[str]:
    out: set[str] = set()
    todo = list(children.get(group) or [])
    while todo:
        name = todo.pop()
        if name not in out:
            out.add(name)
            todo += list(children.get(name) or [])
    return out
