"""How a planned model becomes a container: command line, GPU sets, hashes, the deployment record."""

from __future__ import annotations

import functools
import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from ..fleet_planner.errors import PlanInputError
from ..fleet_planner.versions import parse_version


class ServingError(ValueError):
    """Invalid serving input; the message names the variable to fix."""


# Flags the role sets itself; anything else in them would fight the role.
ROLE_FLAGS: dict[str, str] = {
    "--host": "vllm_server_listen_address",
    "--port": "vllm_server_models[].port",
    "--served-model-name": "vllm_server_models[].name",
    "--model": "vllm_server_models[].path",
    "--api-key": "vllm_fleet_api_key (passed as VLLM_API_KEY, never on the command line)",
    "--shutdown-timeout": "vllm_server_stop_timeout",
    "--lora-modules": "vllm_server_models[].adapters",
}

# Flags model_features sets from the model's family, template and task (vllm_server_models[].task,
# tool_call_parser, reasoning_parser, chat_template): extra_args may not set them beside it.
FEATURE_FLAGS: dict[str, str] = {
    "--enable-auto-tool-choice": "vllm_server_models[].tool_call_parser",
    "--tool-call-parser": "vllm_server_models[].tool_call_parser",
    "--reasoning-parser": "vllm_server_models[].reasoning_parser",
    "--enable-reasoning": "vllm_server_models[].reasoning_parser",
    "--chat-template": "vllm_server_models[].chat_template",
    "--runner": "vllm_server_models[].task",
    "--convert": "vllm_server_models[].task",
    "--task": "vllm_server_models[].task",
    "--speculative-config": "vllm_server_models[].speculative",
    "-sc": "vllm_server_models[].speculative",
    "--kv-offloading-backend": "vllm_server_models[].kv_offload",
    "--kv-offloading-size": "vllm_server_models[].kv_offload",
    "--enable-sleep-mode": "vllm_server_models[].sleep",
}

# First release whose `vllm serve` drains in-flight requests on SIGTERM (--shutdown-timeout; its default 0
# aborts them). Before it, vLLM has no drain and the gateway's drain is all there is.
SHUTDOWN_TIMEOUT_SINCE = (0, 18, 0)
# Seconds Docker keeps after vLLM's drain deadline to see the process exit before it kills it.
STOP_MARGIN_S = 5


def shutdown_timeout(stop_timeout: Any, vllm_version: str | None) -> int | None:
    """vLLM's ``--shutdown-timeout`` for a container Docker stops within ``stop_timeout`` seconds.

    None where the release has no such flag. vLLM must give up on in-flight requests before Docker's
    SIGKILL, so it gets the stop timeout less a margin for the process to exit.
    """
    try:
        stop = int(stop_timeout)
    except (TypeError, ValueError):
        raise ServingError(
            f"vllm_server_stop_timeout must be a number of seconds, got {stop_timeout!r}"
        ) from None
    if stop < 0:
        raise ServingError(f"vllm_server_stop_timeout must be >= 0, got {stop}")
    try:
        version = parse_version(vllm_version)
    except PlanInputError as exc:
        raise ServingError(str(exc)) from None
    if version < SHUTDOWN_TIMEOUT_SINCE:
        return None
    return max(0, stop - STOP_MARGIN_S)


@functools.cache
def planner_flags() -> dict[str, str]:
    """Planner option that owns each flag (from the planner's option table): extra_args may not bypass
    the planner's validation. Read on first use: the option table loads the planner's parsers, which
    most filters over this module never need."""
    from ..fleet_planner.options import vllm_flag_owners

    return vllm_flag_owners()


@functools.cache
def summary_fields() -> tuple[str, ...]:
    """The launch values (the option table's plan fields), then the figures worth comparing with
    vLLM's log. Read on first use, as ``planner_flags``."""
    from ..fleet_planner.options import plan_fields as launch_fields

    return (*launch_fields(), "kv_bytes_per_token", "kv_cache_tokens", "max_concurrency")


def __getattr__(name: str) -> Any:
    """``PLANNER_FLAGS`` and ``PLAN_FIELDS``, the tables above, under the names they had as constants."""
    if name == "PLANNER_FLAGS":
        return planner_flags()
    if name == "PLAN_FIELDS":
        return summary_fields()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _flag_name(token: str) -> str:
    return token.split("=", 1)[0]


def split_flags(args: Iterable[Any]) -> list[tuple[str, list[str]]]:
    """Group a vLLM argument list into ``(flag, values)`` pairs, in order.

    ``--flag=value`` and ``--flag value ...`` both work; a leading positional (the
    model) is returned with the flag ``""``.
    """
    groups: list[tuple[str, list[str]]] = []
    for raw in args:
        token = str(raw)
        if token.startswith("-") and not _is_number(token):
            if "=" in token and token.startswith("--"):
                name, value = token.split("=", 1)
                groups.append((name, [value]))
            else:
                groups.append((token, []))
        elif groups:
            groups[-1][1].append(token)
        else:
            groups.append(("", [token]))
    return groups


def _is_number(token: str) -> bool:
    return re.fullmatch(r"-?\d+(\.\d+)?", token) is not None


def vllm_command(
    model_path: str,
    served_name: str,
    host: str,
    port: int,
    planned_args: Iterable[Any],
    extra_args: Iterable[Any] = (),
    stop_timeout: Any = None,
    vllm_version: str | None = None,
    lora_modules: Iterable[Any] = (),
    feature_args: Iterable[Any] = (),
) -> list[str]:
    """The ``vllm serve`` arguments of one model: role flags, then the plan, the model's features, then
    ``extra_args``.

    ``lora_modules``: ``name=path`` of each LoRA adapter (``--lora-modules``; the plan has LoRA on).
    ``feature_args``: the flags ``model_features`` chose (tool-call and reasoning parsers, chat template,
    pooling runner).

    With ``stop_timeout`` (the container's), vLLM gets a ``--shutdown-timeout`` that lets in-flight
    requests finish on SIGTERM, on releases that have it.

    Raises :class:`ServingError` when ``extra_args`` sets a flag the planner or the
    role owns (it must go through ``overrides`` so the planner validates it).
    """
    if not model_path or not str(model_path).startswith("/"):
        raise ServingError(
            f"vllm_server_models[{served_name}].path must be an absolute directory, got {model_path!r}"
        )
    try:
        port = int(port)
    except (TypeError, ValueError):
        raise ServingError(f"vllm_server_models[{served_name}].port must be a number, got {port!r}") from None
    if not 1 <= port <= 65535:
        raise ServingError(f"vllm_server_models[{served_name}].port must be within 1-65535, got {port}")
    planned: list[str] = []
    for flag, values in split_flags(planned_args):
        if flag == "" or flag in ROLE_FLAGS:
            continue  # the role sets these itself
        planned += [flag, *values]
    planned_flags = {flag for flag, _unused in split_flags(planned)}
    extra: list[str] = []
    for flag, values in split_flags(extra_args):
        if flag == "":
            raise ServingError(
                f"vllm_server_models[{served_name}].extra_args starts with {values[0]!r}, "
                "which is not a flag; "
                "the model directory comes from vllm_server_models[].path"
            )
        if flag in ROLE_FLAGS:
            raise ServingError(
                f"vllm_server_models[{served_name}].extra_args sets {flag}: remove it, "
                f"it comes from {ROLE_FLAGS[flag]}"
            )
        if flag in FEATURE_FLAGS:
            raise ServingError(
                f"vllm_server_models[{served_name}].extra_args sets {flag}: remove it and set "
                f"{FEATURE_FLAGS[flag].replace('[]', f'[{served_name}]')} instead (false turns it off)"
            )
        owners = planner_flags()
        if flag in owners or flag in planned_flags:
            option = owners.get(flag, flag.lstrip("-").replace("-", "_"))
            raise ServingError(
                f"vllm_server_models[{served_name}].extra_args sets {flag}: put it in "
                f"vllm_server_models[{served_name}].overrides.{option} instead, so the planner checks it"
            )
        extra += [flag, *values]
    drain: list[str] = []
    if stop_timeout is not None:
        seconds = shutdown_timeout(stop_timeout, vllm_version)
        if seconds is not None:
            drain = ["--shutdown-timeout", str(seconds)]
    return [
        str(model_path),
        "--served-model-name",
        str(served_name),
        "--host",
        str(host),
        "--port",
        str(port),
        *drain,
        *planned,
        *(["--lora-modules", *map(str, lora_modules)] if lora_modules else []),
        *map(str, feature_args),
        *extra,
    ]


def stable_hash(value: Any, length: int = 16) -> str:
    """Short sha256 of the canonical JSON of ``value`` (key order does not matter)."""
    blob = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:length]


def _check_ids(name: str, ids: Iterable[Any], gpu_count: int) -> list[int]:
    out: list[int] = []
    for raw in ids:
        try:
            index = int(raw)
        except (TypeError, ValueError):
            raise ServingError(f"vllm_server_models[{name}].gpus: {raw!r} is not a GPU index") from None
        if not 0 <= index < gpu_count:
            raise ServingError(
                f"vllm_server_models[{name}].gpus: GPU {index} does not exist "
                f"(this host has {gpu_count} GPUs, "
                f"indexes 0-{gpu_count - 1})"
            )
        if index in out:
            raise ServingError(f"vllm_server_models[{name}].gpus lists GPU {index} twice")
        out.append(index)
    return out


def assign_gpu_sets(requests: Iterable[Mapping[str, Any]], gpu_count: int) -> dict[str, list[int]]:
    """Disjoint GPU sets for the models of one host.

    ``requests``: ``{name, count, gpus}`` per model, ``count`` = GPUs the plan needs
    (tensor x pipeline parallel), ``gpus`` an explicit list or ``None``. Explicit sets
    are kept; the others get the first free aligned block (GPU ``k*count`` onwards,
    so a 4-GPU model lands on 0-3 or 4-7 and keeps its NVLink/NUMA locality), else the
    first free contiguous block, else any free GPUs.
    """
    requests = list(requests)
    sleepers = [r for r in requests if r.get("sleep") not in (None, False)]
    if len(sleepers) > 1:
        return _share_sleepers(requests, sleepers, gpu_count)
    taken: dict[int, str] = {}
    result: dict[str, list[int]] = {}
    for req in requests:
        if req.get("gpus") in (None, [], ""):
            continue
        name = str(req["name"])
        ids = _check_ids(name, req["gpus"], gpu_count)
        need = int(req.get("count") or len(ids))
        if len(ids) < need:
            raise ServingError(
                f"vllm_server_models[{name}].gpus has {len(ids)} GPUs but the plan needs {need} "
                "(tensor_parallel_size x pipeline_parallel_size); list more GPUs or lower "
                "overrides.tensor_parallel_size"
            )
        for index in ids:
            if index in taken:
                raise ServingError(
                    f"GPU {index} is in vllm_server_models[].gpus of both {taken[index]} and {name}; "
                    "give each model on a host its own GPUs"
                )
            taken[index] = name
        result[name] = ids
    for req in requests:
        name = str(req["name"])
        if name in result:
            continue
        need = int(req.get("count") or 1)
        free = [i for i in range(gpu_count) if i not in taken]
        chosen = _pick_block(free, need, gpu_count)
        if chosen is None:
            wanted = {str(r["name"]): int(r.get("count") or len(r.get("gpus") or []) or 1) for r in requests}
            raise ServingError(
                f"this host has {gpu_count} GPUs but its models need {sum(wanted.values())} "
                f"({', '.join(f'{k}: {v}' for k, v in wanted.items())}); {name} gets none. "
                "Fix: move a model to "
                "another host, or lower vllm_server_models[].overrides.tensor_parallel_size"
            )
        for index in chosen:
            taken[index] = name
        result[name] = chosen
    return result


def _share_sleepers(
    requests: list[Mapping[str, Any]], sleepers: list[Mapping[str, Any]], gpu_count: int
) -> dict[str, list[int]]:
    """The models that may sleep (``sleep`` set) share one GPU set: the one a sleeper names in ``gpus``
    (every sleeper that names one names the same), else the block one of them would get. One set per host,
    because the host's sleep controller keeps one budget of awake bytes (sleep_plan.sleep_budget)."""
    names = [str(r["name"]) for r in sleepers]
    counts = {int(r.get("count") or len(r.get("gpus") or []) or 1) for r in sleepers}
    if len(counts) > 1:
        raise ServingError(
            f"the models that may sleep on a host share one set of GPUs, but {', '.join(names)} need "
            f"different numbers of GPUs ({sorted(counts)}): give them the same tensor_parallel_size x "
            "pipeline_parallel_size in their overrides, or serve some of them on another host"
        )
    named = {tuple(int(i) for i in r["gpus"]) for r in sleepers if r.get("gpus") not in (None, [], "")}
    if len(named) > 1:
        raise ServingError(
            "the models that may sleep on a host share one set of GPUs, but their vllm_server_models[].gpus "
            f"differ ({', '.join(str(list(g)) for g in sorted(named))}): list the same GPUs for "
            f"{', '.join(names)}"
        )
    first = next(i for i, r in enumerate(requests) if r.get("sleep") not in (None, False))
    shared = {"name": names[0], "count": counts.pop(), "gpus": list(named.pop()) if named else None}
    merged = [r for i, r in enumerate(requests) if i == first or r.get("sleep") in (None, False)]
    merged[merged.index(requests[first])] = shared
    result = assign_gpu_sets(merged, gpu_count)
    return {
        str(r["name"]): list(result[names[0] if r.get("sleep") not in (None, False) else str(r["name"])])
        for r in requests
    }


def _pick_block(free: list[int], need: int, gpu_count: int) -> list[int] | None:
    if len(free) < need:
        return None
    free_set = set(free)
    for start in range(0, gpu_count - need + 1, need):  # aligned blocks first
        block = list(range(start, start + need))
        if free_set.issuperset(block):
            return block
    for start in range(gpu_count - need + 1):
        block = list(range(start, start + need))
        if free_set.issuperset(block):
            return block
    return free[:need]


def readiness_timeout(weights_bytes: Any, base: int = 300, per_gib: float = 15.0, maximum: int = 3600) -> int:
    """Seconds to wait for a new container to answer a completion: ``base + per_gib x weights``, capped."""
    try:
        gib = max(float(weights_bytes or 0), 0.0) / 2**30
    except (TypeError, ValueError):
        gib = 0.0
    return int(min(maximum, base + per_gib * gib))


def plan_summary(plan: Mapping[str, Any]) -> dict[str, Any]:
    """The planner's figures worth keeping next to a deployment."""
    out = {key: plan.get(key) for key in summary_fields() if plan.get(key) is not None}
    if plan.get("warnings"):
        out["warnings"] = list(plan["warnings"])
    return out


FACT_SCHEMA = 1


def plain_copy(value: Any) -> Any:
    """A copy of JSON-like ``value`` in plain dicts and lists.

    Not ``copy.deepcopy``: on the containers a template hands a filter (ansible-core 2.19's lazy ones) it
    copies the template engine and every variable of the host with each nested dict and list, which made
    this filter most of a no-change ``site.yml``'s controller time.
    """
    if isinstance(value, Mapping):
        return {key: plain_copy(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain_copy(item) for item in value]
    return value


def update_deployments(
    existing: Any,
    records: Mapping[str, Mapping[str, Any]],
    now: str,
    prune: bool = True,
    earlier: Any = None,
) -> dict[str, Any]:
    """The new content of the ``vllm_fleet`` local fact after a deployment.

    ``existing`` is the fact as read from the host (``{}`` or garbage on first run),
    ``records`` the model name -> record of what runs now (``version``, a hash of the
    arguments and the image ID, identifies it). For each model: the same ``version``
    takes the new record but keeps the stored ``deployed_at`` and the figures measured
    at that deployment (``actual``, ``plan_vs_actual``, ``baseline``); a new
    one becomes ``current`` and the old ``current`` becomes ``previous``, so a rollback
    finds every input it needs on the host. Models without a record are dropped
    (``prune``, a full deployment) or kept as they are (a rollback of some models).

    ``earlier`` is the fact as it was before a change that failed (a rollout's restore): a model
    returned to the version it recorded then gets that entry back whole, so the failed version is
    not kept as ``previous`` (a later rollback would otherwise move to it).
    """
    earlier_models = earlier.get("models") if isinstance(earlier, Mapping) else None
    if not isinstance(earlier_models, Mapping):
        earlier_models = {}
    old_models = existing.get("models") if isinstance(existing, Mapping) else None
    if not isinstance(old_models, Mapping):
        old_models = {}
    models: dict[str, Any] = {}
    if not prune:
        models.update({name: plain_copy(entry) for name, entry in old_models.items() if name not in records})
    for name in sorted(records):
        record = plain_copy(records[name])
        entry = old_models.get(name) if isinstance(old_models.get(name), Mapping) else {}
        current = entry.get("current") if isinstance(entry.get("current"), Mapping) else None
        previous = entry.get("previous") if isinstance(entry.get("previous"), Mapping) else None
        before = earlier_models.get(name) if isinstance(earlier_models.get(name), Mapping) else {}
        before_current = before.get("current") if isinstance(before.get("current"), Mapping) else None
        if before_current and before_current.get("version") == record.get("version"):
            current, previous = (
                before_current,
                (before.get("previous") if isinstance(before.get("previous"), Mapping) else None),
            )
        if current and current.get("version") == record.get("version"):
            # same version: refresh the description, keep when it was deployed and what was measured then
            kept = record
            kept["deployed_at"] = current.get("deployed_at", now)
            for key in ("actual", "plan_vs_actual", "baseline"):
                if current.get(key):
                    kept[key] = plain_copy(current[key])
            models[name] = {"current": kept, "previous": plain_copy(previous)}
        else:
            record["deployed_at"] = now
            models[name] = {
                "current": record,
                "previous": plain_copy(current if current else previous),
            }
    return {"schema": FACT_SCHEMA, "models": dict(sorted(models.items()))}


def record_spec(record: Mapping[str, Any]) -> dict[str, Any]:
    """A deployment record as a container spec again: a serving group member's ``serving_group``
    back as the spec's ``group``/``members``/``rank``/``role``/``backend``/``rendezvous``.

    The role reads those keys (a follower has no health check, no readiness wait and no URL), so a
    restored follower must carry them as when it was deployed.
    """
    spec = dict(record)
    member = record.get("serving_group")
    if isinstance(member, Mapping) and member.get("name"):
        spec.update(
            group=str(member["name"]),
            members=[str(h) for h in member.get("members") or []],
            rank=int(member.get("rank") or 0),
            role=str(member.get("role") or ("leader" if not member.get("rank") else "follower")),
            backend=str(member.get("backend") or ""),
            rendezvous=str(member.get("rendezvous") or ""),
        )
    return spec


def rollback_target(
    fact: Any, name: str, running_version: str | None, restart: bool = False
) -> dict[str, Any]:
    """The record to go back to for model ``name``.

    When the running container is not the recorded ``current`` (a deployment failed
    half-way), that is ``current``; otherwise ``previous``. ``restart``: ``current`` again (a
    member of a serving group whose other members are restored: it cannot rejoin a new rank 0).
    """
    models = fact.get("models") if isinstance(fact, Mapping) else None
    entry = models.get(name) if isinstance(models, Mapping) else None
    if not isinstance(entry, Mapping):
        raise ServingError(f"no deployment of {name} is recorded on this host (ansible_local.vllm_fleet)")
    current = entry.get("current")
    previous = entry.get("previous")
    if restart is True or str(restart).lower() in ("true", "yes", "1"):  # a template may hand over text
        if not isinstance(current, Mapping):
            raise ServingError(f"{name}: no current deployment is recorded on this host to restart")
        return record_spec(current)
    if isinstance(current, Mapping) and running_version and current.get("version") != running_version:
        return record_spec(current)
    if isinstance(previous, Mapping):
        return record_spec(previous)
    raise ServingError(
        f"{name}: only one version has been deployed on this host, there is nothing to roll back to"
    )
