"""What one GPU host serves, checked as the serve stage would refuse it: adapter names, the base model an
adapter was trained for, flags in extra_args that the planner or the role own, GPU indexes the host has."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from typing import Any

from ..fleet_serving import kv_offload as offload
from ..fleet_serving import sleep
from ..fleet_serving.deploy import FEATURE_FLAGS, PLANNER_FLAGS, ROLE_FLAGS, ServingError, split_flags
from ..fleet_serving.groups import GROUP_FLAGS
from ..fleet_serving.groups import VAR as SERVING_GROUPS
from ..fleet_serving.model_features import model_features
from .cross import HostView, _entries
from .gpus import HostGpus
from .problems import Problem, Unresolved, has_unresolved, is_unresolved

Reader = Callable[[str], "str | None"]


def read_local(path: str) -> str | None:
    """A file on the control node, or None where it is not here (only the host has it: not judged)."""
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except (OSError, UnicodeDecodeError):
        return None


def check_models(view: HostView, gpus: HostGpus | None, read: Reader = read_local) -> list[Problem]:
    served = view.get("vllm_server_models", [])
    if not isinstance(served, list):
        return []
    problems = _adapter_names(view, served)
    problems += _adapter_bases(view, served, read)
    for index, entry in enumerate(served):
        if isinstance(entry, Mapping):
            problems += _extra_args(view, f"vllm_server_models[{index}]", entry)
            problems += _parsers(view, f"vllm_server_models[{index}]", entry)
            problems += _tiers(view, f"vllm_server_models[{index}]", entry)
            problems += _gpu_indexes(view, f"vllm_server_models[{index}]", entry, gpus)
    return problems


def _adapter_names(view: HostView, served: list[Any]) -> list[Problem]:
    """Clients name an adapter as the request's model: it must be unique across the host's models and
    adapters (serve refuses it otherwise, after the hosts stage)."""
    owner: dict[str, str] = {}
    for index, entry in enumerate(_entries(served)):
        name = entry.get("name")
        if isinstance(name, str):
            owner.setdefault(name, f"the served model vllm_server_models[{index}]")
    problems: list[Problem] = []
    for index, entry in enumerate(_entries(served)):
        base = entry.get("name")
        for a_index, adapter in enumerate(_entries(entry.get("adapters"))):
            name = adapter.get("name")
            if not isinstance(name, str) or not name:
                continue
            var = f"vllm_server_models[{index}].adapters[{a_index}].name"
            if name == base:
                problems.append(
                    Problem(
                        var,
                        f"adapter {name!r} has the name of its base model: a request for {name} could not "
                        "tell the two apart",
                        f"give the adapter a name of its own (e.g. {name}-lora)",
                        view.host,
                    )
                )
            elif name in owner:
                problems.append(
                    Problem(
                        var,
                        f"adapter {name!r} is also {owner[name]}",
                        "give every served model and adapter of a host its own name",
                        view.host,
                    )
                )
            owner.setdefault(name, f"vllm_server_models[{index}].adapters[{a_index}].name")
    return problems


def _adapter_bases(view: HostView, served: list[Any], read: Reader) -> list[Problem]:
    """An adapter trained for another base model loads and serves garbage (or fails at load). Judged where
    both are known here: the adapter's adapter_config.json is on the control node and the base model's
    hub repository is declared in model_weights_models."""
    repos = {
        e.get("name"): e.get("repo_id")
        for e in _entries(view.get("model_weights_models", []))
        if e.get("source", "huggingface") != "local" and isinstance(e.get("repo_id"), str)
    }
    root = view.get("vllm_server_adapters_root")
    if not isinstance(root, str):
        root = view.get("model_weights_root")
    problems: list[Problem] = []
    for index, entry in enumerate(_entries(served)):
        repo = repos.get(entry.get("name"))
        if not isinstance(repo, str):
            continue
        for a_index, adapter in enumerate(_entries(entry.get("adapters"))):
            if has_unresolved(adapter):
                continue
            folder = _adapter_folder(adapter, root)
            text = read(os.path.join(folder, "adapter_config.json")) if folder else None
            trained = _base_of(text)
            if trained is None or _same_repo(trained, repo):
                continue
            problems.append(
                Problem(
                    f"vllm_server_models[{index}].adapters[{a_index}]",
                    f"adapter {adapter.get('name')!r} was trained for {trained} (base_model_name_or_path in "
                    f"{folder}/adapter_config.json), but {entry.get('name')} serves {repo}",
                    f"serve the adapter under a model of {trained}, or use an adapter trained for {repo}",
                    view.host,
                )
            )
    return problems


def _adapter_folder(adapter: Mapping[str, Any], root: Any) -> str:
    path = adapter.get("path")
    if isinstance(path, str) and path.startswith("/"):
        return path
    repo, revision = adapter.get("repo"), adapter.get("revision")
    if isinstance(root, str) and root.startswith("/") and isinstance(repo, str) and isinstance(revision, str):
        return f"{root.rstrip('/')}/{repo}/{revision}"
    return ""


def _base_of(text: str | None) -> str | None:
    try:
        config = json.loads(text) if text else None
    except ValueError:
        return None  # serve reports an adapter_config.json that is not JSON, with the fetch to redo
    base = config.get("base_model_name_or_path") if isinstance(config, Mapping) else None
    return base if isinstance(base, str) and base.strip() else None


def _same_repo(trained: str, repo: str) -> bool:
    """A hub id compares case-insensitively; a local path (the trainer's disk) says nothing here."""
    trained = trained.strip().rstrip("/")
    return trained.startswith(("/", ".", "~")) or trained.lower() == repo.lower()


def _extra_args(view: HostView, var: str, entry: Mapping[str, Any]) -> list[Problem]:
    """A flag the planner owns bypasses its checks; one the role or a serving group sets would fight it."""
    args = entry.get("extra_args")
    if not isinstance(args, list) or has_unresolved(args):
        return []
    problems: list[Problem] = []
    for flag, _values in split_flags(args):
        if flag in ROLE_FLAGS:
            what, fix = f"sets {flag}, which the role sets", f"remove it; it comes from {ROLE_FLAGS[flag]}"
        elif flag in GROUP_FLAGS:
            what = f"sets {flag}, which the serving group sets on every member"
            fix = f"remove it; {SERVING_GROUPS} sets it"
        elif flag in FEATURE_FLAGS:
            what = f"sets {flag}, which the fleet chooses per model"
            setting = FEATURE_FLAGS[flag].replace("vllm_server_models[]", var)
            fix = f"remove it and set {setting} (false turns it off)"
        elif flag in PLANNER_FLAGS:
            option = PLANNER_FLAGS[flag]
            what = f"sets {flag}, a flag the planner owns (its option {option})"
            fix = f"put it in {var}.overrides.{option} instead, so the planner checks it"
        else:
            continue
        problems.append(Problem(f"{var}.extra_args", what, fix, view.host))
    return problems


def _parsers(view: HostView, var: str, entry: Mapping[str, Any]) -> list[Problem]:
    """A tool-call or reasoning parser, a task or a speculative method the deployed release does not have
    (or a draft TP it refuses): the serve stage refuses it after the hosts stage; none needs the model's
    files."""
    version = view.get("vllm_server_vllm_version")
    if isinstance(version, Unresolved) and not view.has("vllm_server_vllm_version"):
        version = view.get("vllm_fleet_vllm_version")
    keys = ("task", "tool_call_parser", "reasoning_parser", "speculative")
    settings = {key: entry[key] for key in keys if key in entry}
    if not settings or not isinstance(version, str) or has_unresolved(list(settings.values())):
        return []
    if "speculative" in settings and isinstance(entry.get("overrides"), Mapping):
        settings["overrides"] = entry["overrides"]  # the draft's TP is checked against a set TP
    try:
        model_features({"architectures": ["LlamaForCausalLM"]}, None, settings, version, var)
    except ServingError as exc:
        text = str(exc)
        key = next((k for k in keys if f".{k}" in text), "task")
        what, _sep, names = text.partition("; it has: ")
        fix = f"use one of {names}" if names else "fix it as the message says"
        return [Problem(f"{var}.{key}", what.split(": ", 1)[-1], fix, view.host)]
    return []


def _tiers(view: HostView, var: str, entry: Mapping[str, Any]) -> list[Problem]:
    """A kv_offload the release cannot render or a sleep level vLLM lacks; the host's RAM is judged by the
    serve stage, which has its facts."""
    version = view.get("vllm_server_vllm_version")
    if isinstance(version, Unresolved) and not view.has("vllm_server_vllm_version"):
        version = view.get("vllm_fleet_vllm_version")
    problems: list[Problem] = []
    value = entry.get("kv_offload")
    if value is not None and isinstance(version, str) and not has_unresolved(value):
        what = offload.check_setting(value, version, f"{var}.kv_offload")
        if what:
            fix = (
                "pin a release with the flags or set backend lmcache" if "has no" in what else "fix the value"
            )
            problems.append(Problem(f"{var}.kv_offload", what.split(": ", 1)[-1], fix, view.host))
        elif view.get("vllm_server_ipc_mode") != "host":
            problems += _shm(view, var, value)
    level = entry.get("sleep")
    if level is not None and not has_unresolved(level):
        what = sleep.check_setting(level, f"{var}.sleep")
        if what:
            problems.append(Problem(f"{var}.sleep", what, "set sleep 1, 2 or false", view.host))
    return problems


def _shm(view: HostView, var: str, value: Any) -> list[Problem]:
    """A fixed native tier the container's /dev/shm (vllm_server_shm_size) cannot hold."""
    shm_size = view.get("vllm_server_shm_size")
    if has_unresolved(shm_size) or has_unresolved(view.get("vllm_server_ipc_mode")):
        return []
    try:
        what = offload.shm_problem(value, shm_size, f"{var}.kv_offload")
    except ServingError:
        return [
            Problem(
                "vllm_server_shm_size",
                f"{shm_size!r} is not a Docker size",
                "give one such as 16g",
                view.host,
            )
        ]
    if not what:
        return []
    why, fix = what.split(": ", 1)[-1].split(" Fix: ")
    return [Problem(f"{var}.kv_offload", why, fix, view.host)]


def _gpu_indexes(view: HostView, var: str, entry: Mapping[str, Any], gpus: HostGpus | None) -> list[Problem]:
    ids = entry.get("gpus")
    if gpus is None or not isinstance(ids, list) or has_unresolved(ids):
        return []
    problems: list[Problem] = []
    for position, raw in enumerate(ids):
        if is_unresolved(raw) or isinstance(raw, bool) or not isinstance(raw, int):
            continue  # argument_specs tells a GPU index that is not a number
        if not 0 <= raw < gpus.count:
            problems.append(
                Problem(
                    f"{var}.gpus[{position}]",
                    f"GPU {raw} does not exist on {view.host}, which has {gpus.text} "
                    f"(indexes 0-{gpus.count - 1})",
                    f"list GPUs 0-{gpus.count - 1} of {view.host} (in its host_vars when the hosts of its "
                    "GPU group differ), or drop gpus to take the first free ones",
                    view.host,
                )
            )
    return problems
