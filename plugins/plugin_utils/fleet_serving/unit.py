"""One served model as a unit: its planner options, merged from every layer in one place, and its container.

``vllm_server`` (its preflight), ``playbooks/plan.yml`` (fleet_ops/plan_report.py) and the doctor
(fleet_ops/doctor/plans.py) all plan a model with :func:`unit_options`, so what is planned before a
deployment is what the deployment plans. The layers, a later one winning:

1. the release of the image the model runs (:func:`images.image_version`: its own image or version, else
   its GPU group's);
2. the GPU group's ``vllm_server_plan_options``;
3. what the serve stage sizes for it: its LoRA adapters (``max_loras``, ``max_lora_rank``), its task and
   speculation (``model_features``' ``plan_options``: a pooling runner, the speculative config), the
   draft's or EAGLE head's config.json;
4. the model's own ``overrides``;
5. a serving group's pipeline: one stage per member host unless a layer sets the split.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from ..fleet_planner.options import merge_plan_options
from .deploy import ServingError, plan_summary, readiness_timeout, stable_hash, vllm_command
from .mig import mig_device_requests


def _mapping(value: Any, what: str, name: str) -> Mapping[str, Any]:
    if value in (None, ""):
        return {}
    if not isinstance(value, Mapping):
        raise ServingError(
            f"vllm_server_models[{name}]: {what} must be a mapping, got {type(value).__name__}"
        )
    return value


def unit_options(
    model: Mapping[str, Any],
    release: Mapping[str, Any],
    group_options: Mapping[str, Any] | None = None,
    features: Mapping[str, Any] | None = None,
    lora: Mapping[str, Any] | None = None,
    draft_config: Mapping[str, Any] | None = None,
    group_members: int = 0,
) -> dict[str, Any]:
    """The planner options of ``model`` (a ``vllm_server_models[]`` entry: ``name``, ``overrides``).

    ``release``: ``images.image_version``'s answer for the model (``{image, vllm_version}``);
    ``group_options``: ``vllm_server_plan_options``; ``features``: ``model_features``' answer (its
    ``plan_options``); ``lora``: the model's entry of ``lora.launch`` (its ``options``); ``draft_config``:
    the config.json of ``speculative.model``; ``group_members``: the hosts of its serving group (0 when it
    is in none).
    """
    name = str(model.get("name") or "?")
    sized: dict[str, Any] = {
        **_mapping((lora or {}).get("options"), "its LoRA options", name),
        **_mapping((features or {}).get("plan_options"), "its serve options", name),
    }
    if draft_config:
        sized["speculative_draft_config"] = dict(draft_config)
    own = _mapping(model.get("overrides"), "overrides", name)
    options = merge_plan_options(release.get("vllm_version"), group_options, {**sized, **own}, name)
    if int(group_members or 0) > 0 and "pipeline_parallel_size" not in options:
        options["pipeline_parallel_size"] = int(group_members)
    return options


# the environment every vLLM container gets: no hub, no telemetry, GPUs numbered as nvidia-smi numbers them
BASE_ENV = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
    "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
}
# the CPU build refuses --enable-sleep-mode: the lab's switch leaves the flag out (preflight refuses the
# switch on any image that may be a GPU build)
LAB_DROPPED = ("--enable-sleep-mode",)


def _device_requests(gpus: list[Any], mig_target: Any, settings: Mapping[str, Any]) -> list[dict[str, Any]]:
    if not settings.get("gpu_requests"):
        return []
    driver = str(settings.get("gpu_request_driver") or "nvidia")
    if mig_target:
        return mig_device_requests(mig_target, driver)
    if driver == "nvidia":
        return [{"driver": "nvidia", "device_ids": [str(g) for g in gpus], "capabilities": [["gpu"]]}]
    return [{"driver": "cdi", "device_ids": [f"nvidia.com/gpu={g}" for g in gpus]}]


def unit_spec(
    unit: Mapping[str, Any], parts: Mapping[str, Any], settings: Mapping[str, Any]
) -> dict[str, Any]:
    """The container of one served model (one MIG instance's, for a model on MIG), as vllm_server runs it.

    ``unit``: an entry of ``mig.serving_units`` (the model's ``vllm_server_models[]`` entry with ``key``,
    ``model_index`` and, on MIG, ``mig_target``). ``parts``: what preflight worked out for it - ``plan``,
    ``release`` (``{image, vllm_version}``), ``gpus`` (its GPU set), ``weights_bytes``, ``features``
    (``model_features``), ``lora`` (its ``lora.launch`` entry, {} without adapters), ``kv_offload`` (its
    host tier, {} without one), ``sleep_backend`` (where its vLLM listens behind the sleep controller, {}
    for a model that never sleeps). ``settings``: the host's role values - ``listen_address``,
    ``network_mode``, ``ipc_mode``, ``container_prefix``, ``stop_timeout``, ``env``, ``gpu_requests``,
    ``gpu_request_driver``, ``ready_timeout`` (``{base, per_gib, max}``), ``lab_sleep_without_sleep_mode``.
    """
    name, port = str(unit["name"]), int(unit["port"])
    plan, release = parts["plan"], parts["release"]
    features, lora = parts.get("features") or {}, parts.get("lora") or {}
    offload, backend = parts.get("kv_offload") or {}, parts.get("sleep_backend") or {}
    mig_target = unit.get("mig_target") or None
    gpus = [mig_target["gpu"]] if mig_target else list(parts.get("gpus") or [])
    listen = str(settings["listen_address"])
    dropped = LAB_DROPPED if settings.get("lab_sleep_without_sleep_mode") else ()
    command = vllm_command(
        unit["path"],
        name,
        backend.get("host", listen),
        backend.get("port", unit["port"]),
        plan["vllm_args"],
        unit.get("extra_args") or [],
        settings.get("stop_timeout"),
        release["vllm_version"],
        lora.get("modules") or [],
        [a for a in features.get("args") or [] if a not in dropped] + list(offload.get("args") or []),
    )
    visible = mig_target["uuid"] if mig_target else ",".join(str(g) for g in gpus)
    env = {
        **BASE_ENV,
        **({} if settings.get("gpu_requests") else {"NVIDIA_VISIBLE_DEVICES": visible}),
        **(lora.get("env") or {}),
        **(features.get("env") or {}),
        **(offload.get("env") or {}),
        **(settings.get("env") or {}),
        **(unit.get("env") or {}),
    }
    device_requests = _device_requests(gpus, mig_target, settings)
    timeout = settings.get("ready_timeout") or {}
    spec = unit.get("speculative") or {}
    return {
        "name": name,
        "key": unit["key"],
        "mig": mig_target,
        "container": f"{settings['container_prefix']}{re.sub(r'[^A-Za-z0-9_.-]', '-', str(unit['key']))}",
        "image": release["image"],
        "model_path": unit["path"],
        "adapter_paths": list(lora.get("paths") or []),
        # the draft model or EAGLE head of --speculative-config, mounted read-only like the model
        "draft_paths": [spec["model"]] if isinstance(spec, Mapping) and "model" in spec else [],
        "adapters": list(lora.get("adapters") or []),
        "lora_runtime": bool(lora.get("runtime", False)),
        "revision": unit.get("revision", ""),
        "requested_revision": unit.get("requested_revision", unit.get("revision", "")),
        "port": port,
        "gpus": gpus,
        "command": command,
        "env": env,
        "device_requests": device_requests,
        "config_hash": stable_hash(
            {
                "image": release["image"],
                "command": command,
                "env": env,
                "device_requests": device_requests,
                "network_mode": settings["network_mode"],
                "ipc_mode": settings["ipc_mode"],
                "model_path": unit["path"],
            }
        ),
        "ready_timeout": readiness_timeout(
            parts.get("weights_bytes"),
            timeout.get("base", 300),
            timeout.get("per_gib", 15.0),
            timeout.get("max", 3600),
        ),
        "listen_address": listen,
        "vllm_version": release["vllm_version"],
        "network_mode": settings["network_mode"],
        "url": f"http://{listen}:{unit['port']}",
        "plan": plan_summary(plan),
        "task": features.get("task"),
        "sleep_level": features.get("sleep_level"),
        # where its vLLM listens behind the sleep controller ({} for a model that never sleeps)
        "sleep_backend": dict(backend),
        "kv_offload": dict(offload),
        "features": dict(features),
    }


# what a serving group member's spec says of its group (groups.member_specs), kept in its record
GROUP_KEYS = ("members", "rank", "role", "backend", "rendezvous")
# plan, measured -> their comparison (vllm_log.plan_vs_actual); injected: that module is host code
Compare = Callable[[Mapping[str, Any], Mapping[str, Any]], Any]


def unit_record(
    spec: Mapping[str, Any],
    images: list[Mapping[str, Any]],
    ready: Mapping[str, Any],
    vllm_version: str,
    compare: Compare,
) -> dict[str, Any]:
    """What the deployment fact records of one running container (``deploy.record_spec`` reads it back).

    ``spec``: its :func:`unit_spec` (a serving group member's, with ``group``, ``members``, ``rank``,
    ``role``, ``backend``, ``rendezvous``, ``entrypoint``, ``devices``); ``images``: the host's
    ``docker_image_info`` images, to pin the image ID and digests; ``ready``: the readiness check's result
    (``kv_cache``: vLLM's logged KV figures, ``ready_seconds``, ``completion_seconds``, ``ttft_seconds``);
    ``vllm_version``: the group's release, for a spec that names none.
    """
    image = spec["image"]
    found = [i for i in images if image in (i.get("RepoTags") or [])] + [
        i for i in images if i.get("Id") == image
    ]
    image_id = str(found[0].get("Id") or "") if found else ""
    actual = ready.get("kv_cache") or {}
    record: dict[str, Any] = {
        "name": spec["name"],
        "key": spec.get("key") or spec["name"],
        "mig": spec.get("mig"),
        "container": spec["container"],
        "image": image,
        "image_id": image_id,
        "image_digests": list(found[0].get("RepoDigests") or []) if found else [],
        "model_path": spec["model_path"],
        "adapter_paths": list(spec.get("adapter_paths") or []),
        # the speculative draft or EAGLE head folder, mounted again on a rollback
        "draft_paths": list(spec.get("draft_paths") or []),
        "adapters": list(spec.get("adapters") or []),
        "lora_runtime": bool(spec.get("lora_runtime", False)),
        "revision": spec["revision"],
        "requested_revision": spec.get("requested_revision", spec["revision"]),
        "port": spec["port"],
        "listen_address": spec["listen_address"],
        "url": spec.get("url"),
        "ready_timeout": spec["ready_timeout"],
        "gpus": spec["gpus"],
        "command": spec["command"],
        # a member of a serving group: Ray's shell launch and the InfiniBand devices, for its rollback
        "entrypoint": spec.get("entrypoint"),
        "devices": list(spec.get("devices") or []),
        "capabilities": list(spec.get("capabilities") or []),
        "ulimits": list(spec.get("ulimits") or []),
        "env": spec["env"],
        "device_requests": spec["device_requests"],
        "network_mode": spec["network_mode"],
        "config_hash": spec["config_hash"],
        "vllm_version": spec.get("vllm_version") or vllm_version,
        # generate, embed or score: what readiness, the watchdog and the rollout probe it with
        "task": spec.get("task") or "generate",
        "features": dict(spec.get("features") or {}),
        # a member of a serving group: which replica, its rank, and where the members meet
        "serving_group": {"name": spec["group"], **{k: spec[k] for k in GROUP_KEYS}}
        if "group" in spec
        else {},
        "version": stable_hash([spec["config_hash"], image_id]),
        "plan": spec["plan"],
        "actual": actual,
        "plan_vs_actual": compare(spec["plan"], actual),
        "baseline": {k: ready.get(k) for k in ("ready_seconds", "completion_seconds", "ttft_seconds")},
    }
    if spec.get("sleep_backend"):
        # a model that may sleep: its level and loopback address behind the sleep controller, for a rollback
        record.update(sleep_level=spec.get("sleep_level"), sleep_backend=spec["sleep_backend"])
    return record
