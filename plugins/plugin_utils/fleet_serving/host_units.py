"""Every serving unit of one host, built once: from the host's declared models, the files the
``vllm_server_model_files`` module read on it and its facts, the release, features, LoRA sizing, plan,
GPU set, host KV tier, sleep wiring and container of each model (one per MIG instance on MIG).

``vllm_server``'s preflight calls :func:`host_units` once per host; its tasks only read the files, check the
answer and act on it. Each step is the function ``playbooks/plan.yml`` and the doctor call too
(:func:`.unit.unit_options`, :func:`.model_features.model_features`, :func:`.lora.launch`, the planner), so
what is planned is what is deployed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .. import fleet_planner
from ..fleet_planner import gpu as planner_gpu
from ..fleet_planner import mig as planner_mig
from . import deploy, images, kv_offload, lora, mig, model_features, sleep_host, unit

WEIGHTS_HINT = "Download the weights first (playbooks/weights.yml)"


def _missing(files: Mapping[str, Any], host: str) -> list[str]:
    """What cannot be read, each with its fix."""
    out = []
    for model in files.get("models") or []:
        name, errors = model.get("name"), model.get("errors") or {}
        where = f"vllm_server_models[{name}]"
        if "config.json" in errors:
            out.append(
                f"{model['path']}/config.json cannot be read on {host} ({errors['config.json']}). "
                f"{WEIGHTS_HINT} or fix {where}.path (revision {model.get('revision') or '?'})."
            )
        for part, fix in (
            ("tokenizer_config.json", f"fetch the weights again or fix {where}.path"),
            ("index", f"fetch the weights again (model.safetensors.index.json) or fix {where}.path"),
            (
                "speculative.model",
                f"download the draft first (playbooks/weights.yml) or fix {where}.speculative.model",
            ),
        ):
            if part in errors:
                out.append(f"{errors[part]} on {host}: {fix}.")
    for adapter in files.get("adapters") or []:
        why = (adapter.get("errors") or {}).get("adapter_config.json")
        if why:
            out.append(
                f"{adapter['path']}/adapter_config.json cannot be read on {host} ({why}). Download the "
                f"adapters first (playbooks/weights.yml) or fix vllm_server_models[{adapter['model']}]"
                f".adapters[{adapter['name']}] (repo, revision or path)."
            )
    return out


def _resolved(declared: Sequence[Mapping[str, Any]], files: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Each declared model pointed at the immutable revision its branch or tag resolved to."""
    out = []
    for model, read in zip(declared, files.get("models") or [], strict=True):
        entry = dict(model)
        if read.get("revision"):
            entry.update(
                path=read["path"], revision=read["revision"], requested_revision=read["requested_revision"]
            )
        out.append(entry)
    return out


def _refusal(unit_: Mapping[str, Any], plan: Mapping[str, Any], facts: Mapping[str, Any], host: str) -> str:
    errors = list(plan.get("errors") or [])
    if unit_.get("mig_target"):
        return f"{host}: {planner_mig.mig_refusal(unit_['mig_target'], str(unit_['name']), errors)}"
    gpus = facts.get("gpus") or [{}]
    return (
        f"{unit_['name']} cannot be served on {host} ({facts.get('count')} x {gpus[0].get('name') or 'GPU'}, "
        f"GPUs {','.join(str(g) for g in unit_.get('gpus') or ['any'])}): {' '.join(errors)} "
        f"Set vllm_server_models[{unit_['name']}].overrides, or vllm_server_plan_options, or serve it on "
        "larger GPUs."
    )


def host_units(
    models: Sequence[Mapping[str, Any]],
    files: Mapping[str, Any],
    facts: Mapping[str, Any],
    settings: Mapping[str, Any],
) -> dict[str, Any]:
    """The serving units of one host.

    ``models``: its ``vllm_server_models``; ``files``: the ``vllm_server_model_files`` module's answer
    (``models``, ``adapters``); ``facts``: ``nvidia_gpu`` (its GPU facts) and ``memtotal_mb``; ``settings``:
    ``host``, ``image``, ``vllm_version``, ``plan_options``, ``adapters_root``, ``group`` (its serving group,
    {} for none), ``group_gpu`` (the group's GPU description, {} for none), ``shm_size`` (None where the
    containers share the host's /dev/shm), ``sleep`` (:func:`.sleep_host.sleep_host`'s settings) and
    ``unit`` (:func:`.unit.unit_spec`'s).

    Returns ``missing`` (files that cannot be read, each with its fix) or ``refusals`` (plans vLLM would
    refuse) and stops there when either is non-empty; else ``models`` (resolved), ``releases``,
    ``features``, ``adapters``, ``lora``, ``units``, ``plans``, ``kv_offload``, ``gpu_sets``, ``sleep`` and
    ``specs``. Raises :class:`.deploy.ServingError` or the planner's input error on invalid input.
    """
    host = str(settings.get("host") or "?")
    gpu_facts = facts.get("nvidia_gpu") or {}
    out: dict[str, Any] = {"missing": _missing(files, host), "refusals": []}
    if out["missing"]:
        return out
    read = list(files.get("models") or [])
    resolved = _resolved(models, files)
    releases = {
        str(m["name"]): images.image_version(m, settings.get("image"), settings.get("vllm_version"))
        for m in resolved
    }
    features = {
        str(m["name"]): model_features.model_features(
            r["config"], r["tokenizer_config"], m, releases[str(m["name"])]["vllm_version"], str(m["name"])
        )
        for m, r in zip(resolved, read, strict=True)
    }
    adapters = list(files.get("adapters") or [])
    sized = lora.launch(
        adapters, [a["config"] for a in adapters], releases, str(settings.get("adapters_root") or "")
    )
    units = mig.serving_units(resolved, gpu_facts)

    weights_by_name = {
        str(m["name"]): int(r.get("weights_bytes") or 0) for m, r in zip(resolved, read, strict=True)
    }
    group_gpu = settings.get("group_gpu") or {}
    members = len((settings.get("group") or {}).get("members") or []) if group_gpu else 1
    plans: dict[str, Any] = {}
    requests: list[dict[str, Any]] = []
    for item in units:
        name, index = str(item["name"]), int(item["model_index"])
        if group_gpu:
            gpu = group_gpu
        elif item.get("mig_target"):
            gpu = planner_mig.mig_gpu_spec(item["mig_target"])
        else:
            gpu = planner_gpu.gpu_spec_from_values(gpu_facts, 1, False, item.get("gpus"))
        options = unit.unit_options(
            item,
            releases[name],
            settings.get("plan_options"),
            features[name],
            sized.get(name) or {},
            read[index].get("draft_config"),
            members if group_gpu else 0,
        )
        plan = fleet_planner.plan(
            read[index]["config"], gpu, safetensors_index=read[index].get("index"),
            weights_bytes=weights_by_name[name] or None, options=options,
        )  # fmt: skip
        plans[str(item["key"])] = plan
        if not item.get("mig_target"):
            count = int(plan.get("tensor_parallel_size") or 1) * int(plan.get("pipeline_parallel_size") or 1)
            requests.append(
                {
                    "name": name,
                    "gpus": item.get("gpus"),
                    "count": count // max(members, 1),
                    "sleep": item.get("sleep"),
                }
            )
    out["refusals"] = [
        _refusal(u, plans[str(u["key"])], gpu_facts, host)
        for u in units
        if not plans[str(u["key"])].get("feasible")
    ]
    out.update(
        models=resolved,
        releases=releases,
        features=features,
        adapters=adapters,
        lora=sized,
        units=units,
        plans=plans,
    )
    if out["refusals"]:
        return out

    tp_by_name = {str(u["name"]): plans[str(u["key"])].get("tensor_parallel_size") for u in units}
    offload = kv_offload.kv_offload(
        resolved,
        facts.get("memtotal_mb") or 0,
        releases,
        weights_by_name,
        tp_by_name,
        settings.get("shm_size"),
    )
    gpu_sets = deploy.assign_gpu_sets(requests, int(gpu_facts.get("count") or 0)) if resolved else {}
    sleep = sleep_host.sleep_host(resolved, plans, settings.get("sleep") or {})
    specs = [
        unit.unit_spec(
            item,
            {
                "plan": plans[str(item["key"])],
                "release": releases[str(item["name"])],
                "gpus": [] if item.get("mig_target") else gpu_sets[str(item["name"])],
                "weights_bytes": weights_by_name[str(item["name"])],
                "features": features[str(item["name"])],
                "lora": sized.get(str(item["name"])) or {},
                "kv_offload": offload.get(str(item["name"])) or {},
                "sleep_backend": (sleep.get("backends") or {}).get(str(item["name"])) or {},
            },
            settings.get("unit") or {},
        )
        for item in units
    ]
    out.update(kv_offload=offload, gpu_sets=gpu_sets, sleep=sleep, specs=specs)
    return out
