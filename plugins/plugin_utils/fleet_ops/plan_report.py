"""Fleet plan report: one plan per (GPU group, model), the table, and plan vs actual.

``build_report`` takes the entries playbooks/plan.yml assembles (GPU facts per host,
model metadata, options, the deployed ``vllm_fleet`` local facts) and runs the planner
through an injected function, so the plan in the report is exactly the planner's
output for those inputs. Each entry also carries the equivalent ``bin/vllm-fleet-plan``
command line, which prints the same JSON.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Mapping
from typing import Any

from ..fleet_planner.versions import DEFAULT_VLLM_VERSION
from ..fleet_serving import lora
from ..fleet_serving.deploy import ServingError
from ..fleet_serving.images import image_version
from ..fleet_serving.model_features import model_features
from ..fleet_serving.unit import unit_options
from ..fleet_validate.values import role_value
from .textable import render_table

GIB = 1024**3
REPORT_SCHEMA = 1

# planner: (model_config, gpu, options, safetensors_index, weights_bytes) -> plan
Planner = Callable[[Mapping[str, Any], Mapping[str, Any], Mapping[str, Any], Any, Any], dict[str, Any]]
# gpu_spec: (nvidia_gpu facts, nodes, shared) -> planner gpu dict
GpuSpec = Callable[[Mapping[str, Any], int, bool], dict[str, Any]]

# (label, key in the deployed plan / plan, key in vLLM's actual figures, scale of the actual figure,
#  rounding of the figure in vLLM's log: half its last printed digit, in the actual figure's unit)
COMPARED = (
    ("KV cache tokens", "kv_cache_tokens", "kv_cache_tokens", 1, 0),
    ("max concurrency", "max_concurrency", "max_concurrency", 1, 0.005),
    ("KV cache GiB/GPU", "kv_cache_bytes", "kv_cache_gib", GIB, 0.005),
    ("weights GiB/GPU", "weights_bytes", "weights_gib", GIB, 0.005),
    ("max_model_len", "max_model_len", "max_model_len", 1, 0),
)


def planner_command(
    gpu: Mapping[str, Any],
    options: Mapping[str, Any],
    config_path: str | None,
    index_path: str | None = None,
    weights_bytes: int | None = None,
    program: str = "bin/vllm-fleet-plan",
) -> tuple[list[str], list[str]]:
    """The ``vllm-fleet-plan`` command that plans the same inputs, and options it cannot express."""
    cmd = [program, "--model-config", str(config_path or "CONFIG.json")]
    if index_path:
        cmd += ["--safetensors-index", str(index_path)]
    elif weights_bytes:
        cmd += ["--weights-bytes", str(int(weights_bytes))]
    # here, not at the top: the option table loads the planner's parsers, which the report filters that
    # only render a plan never need
    from ..fleet_planner.options import cli_arguments

    flags, missing = cli_arguments(gpu, options)  # the flags come from the planner's option table
    cmd += flags
    cmd += ["--format", "json"]
    return cmd, missing


def relative_error(predicted: Any, actual: Any, rounding: float = 0) -> float | None:
    """(predicted - actual) / actual in percent: positive when the plan over-predicted.

    ``rounding``: how far the printed ``actual`` may be from vLLM's own figure (vLLM logs GiB
    with two decimals); a prediction within it is exact as far as the log can tell.
    """
    if isinstance(predicted, bool) or isinstance(actual, bool):
        return None
    if not isinstance(predicted, (int, float)) or not isinstance(actual, (int, float)) or not actual:
        return None
    if abs(predicted - actual) <= rounding:
        return 0.0
    return round((predicted - actual) / actual * 100.0, 2)


def compare(
    plan: Mapping[str, Any] | None, deployed_plan: Mapping[str, Any] | None, actual: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """Predicted vs measured figures of one deployment.

    The prediction is the plan recorded when the model was deployed (same inputs as the
    running container) where it has the figure, else the plan computed now.
    """
    rows = []
    for label, key, actual_key, scale, rounding in COMPARED:
        measured = actual.get(actual_key)
        if measured is None:
            continue
        source = "deployed plan"
        predicted = (deployed_plan or {}).get(key)
        if predicted is None:
            source = "plan now"
            predicted = (plan or {}).get(key)
            if predicted is None:
                predicted = ((plan or {}).get("per_gpu") or {}).get(key)
        measured_value = measured * scale
        rows.append(
            {
                "figure": label,
                "key": key,
                "predicted": predicted,
                "actual": round(measured_value) if scale != 1 else measured,
                "error_pct": relative_error(predicted, measured_value, rounding * scale),
                "predicted_from": source if predicted is not None else None,
            }
        )
    return rows


def _deployments(entry: Mapping[str, Any], plan: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    out = []
    for host in entry.get("hosts") or []:
        fact = (entry.get("deployed") or {}).get(host) or {}
        record = ((fact.get("models") or {}).get(entry["model"]) or {}).get("current") or {}
        actual = record.get("actual") or {}
        if not record:
            continue
        out.append(
            {
                "host": host,
                "deployed_at": record.get("deployed_at"),
                "image": record.get("image"),
                "actual": actual,
                "deployed_plan": record.get("plan") or {},
                "comparison": compare(plan, record.get("plan"), actual) if actual else [],
                "note": "" if actual else "vLLM printed no KV-cache figures (yet): see the container log",
            }
        )
    return out


def build_entry(entry: Mapping[str, Any], planner: Planner, gpu_spec: GpuSpec) -> dict[str, Any]:
    """Plan one (group, model) entry.

    ``entry``: ``group``, ``model``, ``hosts``, ``facts`` (host -> nvidia_gpu facts or
    None), ``facts_source``, ``config`` (dict) and ``config_path``, optional ``index`` and
    ``index_path``, ``weights_bytes``, ``options``, ``nodes``, ``shared``, ``gpu_count``
    (GPUs per instance when fewer than the host's), ``deployed`` (host -> local fact),
    ``error`` (why the inputs could not be assembled).
    """
    out: dict[str, Any] = {
        "group": entry.get("group"),
        "model": entry.get("model"),
        "hosts": list(entry.get("hosts") or []),
        "facts_source": entry.get("facts_source"),
        "facts_host": None,
        "gpu": None,
        "inputs": {
            "config": entry.get("config_path"),
            "safetensors_index": entry.get("index_path"),
            "weights_bytes": entry.get("weights_bytes"),
            "options": dict(entry.get("options") or {}),
        },
        "command": None,
        "plan": None,
        "error": entry.get("error"),
        "notes": [],
        "deployments": [],
        "features": None,
        "serve": dict(entry.get("serve") or {}),
    }
    if out["error"]:
        return out
    facts = entry.get("facts") or {}
    with_gpus = [h for h in out["hosts"] if (facts.get(h) or {}).get("present")]
    if not with_gpus:
        states = sorted({str((facts.get(h) or {}).get("state") or "no facts") for h in out["hosts"]})
        out["error"] = (
            f"no GPU facts for any host of {out['group']} ({', '.join(states) or 'the group is empty'}): "
            "run with fleet_plan_facts_source=live, or gather them once (ansible-playbook playbooks/plan.yml "
            "-e fleet_plan_facts_source=live) so the fact cache has them"
        )
        return out
    out["facts_host"] = with_gpus[0]
    names = {h: tuple(sorted(((facts[h].get("models")) or {}).items())) for h in with_gpus}
    if len(set(names.values())) > 1:
        out["notes"].append(
            f"hosts of {out['group']} differ in GPUs; planned on {with_gpus[0]}: "
            + "; ".join(f"{h}: {dict(v)}" for h, v in names.items())
        )
    try:
        gpu = gpu_spec(facts[with_gpus[0]], int(entry.get("nodes") or 1), bool(entry.get("shared")))
        if entry.get("gpu_count"):
            gpu = {**gpu, "count": int(entry["gpu_count"])}
        out["gpu"] = gpu
        if not entry.get("config"):
            raise ValueError("no config.json for this model")
        out["features"] = serve_features(entry)
        options = _options(entry, out["features"])
        spec = options.get("speculative")
        if isinstance(spec, Mapping) and spec.get("model") and "speculative_draft_config" not in options:
            # the head's or draft's config.json is on the hosts only: the plan goes without the drafter
            options.pop("speculative")
            out["notes"].append(
                f"speculative {spec.get('method')}: the drafter's config.json ({spec['model']}) was not "
                "read, so its weights and KV cache are not in this plan (the serve stage counts them)"
            )
        out["inputs"]["options"] = options
        plan = planner(entry["config"], gpu, options, entry.get("index"), entry.get("weights_bytes"))
    except ValueError as exc:
        out["error"] = str(exc)
        return out
    out["plan"] = plan
    from ..fleet_planner.options import GPU_FLAGS  # as in planner_command

    command, missing = planner_command(
        {k: v for k, v in gpu.items() if k in GPU_FLAGS or k in ("shared", "p2p")},
        options,
        entry.get("config_path"),
        entry.get("index_path"),
        entry.get("weights_bytes") if not entry.get("index_path") else None,
    )
    out["command"] = command
    if missing:
        out["notes"].append(
            "options without a vllm-fleet-plan flag (the command differs): " + ", ".join(missing)
        )
    if entry.get("index") is not None and not entry.get("index_path"):
        out["notes"].append("the safetensors index was read from a host; the command lacks it")
    out["deployments"] = _deployments(entry, plan)
    return out


def _options(entry: Mapping[str, Any], features: Mapping[str, Any] | None) -> dict[str, Any]:
    """The entry's planner options, merged by the serve stage's own function (fleet_serving/unit.py) from the
    layers normalize_entries and attach_inputs kept; an entry without them (built by hand) has its options
    as the model's own."""
    layers = entry.get("layers") or {
        "model": {"name": entry.get("model"), "overrides": entry.get("options") or {}},
        "release": {},
    }
    return unit_options(
        layers["model"],
        layers["release"],
        layers.get("group_options"),
        features,
        layers.get("lora"),
        layers.get("draft_config"),
        int(layers.get("group_members") or 0),
    )


# the vllm_server_models[] keys model_features reads
SERVE_KEYS = (
    "task",
    "tool_call_parser",
    "reasoning_parser",
    "chat_template",
    "speculative",
    "sleep",
    "kv_offload",
)


def serve_features(entry: Mapping[str, Any]) -> dict[str, Any] | None:
    """What the serve stage chooses for this model (model_features): task, parsers, chat template, flags
    and why, or ``{"error": ...}`` when it would refuse the entry; None without a config.json."""
    config = entry.get("config")
    if not isinstance(config, Mapping):
        return None
    options = entry.get("options") or {}
    version = str(options.get("vllm_version") or DEFAULT_VLLM_VERSION)
    try:
        return model_features(
            config, entry.get("tokenizer_config"), entry.get("serve") or {}, version, str(entry.get("model"))
        )
    except ServingError as exc:
        return {"error": str(exc)}


def features_text(features: Mapping[str, Any] | None, plan: Mapping[str, Any] | None) -> list[str]:
    """One line per choice the serve stage makes for the model, each with its reason."""
    if not features:
        return []
    if features.get("error"):
        return [f"the serve stage refuses it: {features['error']}"]
    why = features.get("reasons") or {}
    lines = [f"task {features.get('task')} ({why.get('task', '')})"]
    if features.get("task") == "generate":
        for key in ("tool_call_parser", "reasoning_parser"):
            label = key.replace("_", " ").replace("tool call", "tool-call")
            lines.append(f"{label} {features.get(key) or 'none'} ({why.get(key, '')})")
    else:
        flags = " ".join(a for a in features.get("args") or [] if not a.startswith("{"))
        lines.append(f"pooling {flags} ({why.get('runner', '')})")
        pooling = (plan or {}).get("pooling") or {}
        if pooling:
            kv = "a KV cache" if pooling.get("kv_cache") else "NO KV cache"
            lines.append(f"vLLM reserves {kv}: {pooling.get('why')}")
    lines.append(f"chat template {features.get('chat_template') or 'own'} ({why.get('chat_template', '')})")
    if why.get("sleep"):
        lines.append(why["sleep"])
    spec = (plan or {}).get("speculative") or {}
    if spec:
        lines.append(
            f"speculative {spec.get('method')} x{spec.get('num_speculative_tokens')}: drafter "
            f"{_gib(spec.get('draft_weights_bytes_per_gpu'))} GiB/GPU of weights, "
            f"{spec.get('draft_layers')} KV layer(s); KV tokens "
            f"{_num(spec.get('kv_cache_tokens_without_draft'))} -> {_num(spec.get('kv_cache_tokens'))} "
            f"({spec.get('why')})"
        )
    return lines


def offload_text(setting: Any, plan: Mapping[str, Any] | None) -> str | None:
    """The KV-cache tier in host RAM of a model (kv_offload), as vLLM splits it over the TP ranks."""
    size = setting.get("size", "auto") if isinstance(setting, Mapping) else setting
    if size in (None, False, 0):
        return None
    tp = int((plan or {}).get("tensor_parallel_size") or 1)
    if size == "auto":
        return f"KV tier in host RAM: auto (sized on the host from its RAM), split over {tp} TP rank(s)"
    return f"KV tier in host RAM: {size} GiB, {float(size) / tp:.2f} GiB per TP rank of {tp}"


def build_report(entries: list[Mapping[str, Any]], planner: Planner, gpu_spec: GpuSpec) -> dict[str, Any]:
    planned = [build_entry(e, planner, gpu_spec) for e in entries]
    return {
        "schema": REPORT_SCHEMA,
        "entries": planned,
        "summary": {
            "entries": len(planned),
            "feasible": sum(1 for e in planned if e["plan"] and e["plan"].get("feasible")),
            "infeasible": sum(1 for e in planned if e["plan"] and not e["plan"].get("feasible")),
            "errors": sum(1 for e in planned if e["error"]),
            "deployments_compared": sum(1 for e in planned for d in e["deployments"] if d["comparison"]),
        },
    }


def _gib(n: Any) -> str:
    return "-" if not isinstance(n, (int, float)) else f"{n / GIB:.2f}"


def _num(n: Any) -> str:
    if isinstance(n, bool) or n is None:
        return "-"
    if isinstance(n, float):
        return f"{n:,.2f}"
    if isinstance(n, int):
        return f"{n:,}"
    return str(n)


def _gpu_text(gpu: Mapping[str, Any] | None) -> str:
    if not gpu:
        return "-"
    nodes = int(gpu.get("nodes") or 1)
    text = f"{gpu.get('count')}x {gpu.get('name')} ({round(int(gpu.get('memory_mib') or 0) / 1024)} GiB)"
    return text + (f" x{nodes} nodes" if nodes > 1 else "")


def _given_args_text(plan: Mapping[str, Any]) -> str:
    """What vLLM does with only the configured arguments (the plan's vllm_with_given_args), in one line;
    named apart from the recommended launch so the two are not mistaken for each other."""
    own = plan.get("vllm_with_given_args") or plan.get("vllm_defaults")
    if not isinstance(own, Mapping):
        return ""
    text = (
        f"vLLM with only the configured args: max_model_len {_num(own.get('max_model_len'))}, max_num_seqs "
        f"{_num(own.get('max_num_seqs'))}, max_num_batched_tokens {_num(own.get('max_num_batched_tokens'))}: "
    )
    if own.get("starts"):
        return text + f"starts, {_num(own.get('kv_cache_tokens'))} KV tokens"
    return text + f"FAILS TO START ({own.get('error')})"


def render(report: Mapping[str, Any]) -> str:
    """The plan table, the plan-vs-actual table, then errors, warnings and notes."""
    headers = [
        "GROUP",
        "MODEL",
        "GPUS",
        "TP",
        "PP",
        "MAX_LEN",
        "SEQS",
        "GMU",
        "WEIGHTS",
        "KV",
        "KV TOKENS",
        "CONC",
        "STATUS",
    ]
    rows = []
    notes: list[str] = []
    for e in report["entries"]:
        plan = e.get("plan")
        tag = f"{e['group']}/{e['model']}"
        if plan is None:
            rows.append([e["group"], e["model"], _gpu_text(e.get("gpu"))] + ["-"] * 9 + ["ERROR"])
            notes.append(f"ERROR {tag}: {e.get('error')}")
            continue
        g = plan.get("per_gpu") or {}
        rows.append(
            [
                e["group"],
                e["model"],
                _gpu_text(e.get("gpu")),
                plan.get("tensor_parallel_size"),
                plan.get("pipeline_parallel_size"),
                _num(plan.get("max_model_len")),
                _num(plan.get("max_num_seqs")),
                plan.get("gpu_memory_utilization"),
                _gib(g.get("weights_bytes")),
                _gib(g.get("kv_cache_bytes")),
                _num(plan.get("kv_cache_tokens")),
                _num(plan.get("max_concurrency")),
                "ok" if plan.get("feasible") else "INFEASIBLE",
            ]
        )
        notes += [f"ERROR {tag}: {m}" for m in plan.get("errors") or []]
        notes += [f"warning {tag}: {m}" for m in plan.get("warnings") or []]
        notes += [f"note {tag}: {m}" for m in e.get("notes") or []]
        notes += [f"serve {tag}: {line}" for line in features_text(e.get("features"), plan)]
        tier = offload_text((e.get("serve") or {}).get("kv_offload"), plan)
        if tier:
            notes.append(f"serve {tag}: {tier}")
        own = _given_args_text(plan)
        if own:
            notes.append(f"not the plan {tag}: {own}")
    parts = [
        "Plan per GPU group and model: the RECOMMENDED launch (TP, PP, MAX_LEN, SEQS and GMU are the plan's "
        "vllm serve args, not vLLM's defaults; WEIGHTS and KV: GiB per GPU; CONC: requests at MAX_LEN the KV "
        "cache holds). 'not the plan' lines: what vLLM does with only the configured args",
        render_table(headers, rows, align="lllrrrrrrrrrl"),
    ]
    compared = []
    for e in report["entries"]:
        for d in e.get("deployments") or []:
            if not d["comparison"]:
                notes.append(f"note {e['group']}/{e['model']} on {d['host']}: {d['note']}")
            for c in d["comparison"]:
                scale = GIB if c["key"] in ("kv_cache_bytes", "weights_bytes") else None
                pred = _gib(c["predicted"]) if scale else _num(c["predicted"])
                act = _gib(c["actual"]) if scale else _num(c["actual"])
                err = "-" if c["error_pct"] is None else f"{c['error_pct']:+.1f}%"
                compared.append(
                    [
                        e["group"],
                        e["model"],
                        d["host"],
                        c["figure"],
                        pred,
                        act,
                        err,
                        c["predicted_from"] or "-",
                    ]
                )
    if compared:
        parts += [
            "",
            "Plan vs actual (vLLM's startup log on the deployed hosts; error = (predicted - actual) / "
            "actual)",
            render_table(
                ["GROUP", "MODEL", "HOST", "FIGURE", "PREDICTED", "ACTUAL", "ERROR", "PREDICTED FROM"],
                compared,
                align="llllrrrl",
            ),
        ]
    if notes:
        parts += [""] + notes
    s = report.get("summary") or {}
    parts += [
        "",
        f"{s.get('entries', 0)} planned: {s.get('feasible', 0)} feasible, {s.get('infeasible', 0)} "
        f"infeasible, {s.get('errors', 0)} without a plan; {s.get('deployments_compared', 0)} deployments "
        "compared with vLLM's figures",
    ]
    return "\n".join(parts)


# --- assembling the entries -------------------------------------------------------------------

ENTRY_KEYS = {
    "name",
    "group",
    "config",
    "model_path",
    "safetensors_index",
    "weights_bytes",
    "options",
    "nodes",
    "shared",
    "gpus",
    "repo_id",
    "revision",
    "serve",
    "adapters",
    "image",
}


def _abs(path: str | None, base: str) -> str | None:
    if not path:
        return None
    path = str(path)
    return path if path.startswith("/") else f"{base.rstrip('/')}/{path}"


def normalize_entries(
    models: list[Mapping[str, Any]] | None,
    gpu_groups: Mapping[str, list[str]],
    hostvars: Mapping[str, Mapping[str, Any]],
    settings: Mapping[str, Any],
) -> list[dict[str, Any]]:
    """The (group, model) entries to plan, with where each one's metadata is read from.

    ``models``: ``fleet_plan_models``; when empty, every model in ``vllm_server_models`` of
    the hosts of each GPU group (read from its ``path`` on the group's first host).
    ``gpu_groups``: group -> hosts. ``hostvars``: per host ``vllm_server_models``,
    ``vllm_server_vllm_version``, ``vllm_server_plan_options``, ``model_weights_root``,
    ``model_weights_writer_host``. ``settings``: ``config_dir`` (base of relative paths),
    ``vllm_version`` (when a host sets none), ``serving_groups`` (``vllm_fleet_serving_groups``:
    such a group is planned as one replica over all its hosts).

    Each entry: ``name``, ``group``, ``hosts``, ``config_path``/``index_path`` (control
    node) or ``read_host``/``read_dir`` (a host's folder holding config.json), ``weights_bytes``,
    ``options`` (vllm_version and vllm_server_plan_options of the group, then the entry's, and
    ``model_name``), ``nodes``, ``shared``, ``gpu_count``, ``error``.
    """
    base = str(settings.get("config_dir") or ".")
    if not models:
        models = []
        for group in sorted(gpu_groups):
            seen: set[str] = set()
            for host in gpu_groups[group]:
                for served in (hostvars.get(host) or {}).get("vllm_server_models") or []:
                    if served.get("name") in seen:
                        continue
                    seen.add(served.get("name"))
                    models.append(
                        {
                            "name": served.get("name"),
                            "group": group,
                            "image": served.get("image"),
                            "model_path": served.get("path"),
                            "options": served.get("overrides") or {},
                            "gpus": len(served.get("gpus") or []) or None,
                            "serve": {k: served[k] for k in SERVE_KEYS if k in served},
                            "adapters": served.get("adapters") or [],
                        }
                    )
    entries = []
    for model in models:
        entry: dict[str, Any] = {
            "name": model.get("name"),
            "group": model.get("group"),
            "hosts": [],
            "config_path": None,
            "index_path": None,
            "read_host": None,
            "read_dir": None,
            "read_ref": None,
            "weights_bytes": model.get("weights_bytes"),
            "options": {},
            "nodes": int(model.get("nodes") or 1),
            "shared": bool(model.get("shared")),
            "gpu_count": int(model.get("gpus")) if model.get("gpus") else None,
            "serve": dict(model.get("serve") or {}),
            "draft_dir": None,
            "adapters": [],
            "overrides": dict(model.get("options") or {}),
            "error": None,
        }
        entries.append(entry)
        unknown = sorted(set(model) - ENTRY_KEYS)
        if unknown or not entry["name"] or not entry["group"]:
            entry["error"] = f"fleet_plan_models entry {dict(model)!r}: needs name and group" + (
                f"; unknown keys {', '.join(unknown)} (known: {', '.join(sorted(ENTRY_KEYS))})"
                if unknown
                else ""
            )
            continue
        hosts = list(gpu_groups.get(entry["group"]) or [])
        entry["hosts"] = hosts
        if not hosts:
            entry["error"] = (
                f"group {entry['group']} has no hosts in this inventory (GPU groups: "
                f"{', '.join(sorted(gpu_groups)) or 'none'}): fix fleet_plan_models[{entry['name']}].group"
            )
            continue
        first = hostvars.get(hosts[0]) or {}
        spec = entry["serve"].get("speculative")
        if isinstance(spec, Mapping) and spec.get("model"):
            # the EAGLE head's or draft model's config.json, read on the group's first host
            entry["draft_dir"] = str(spec["model"]).rstrip("/")
        # the layers vllm_server merges (fleet_serving/unit.py); attach_inputs adds the adapters', drafter's
        served = {"name": entry["name"], "image": model.get("image"), "overrides": model.get("options") or {}}
        try:
            release = image_version(
                served,
                role_value(first, "vllm_server_image"),
                first.get("vllm_server_vllm_version") or settings.get("vllm_version"),
            )
        except ValueError as exc:
            entry["error"] = str(exc)
            continue
        entry["layers"] = {
            "model": served,
            "release": release,
            "group_options": first.get("vllm_server_plan_options"),
            "group_members": 0,
        }
        if model.get("adapters"):
            # the adapters' adapter_config.json (read on the group's first host) size LoRA as vllm_server does
            try:
                entry["adapters"] = lora.adapters(
                    [{"name": entry["name"], "adapters": model["adapters"]}], _weights_root(first)
                )
            except ServingError as exc:
                entry["error"] = str(exc)
                continue
        if entry["group"] in _serving_group_names(settings.get("serving_groups")) and not model.get("nodes"):
            # a serving group is one replica over its hosts: one pipeline stage per host
            entry["nodes"] = len(hosts)
            entry["layers"]["group_members"] = len(hosts)
        try:
            entry["options"] = unit_options(**entry["layers"])
        except ValueError as exc:
            entry["error"] = str(exc)
            continue
        if model.get("config"):
            entry["config_path"] = _abs(model["config"], base)
            entry["index_path"] = _abs(model.get("safetensors_index"), base)
        elif model.get("model_path"):
            entry["read_host"], entry["read_dir"] = hosts[0], str(model["model_path"]).rstrip("/")
        elif model.get("repo_id") and model.get("revision"):
            root = _weights_root(first)
            entry["read_host"] = first.get("model_weights_writer_host") or hosts[0]
            base = f"{str(root).rstrip('/')}/{model['repo_id']}"
            entry["read_dir"] = f"{base}/{model['revision']}"
            entry["read_ref"] = f"{base}/refs/{str(model['revision']).replace('/', '%2F')}"
        else:
            entry["error"] = (
                f"fleet_plan_models[{entry['name']}] has no model metadata: set config (a config.json on the "
                "control node), model_path (a folder on the group's hosts) or repo_id + revision (the "
                "model_weights layout)"
            )
    return entries


def _weights_root(hostvars: Mapping[str, Any]) -> str:
    """Where a host keeps the model_weights layout (models and adapters): its model_weights_root, else
    that role's default (the fleet's vllm_fleet_models_root as the host has it)."""
    return str(role_value(hostvars, "model_weights_root"))


def _serving_group_names(spec: Any) -> set[str]:
    """The groups ``vllm_fleet_serving_groups`` names (entries a name or ``{group, ...}``)."""
    if not isinstance(spec, list):
        return set()
    return {str(e.get("group") if isinstance(e, Mapping) else e) for e in spec if e}


def follow_refs(entries: list[Mapping[str, Any]], answers: list[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Point entries at the revision folder a branch or tag resolved to.

    The model_weights role keeps ``<root>/<org>/<name>/refs/<revision>`` holding the immutable
    revision a branch or tag resolved to; ``answers`` are ``ansible.builtin.slurp`` results of those
    files (``item`` is the entry, ``content`` base64), or of an adapter's ref (``item`` is ``[entry,
    adapter]``). Entries and adapters without a readable ref are unchanged.
    """
    resolved: dict[tuple[Any, ...], str] = {}
    for answer in answers:
        item = answer.get("item") or {}
        if answer.get("content"):
            text = base64.b64decode(answer["content"]).decode("utf-8", "replace").strip()
            if isinstance(item, list) and len(item) == 2:
                resolved[(item[0].get("group"), item[0].get("name"), item[1].get("name"))] = text
            elif text and "/" not in text:
                resolved[(item.get("group"), item.get("name"))] = text
    out = []
    for entry in entries:
        entry = dict(entry)
        target = resolved.get((entry.get("group"), entry.get("name")))
        if target and entry.get("read_dir"):
            entry["read_dir"] = f"{entry['read_dir'].rsplit('/', 1)[0]}/{target}"
        if entry.get("adapters"):
            key = (entry.get("group"), entry.get("name"))
            commits = [resolved.get((*key, adapter["name"])) for adapter in entry["adapters"]]
            entry["adapters"] = lora.resolve(entry["adapters"], commits)
        out.append(entry)
    return out


def _json(text: Any) -> Any:
    if text in (None, ""):
        return None
    if isinstance(text, (dict, list)):
        return text
    return json.loads(text)


def _tokenizer_config(got: Mapping[str, Any]) -> dict[str, Any] | None:
    """tokenizer_config.json with a separate chat_template.jinja as its chat_template, as the serve stage
    reads them; an unreadable file counts as absent (it only informs the parser choice)."""
    try:
        tok = _json(got.get("tokenizer_config"))
    except ValueError:
        tok = None
    tok = dict(tok) if isinstance(tok, Mapping) else {}
    if got.get("chat_template"):
        tok["chat_template"] = str(got["chat_template"])
    return tok or None


def lora_launch(entry: Mapping[str, Any], configs: Any, options: Mapping[str, Any]) -> dict[str, Any]:
    """The LoRA launch vllm_server gives the model's adapters (its ``options``: max_loras, max_lora_rank),
    for the release ``options`` name. ``configs``: adapter name -> its adapter_config.json text."""
    adapters = list(entry.get("adapters") or [])
    configs = [dict(configs or {}).get(a["name"]) for a in adapters]
    missing = [a for a, c in zip(adapters, configs, strict=True) if not c]
    if missing:
        raise ServingError(
            f"cannot read adapter_config.json of {', '.join(a['name'] for a in missing)} "
            f"({', '.join(a['path'] for a in missing)}): download the adapters first (playbooks/weights.yml) "
            f"or fix vllm_server_models[{entry.get('name')}].adapters"
        )
    return lora.launch(adapters, configs, options.get("vllm_version"))[str(entry.get("name"))]


def attach_inputs(
    entries: list[Mapping[str, Any]],
    files: Mapping[str, Any],
    facts: Mapping[str, Any],
    deployed: Mapping[str, Any],
    facts_source: str,
) -> list[dict[str, Any]]:
    """Entries ready for :func:`build_report`.

    ``files``: entry index (as a string) -> ``{config, index, hf_quant_config, tokenizer_config,
    chat_template, draft_config, adapter_configs, config_path, index_path, error}`` (``adapter_configs``:
    adapter name -> its adapter_config.json): texts read on the control node or
    from a host (a read from a host is saved on the control node by the playbook; the saved paths come as
    ``config_path`` and ``index_path``). A ``hf_quant_config.json`` beside the config is merged the way
    ``vllm-fleet-plan`` merges it. ``facts``/``deployed``: host -> nvidia_gpu / vllm_fleet facts.
    """
    out = []
    for pos, entry in enumerate(entries):
        item: dict[str, Any] = {
            "group": entry.get("group"),
            "model": entry.get("name"),
            "hosts": list(entry.get("hosts") or []),
            "facts": {h: facts.get(h) for h in entry.get("hosts") or []},
            "facts_source": facts_source,
            "deployed": {h: deployed.get(h) for h in entry.get("hosts") or []},
            "options": dict(entry.get("options") or {}),
            "nodes": entry.get("nodes"),
            "shared": entry.get("shared"),
            "gpu_count": entry.get("gpu_count"),
            "weights_bytes": entry.get("weights_bytes"),
            "serve": dict(entry.get("serve") or {}),
            "error": entry.get("error"),
        }
        out.append(item)
        if item["error"]:
            continue
        got = files.get(str(pos)) or files.get(pos) or {}
        where = entry.get("config_path") or f"{entry.get('read_host')}:{entry.get('read_dir')}/config.json"
        try:
            config = _json(got.get("config"))
            index = _json(got.get("index"))
            quant = _json(got.get("hf_quant_config"))
        except ValueError as exc:
            item["error"] = f"{where}: not valid JSON ({exc})"
            continue
        if not isinstance(config, dict):
            item["error"] = f"cannot read {where}: {got.get('error') or 'missing'}"
            continue
        if quant is not None and "quantization_config" not in config:
            config = {**config, "hf_quant_config": quant}
        item["tokenizer_config"] = _tokenizer_config(got)
        try:
            draft = _json(got.get("draft_config"))
        except ValueError:
            draft = None  # the plan then goes without the drafter, with a note
        layers = dict(entry.get("layers") or {})
        if isinstance(draft, dict):
            layers["draft_config"] = draft
        if entry.get("adapters"):
            try:
                layers["lora"] = lora_launch(entry, got.get("adapter_configs"), item["options"])
            except ServingError as exc:
                item["error"] = str(exc)
                continue
        if layers:
            item["layers"] = layers
        item.update(
            config=config,
            config_path=got.get("config_path") or entry.get("config_path"),
            index=index,
            index_path=(got.get("index_path") or entry.get("index_path")) if index is not None else None,
        )
    return out
