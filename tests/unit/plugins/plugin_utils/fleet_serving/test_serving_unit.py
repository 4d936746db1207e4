"""fleet_serving/unit.py: a served model's planner options merged in one place, and its container."""

from __future__ import annotations

import pytest
from ansible_collections.vllm_fleet.vllm_fleet.plugins.filter.vllm_serving_unit_record import unit_record
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_serving.deploy import (
    ServingError,
    record_spec,
)
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_serving.unit import (
    GROUP_KEYS,
    unit_options,
    unit_spec,
)

RELEASE = {"image": "vllm/vllm-openai:v0.32.0", "vllm_version": "0.32.0"}


def test_a_later_layer_wins_and_the_model_overrides_everything_the_serve_stage_sized():
    model = {"name": "m", "overrides": {"max_loras": 2, "max_model_len": 4096}}
    options = unit_options(
        model,
        RELEASE,
        {"max_model_len": 8192, "workload": "batch", "runner": "generate"},
        {"plan_options": {"runner": "pooling", "convert": "embed"}},
        {"options": {"max_loras": 8, "max_lora_rank": 64}},
        {"architectures": ["EagleLlamaForCausalLM"]},
    )
    assert options == {
        "vllm_version": "0.32.0",
        "max_model_len": 4096,  # the model's own over the group's
        "workload": "batch",
        "runner": "pooling",  # the serve stage's task over the group's
        "convert": "embed",
        "max_loras": 2,  # the model's own over the LoRA sizing
        "max_lora_rank": 64,
        "speculative_draft_config": {"architectures": ["EagleLlamaForCausalLM"]},
        "model_name": "m",
    }


def test_a_serving_group_is_one_pipeline_stage_per_member_unless_a_layer_splits_it():
    assert unit_options({"name": "m"}, RELEASE, group_members=2)["pipeline_parallel_size"] == 2
    assert "pipeline_parallel_size" not in unit_options({"name": "m"}, RELEASE)
    split = unit_options({"name": "m", "overrides": {"pipeline_parallel_size": 1}}, RELEASE, group_members=2)
    assert split["pipeline_parallel_size"] == 1


def test_a_null_unsets_a_group_option_and_a_bad_layer_is_named():
    assert "enforce_eager" not in unit_options(
        {"name": "m", "overrides": {"enforce_eager": None}}, RELEASE, {"enforce_eager": True}
    )
    with pytest.raises(ServingError, match=r"vllm_server_models\[m\]: overrides must be a mapping"):
        unit_options({"name": "m", "overrides": ["max_model_len"]}, RELEASE)


SETTINGS = {
    "listen_address": "10.0.0.5",
    "network_mode": "host",
    "ipc_mode": "host",
    "container_prefix": "vllm-",
    "stop_timeout": 60,
    "env": {"FLEET": "1", "X": "fleet"},
    "gpu_requests": True,
    "gpu_request_driver": "nvidia",
    "ready_timeout": {"base": 300, "per_gib": 15.0, "max": 3600},
    "lab_sleep_without_sleep_mode": False,
}
UNIT = {"name": "org/m", "key": "org/m", "model_index": 0, "path": "/srv/models/org/m/abc", "port": 8000}
PARTS = {
    "plan": {"vllm_args": ["--tensor-parallel-size", "2", "--max-model-len", "4096"], "max_model_len": 4096},
    "release": RELEASE,
    "gpus": [2, 3],
    "weights_bytes": 16 * 2**30,
    "features": {
        "task": "generate",
        "args": ["--enable-sleep-mode"],
        "env": {"X": "features"},
        "sleep_level": 1,
    },
}


def test_the_container_of_a_model():
    spec = unit_spec({**UNIT, "env": {"X": "model"}}, PARTS, SETTINGS)
    assert spec["container"] == "vllm-org-m" and spec["image"] == RELEASE["image"]
    assert spec["command"][:7] == [
        "/srv/models/org/m/abc",
        "--served-model-name",
        "org/m",
        "--host",
        "10.0.0.5",
        "--port",
        "8000",
    ]
    assert "--enable-sleep-mode" in spec["command"] and "--tensor-parallel-size" in spec["command"]
    assert (
        spec["env"]["X"] == "model" and spec["env"]["FLEET"] == "1" and spec["env"]["HF_HUB_OFFLINE"] == "1"
    )
    assert "NVIDIA_VISIBLE_DEVICES" not in spec["env"]  # Docker's device requests pick the GPUs
    assert spec["device_requests"] == [
        {"driver": "nvidia", "device_ids": ["2", "3"], "capabilities": [["gpu"]]}
    ]
    assert spec["ready_timeout"] == 300 + 15 * 16 and spec["url"] == "http://10.0.0.5:8000"
    assert spec["plan"] == {"max_model_len": 4096}


def test_what_changes_the_configuration_hash():
    base = unit_spec(UNIT, PARTS, SETTINGS)["config_hash"]
    assert unit_spec(UNIT, PARTS, {**SETTINGS, "env": {"FLEET": "2"}})["config_hash"] != base
    assert unit_spec(UNIT, PARTS, {**SETTINGS, "ipc_mode": "private"})["config_hash"] != base
    assert unit_spec(UNIT, {**PARTS, "weights_bytes": 1}, SETTINGS)["config_hash"] == base  # only the timeout


def test_without_device_requests_cdi_mig_sleep_and_the_lab_switch():
    plain = unit_spec(UNIT, PARTS, {**SETTINGS, "gpu_requests": False})
    assert plain["device_requests"] == [] and plain["env"]["NVIDIA_VISIBLE_DEVICES"] == "2,3"
    cdi = unit_spec(UNIT, PARTS, {**SETTINGS, "gpu_request_driver": "cdi"})
    assert cdi["device_requests"] == [
        {"driver": "cdi", "device_ids": ["nvidia.com/gpu=2", "nvidia.com/gpu=3"]}
    ]
    mig = {"gpu": 0, "uuid": "MIG-1234", "profile": "3g.40gb", "device": 1}
    on_mig = unit_spec({**UNIT, "mig_target": mig}, PARTS, {**SETTINGS, "gpu_requests": False})
    assert on_mig["gpus"] == [0] and on_mig["env"]["NVIDIA_VISIBLE_DEVICES"] == "MIG-1234"
    backend = {"host": "127.0.0.1", "port": 18000, "url": "http://127.0.0.1:18000"}
    asleep = unit_spec(UNIT, {**PARTS, "sleep_backend": backend}, SETTINGS)
    assert asleep["command"][3:7] == ["--host", "127.0.0.1", "--port", "18000"]
    assert (
        asleep["url"] == "http://10.0.0.5:8000"
    )  # clients still reach it on its port, through the controller
    lab = unit_spec(UNIT, PARTS, {**SETTINGS, "lab_sleep_without_sleep_mode": True})
    assert "--enable-sleep-mode" not in lab["command"]


IMAGES = [
    {"Id": "sha256:abc", "RepoTags": [RELEASE["image"]], "RepoDigests": ["vllm/vllm-openai@sha256:def"]}
]
READY = {
    "kv_cache": {"kv_cache_tokens": 1000},
    "ready_seconds": 30.0,
    "completion_seconds": 0.2,
    "ttft_seconds": 0.1,
}


def test_a_record_reads_back_as_the_spec_it_was_made_from():
    spec = unit_spec(UNIT, {**PARTS, "plan": {**PARTS["plan"], "kv_cache_tokens": 1100}}, SETTINGS)
    record = unit_record(spec, IMAGES, READY, "0.31.0")
    assert (record["image_id"], record["image_digests"]) == ("sha256:abc", ["vllm/vllm-openai@sha256:def"])
    assert record["baseline"] == {"ready_seconds": 30.0, "completion_seconds": 0.2, "ttft_seconds": 0.1}
    assert record["plan_vs_actual"]["kv_cache_tokens"]["actual"] == 1000
    assert (
        record["vllm_version"] == "0.32.0" and record["task"] == "generate" and record["serving_group"] == {}
    )
    back = record_spec(record)
    for key in ("container", "image", "command", "env", "device_requests", "gpus", "port", "config_hash"):
        assert back[key] == spec[key], key
    other = unit_record(spec, [{**IMAGES[0], "Id": "sha256:new"}], READY, "0.31.0")
    assert other["version"] != record["version"]  # the same spec on another image is another version


def test_a_serving_group_members_record_keeps_its_group():
    spec = {
        **unit_spec(UNIT, PARTS, SETTINGS),
        "group": "pair",
        "members": ["g1", "g2"],
        "rank": 1,
        "role": "follower",
        "backend": "mp",
        "rendezvous": "10.0.0.5:29501",
        "url": "",
    }
    record = unit_record(spec, IMAGES, {}, "0.32.0")
    assert record["serving_group"] == {
        "name": "pair",
        "members": ["g1", "g2"],
        "rank": 1,
        "role": "follower",
        "backend": "mp",
        "rendezvous": "10.0.0.5:29501",
    }
    keys = ("group", *GROUP_KEYS)
    assert {k: record_spec(record)[k] for k in keys} == {k: spec[k] for k in keys}
