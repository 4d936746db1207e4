"""fleet_serving/host_units.py: a host's serving units built in one call from what the module read."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_serving.host_units import host_units

ROOT = Path(__file__).resolve().parents[5]
QWEN06 = json.loads((ROOT / "tests/data/model-configs/Qwen__Qwen3-0.6B/config.json").read_text())
QWEN8 = json.loads((ROOT / "tests/data/model-configs/Qwen__Qwen3-8B/config.json").read_text())
COMMIT = "c" * 40
H100X2 = {
    "present": True,
    "count": 2,
    "gpus": [
        {"index": i, "name": "NVIDIA H100 80GB HBM3", "memory_total_mib": 81559, "compute_capability": "9.0"}
        for i in range(2)
    ],
}
SETTINGS: dict[str, Any] = {
    "host": "gpu1",
    "image": "vllm/vllm-openai:v0.32.0",
    "vllm_version": "0.32.0",
    "plan_options": {},
    "adapters_root": "/srv/models",
    "group": {},
    "group_gpu": {},
    "shm_size": None,
    "sleep": {
        "listen_address": "10.0.0.5", "network_mode": "host", "controller_port": 8099, "backend_offset": 1000,
        "idle_seconds": 300, "wake_timeout": 600, "container": "vllm-sleepd", "dir": "/etc/vllm-fleet/sleepd",
        "serving_group": False,
    },
    "unit": {
        "listen_address": "10.0.0.5", "network_mode": "host", "ipc_mode": "host", "container_prefix": "vllm-",
        "stop_timeout": 60, "env": {}, "gpu_requests": True, "gpu_request_driver": "nvidia",
        "ready_timeout": {"base": 300, "per_gib": 15.0, "max": 3600}, "lab_sleep_without_sleep_mode": False,
    },
}  # fmt: skip
MODELS = [
    {"name": "small", "path": "/srv/models/Qwen/Qwen3-0.6B/main", "port": 8000},
    {"name": "big", "path": f"/srv/models/Qwen/Qwen3-8B/{COMMIT}", "port": 8001,
     "adapters": [{"name": "task", "repo": "acme/task", "revision": "v1"}]},
]  # fmt: skip


def _read(config: dict[str, Any], path: str, **extra: Any) -> dict[str, Any]:
    read = {"path": path, "config": config, "tokenizer_config": {}, "index": None, "draft_config": None}
    return {**read, "weights_bytes": 16 * 2**30, "errors": {}, **extra}


def _files(**changes: Any) -> dict[str, Any]:
    files = {
        "models": [
            _read(QWEN06, f"/srv/models/Qwen/Qwen3-0.6B/{COMMIT}", name="small", revision=COMMIT,
                  requested_revision="main", weights_bytes=2**30),
            _read(QWEN8, MODELS[1]["path"], name="big"),
        ],
        "adapters": [
            {"model": "big", "name": "task", "repo": "acme/task", "revision": "v1",
             "path": f"/srv/models/acme/task/{COMMIT}", "ref": "/srv/models/acme/task/refs/v1",
             "resolved_revision": COMMIT, "config": json.dumps({"r": 16, "peft_type": "LORA"}), "errors": {}},
        ],
    }  # fmt: skip
    files.update(changes)
    return files


def test_each_model_gets_its_revision_plan_gpus_and_container():
    units = host_units(MODELS, _files(), {"nvidia_gpu": H100X2, "memtotal_mb": 256000}, SETTINGS)
    assert (units["missing"], units["refusals"]) == ([], [])
    small, big = (next(s for s in units["specs"] if s["name"] == n) for n in ("small", "big"))
    # the branch is served from the commit it resolved to
    assert units["models"][0]["path"].endswith(COMMIT) and units["models"][0]["requested_revision"] == "main"
    assert f"/srv/models/Qwen/Qwen3-0.6B/{COMMIT}" in small["command"]
    # one GPU each, never the same one
    assert sorted(units["gpu_sets"].values()) == [[0], [1]]
    # the adapter's rank sized the big model's LoRA slots, in its plan and its command
    args = units["plans"]["big"]["vllm_args"]
    assert args[args.index("--max-lora-rank") + 1] == "16"
    assert big["command"][big["command"].index("--max-lora-rank") + 1] == "16"
    assert units["releases"]["big"] == {"image": "vllm/vllm-openai:v0.32.0", "vllm_version": "0.32.0"}
    assert units["sleep"] == {} and units["kv_offload"] == {}


def test_files_that_cannot_be_read_stop_it_before_any_plan_naming_the_input_and_the_fix():
    files = _files()
    files["models"][1] = {
        **files["models"][1],
        "config": None,
        "errors": {"config.json": f"{MODELS[1]['path']}/config.json: No such file or directory"},
    }
    files["adapters"][0] = {
        **files["adapters"][0],
        "config": None,
        "errors": {"adapter_config.json": "/srv/models/acme/task/cc: No such file or directory"},
    }
    units = host_units(MODELS, files, {"nvidia_gpu": H100X2}, SETTINGS)  # fmt: skip
    assert "plans" not in units and "specs" not in units
    model, adapter = units["missing"]
    assert model.startswith(f"{MODELS[1]['path']}/config.json cannot be read on gpu1 (")
    assert "Download the weights first (playbooks/weights.yml) or fix vllm_server_models[big].path" in model
    assert "fix vllm_server_models[big].adapters[task] (repo, revision or path)" in adapter


def test_a_plan_vllm_would_refuse_is_named_with_the_host_its_gpus_and_the_fix():
    tiny = {**H100X2, "count": 1, "gpus": [{**H100X2["gpus"][0], "memory_total_mib": 4096}]}
    big = {k: v for k, v in MODELS[1].items() if k != "adapters"}
    units = host_units(
        [big], _files(models=_files()["models"][1:], adapters=[]), {"nvidia_gpu": tiny}, SETTINGS
    )
    (refusal,) = units["refusals"]
    assert refusal.startswith("big cannot be served on gpu1 (1 x NVIDIA H100 80GB HBM3, GPUs any): ")
    assert refusal.endswith(
        "Set vllm_server_models[big].overrides, or vllm_server_plan_options, or serve it on larger GPUs."
    )
    assert "specs" not in units


def test_models_that_sleep_move_behind_the_controller():
    models = [{**m, "sleep": 1} for m in MODELS]
    units = host_units(models, _files(), {"nvidia_gpu": H100X2, "memtotal_mb": 256000}, SETTINGS)
    backends = units["sleep"]["backends"]
    assert {b["host"] for b in backends.values()} == {"127.0.0.1"}
    small = next(s for s in units["specs"] if s["name"] == "small")
    assert small["command"][small["command"].index("--port") + 1] == str(backends["small"]["port"])
