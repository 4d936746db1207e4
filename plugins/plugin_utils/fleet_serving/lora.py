"""LoRA adapters of a served model: where their verified copies are, and the vLLM launch they need.

An adapter is declared under its base model (``vllm_server_models[].adapters``) as
``{name, repo, revision}`` (the model_weights layout ``<root>/<repo>/<revision>``, a branch or tag
resolved through ``<root>/<repo>/refs/<revision>``) or with an explicit ``path``. Clients send the
adapter's ``name`` as the request's ``model``. Stdlib only.

On releases with runtime LoRA updating (:data:`RUNTIME_LORA_SINCE`) the adapter set is not part of the
container: vLLM gets ``VLLM_ALLOW_RUNTIME_LORA_UPDATING`` and the adapters root mounted as a whole, and
the role loads and unloads adapters through ``/v1/load_lora_adapter`` and ``/v1/unload_lora_adapter``
(:func:`runtime_changes`), so adding or removing one restarts nothing. Older releases get
``--lora-modules`` and a new container per change.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from ..fleet_planner.lora import LORA_RANKS
from ..fleet_planner.versions import parse_version
from .deploy import ServingError
from .images import release_of

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,199}$")
_REPO = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")
ADAPTER_KEYS = ("name", "repo", "revision", "endpoint", "source", "path")
# vLLM's /v1/load_lora_adapter and /v1/unload_lora_adapter (VLLM_ALLOW_RUNTIME_LORA_UPDATING) first
# shipped in 0.6.1 (vllm-project/vllm#6566); a runtime-loaded adapter is listed with its parent since then.
RUNTIME_LORA_SINCE = (0, 6, 1)
RUNTIME_LORA_ENV = "VLLM_ALLOW_RUNTIME_LORA_UPDATING"
# LoRA slots of a model whose adapters change at runtime: room to add adapters without a new
# --max-loras (a restart); more adapters than this still all fit one batch (the slots grow with them).
RUNTIME_LORA_SLOTS = 4


def runtime_updating(vllm_version: str | None) -> bool:
    """Whether this vLLM release loads and unloads LoRA adapters at runtime."""
    return parse_version(vllm_version) >= RUNTIME_LORA_SINCE


def adapters(models: Any, root: str) -> list[dict[str, Any]]:
    """Every adapter of a host's ``vllm_server_models``, flat: ``{model, name, repo, revision, path,
    ref}`` (``ref``: the refs file naming the commit of a branch or tag; "" with an explicit path).

    Raises :class:`ServingError` naming ``vllm_server_models[<model>].adapters[<i>]`` and the fix.
    """
    out: list[dict[str, Any]] = []
    if not isinstance(models, list):
        return out
    names: dict[str, str] = {str(m.get("name")): "a served model" for m in models if isinstance(m, Mapping)}
    for model in models:
        if not isinstance(model, Mapping) or not model.get("adapters"):
            continue
        base = str(model.get("name"))
        declared = model["adapters"]
        if not isinstance(declared, list):
            raise ServingError(
                f"vllm_server_models[{base}].adapters must be a list of {{name, repo, revision}}, "
                f"got {declared!r}"
            )
        for index, item in enumerate(declared):
            where = f"vllm_server_models[{base}].adapters[{index}]"
            if not isinstance(item, Mapping):
                raise ServingError(f"{where} must be a mapping {{name, repo, revision}}, got {item!r}")
            unknown = sorted(set(item) - set(ADAPTER_KEYS))
            if unknown:
                raise ServingError(
                    f"{where}: unknown key(s) {', '.join(unknown)}; expected {', '.join(ADAPTER_KEYS)}"
                )
            name = str(item.get("name") or "")
            if not _NAME.match(name):
                raise ServingError(
                    f"{where}.name {name!r} must start with a letter or digit and contain only letters, "
                    "digits and . _ : / @ + - (clients send it as the request's model)"
                )
            if name in names:
                raise ServingError(
                    f"{where}.name {name!r} is already {names[name]}; give the adapter a name of its own"
                )
            names[name] = f"an adapter of {base}"
            path = str(item.get("path") or "")
            repo = str(item.get("repo") or "")
            revision = str(item.get("revision") or "")
            if path:
                if not path.startswith("/"):
                    raise ServingError(f"{where}.path must be an absolute directory, got {path!r}")
                ref = ""
            else:
                if not _REPO.match(repo) or not revision:
                    raise ServingError(
                        f"{where} ({name}) needs repo ORG/NAME and a pinned revision (a commit, tag or "
                        "branch the weights stage resolved), or an absolute path; "
                        f"got repo={repo!r} revision={revision!r}"
                    )
                path = f"{root.rstrip('/')}/{repo}/{revision}"
                ref = f"{root.rstrip('/')}/{repo}/refs/{revision}"
            out.append(
                {"model": base, "name": name, "repo": repo, "revision": revision, "path": path, "ref": ref}
            )
    return out


def resolve(entries: Iterable[Mapping[str, Any]], commits: Iterable[Any]) -> list[dict[str, Any]]:
    """Point each adapter at the commit its branch or tag resolved to (``commits``: the refs files'
    contents, "" or None where there is none: the revision is a commit, or the path is explicit).

    The plan report's reading (plan.yml reads the refs on a group's first host); the serve stage's module
    vllm_server_model_files applies the same rule where it reads the folders."""
    out = []
    for entry, commit in zip(entries, commits, strict=True):
        entry = dict(entry)
        text = str(commit or "").strip()
        if entry.get("ref") and text and "/" not in text:
            entry["path"] = entry["path"].rsplit("/", 1)[0] + "/" + text
            entry["resolved_revision"] = text
        out.append(entry)
    return out


def rank_of(adapter_config: Any, where: str) -> int:
    """The LoRA rank ``r`` of a PEFT ``adapter_config.json`` (text or parsed)."""
    try:
        config = json.loads(adapter_config) if isinstance(adapter_config, (str, bytes)) else adapter_config
    except ValueError:
        raise ServingError(f"{where}: adapter_config.json is not JSON; fetch the adapter again") from None
    rank = config.get("r") if isinstance(config, Mapping) else None
    if isinstance(rank, bool) or not isinstance(rank, int) or rank < 1:
        raise ServingError(
            f"{where}: adapter_config.json has no LoRA rank 'r' (got {rank!r}); is it a LoRA adapter?"
        )
    if config.get("peft_type", "LORA") != "LORA":
        raise ServingError(
            f"{where}: peft_type is {config.get('peft_type')!r}; vLLM serves LORA adapters only"
        )
    return rank


def launch(
    entries: Iterable[Mapping[str, Any]],
    configs: Iterable[Any],
    vllm_version: Any = None,
    root: str = "",
) -> dict[str, dict[str, Any]]:
    """Per base model with adapters: ``{options, modules, paths, adapters, runtime, env}``;
    ``vllm_version`` is one release for all models or model name -> its own (:func:`.images.release_of`).

    ``options``: the planner options LoRA needs (``max_loras`` = the adapters, so all of them fit one
    batch, at least :data:`RUNTIME_LORA_SLOTS` with runtime updating; ``max_lora_rank`` = the smallest
    rank vLLM accepts that holds the largest adapter), which a model's own ``overrides`` may change;
    ``modules``: ``name=path`` for ``--lora-modules`` (none with runtime updating: they are loaded
    through the API); ``paths``: the folders to mount read-only (with runtime updating ``root`` as a
    whole, so a new adapter needs no new mount, and any explicit path outside it); ``adapters``:
    ``[{name, path, rank}]``; ``runtime``: whether ``vllm_version`` updates adapters at runtime, and
    ``env`` the container environment that turns it on.
    """
    base = root.rstrip("/")
    out: dict[str, dict[str, Any]] = {}
    for entry, config in zip(entries, configs, strict=True):
        where = f"vllm_server_models[{entry['model']}].adapters[{entry['name']}] ({entry['path']})"
        rank = rank_of(config, where)
        if rank > LORA_RANKS[-1]:
            raise ServingError(
                f"{where}: rank {rank} is above vLLM's largest --max-lora-rank ({LORA_RANKS[-1]})"
            )
        runtime = runtime_updating(release_of(vllm_version, str(entry["model"])))
        model = out.setdefault(
            entry["model"],
            {
                "options": {},
                "modules": [],
                "paths": [],
                "adapters": [],
                "runtime": runtime,
                "env": {RUNTIME_LORA_ENV: "True"} if runtime else {},
            },
        )
        if not runtime:
            model["modules"].append(f"{entry['name']}={entry['path']}")
            model["paths"].append(entry["path"])
        else:
            path = base if base and str(entry["path"]).startswith(base + "/") else str(entry["path"])
            if path not in model["paths"]:
                model["paths"].append(path)
        model["adapters"].append({"name": entry["name"], "path": entry["path"], "rank": rank})
    for model in out.values():
        model["options"] = sizing([a["rank"] for a in model["adapters"]], model["runtime"])
    return out


def sizing(ranks: Iterable[int], runtime: bool) -> dict[str, int]:
    """The planner options LoRA needs for adapters of ``ranks``: ``max_loras``, all of them in one batch (at
    least :data:`RUNTIME_LORA_SLOTS` where adapters load at runtime), and ``max_lora_rank``, the smallest
    rank vLLM accepts that holds the largest."""
    ranks = list(ranks)
    top = max(ranks)
    if top > LORA_RANKS[-1]:
        raise ServingError(f"LoRA rank {top} is above vLLM's largest --max-lora-rank ({LORA_RANKS[-1]})")
    return {
        "max_loras": max(len(ranks), RUNTIME_LORA_SLOTS) if runtime else len(ranks),
        "max_lora_rank": next(r for r in LORA_RANKS if r >= top),
    }


def runtime_changes(served: Any, model: str, declared: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """What to load and unload so that ``model``'s vLLM serves exactly the ``declared`` adapters.

    ``served``: vLLM's ``GET /v1/models`` body (an adapter is an entry whose ``parent`` is ``model``);
    ``declared``: ``[{name, path}]``. An adapter served from another path than declared (a new
    revision) is unloaded and loaded again. Returns ``{load: [{lora_name, lora_path}], unload:
    [{lora_name}], served: [names]}``, both in a stable order.
    """
    data = served.get("data") if isinstance(served, Mapping) else None
    if not isinstance(data, list):
        raise ServingError(f"{model}: vLLM's /v1/models answered without a model list ({served!r:.200})")
    current = {
        str(card["id"]): str(card.get("root") or "")
        for card in data
        if isinstance(card, Mapping) and card.get("id") and card.get("parent") == model
    }
    wanted = {str(a["name"]): str(a["path"]) for a in declared}
    stale = sorted(name for name, path in current.items() if name not in wanted or wanted[name] != path)
    missing = [name for name in wanted if name not in current or name in stale]
    return {
        "load": [{"lora_name": name, "lora_path": wanted[name]} for name in missing],
        "unload": [{"lora_name": name} for name in stale],
        "served": sorted(current),
    }
