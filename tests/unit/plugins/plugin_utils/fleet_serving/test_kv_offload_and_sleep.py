"""A KV-cache tier in host RAM (kv_offload) and sleeping models (sleep), #28: the flags per release, the
sizing from the host's RAM, and the awake set against the GPU, with plans of real configs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_planner import plan
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_serving.deploy import ServingError
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_serving.kv_offload import (
    check_setting,
    docker_bytes,
    kv_offload,
)
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_serving.model_features import (
    model_features,
)
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_serving.platform import (
    problems as platform_problems,
)
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_serving.sleep import (
    awake_check,
    sleep_launch,
)

ROOT = Path(__file__).resolve().parents[4] / "data"
HELP = (ROOT / "vllm-release" / "0.32.0" / "serve-help.txt").read_text()
GIB = 1024**3
H100 = {"name": "NVIDIA H100 80GB HBM3", "memory_mib": 81559, "count": 1, "compute_capability": "9.0"}


def _config(name: str) -> dict[str, Any]:
    return json.loads((ROOT / "model-configs" / name / "config.json").read_text())


# --- kv_offload ---------------------------------------------------------------------------------------


def test_a_fixed_size_renders_the_native_flags_and_its_share_per_tp_rank() -> None:
    models = [{"name": "llama", "kv_offload": 64}]
    got = kv_offload(models, 512 * 1024, "0.32.0", {"llama": 16 * GIB}, {"llama": 4})["llama"]
    assert got["args"] == ["--kv-offloading-backend", "native", "--kv-offloading-size", "64"]
    assert got["per_rank_gib"] == 16.0 and "16.0 GiB per TP rank of 4" in got["why"]
    # the flags and their meaning (a total over the TP ranks) as 0.32.0's help prints them
    assert "--kv-offloading-backend {lmcache,native}" in HELP
    assert "total buffer size summed across all" in HELP


def test_outside_the_hosts_ipc_the_tier_must_fit_the_containers_shm() -> None:
    """The native tier lives in /dev/shm (it grew 4.03 GiB for a 4 GiB tier on the lent H100, vLLM 0.34)."""
    models = [{"name": "llama", "kv_offload": 4}]
    args = (models, 512 * 1024, "0.34.0", {"llama": 6 * GIB}, {"llama": 1})
    with pytest.raises(ServingError, match=r"vllm_server_shm_size gives 4.0 GiB .* at least 5g"):
        kv_offload(*args, shm_size="4g")
    assert kv_offload(*args, shm_size="5g")["llama"]["size_gib"] == 4
    assert kv_offload(*args)["llama"]["size_gib"] == 4  # the host's IPC namespace: the host's /dev/shm
    lmcache = [{"name": "llama", "kv_offload": {"size": 4, "backend": "lmcache"}}]
    assert kv_offload(lmcache, *args[1:], shm_size="64m")["llama"]["backend"] == "lmcache"


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("16g", 16 * GIB),
        ("512m", 512 * 1024**2),
        ("1GiB", GIB),
        ("2gb", 2 * GIB),
        (1073741824, GIB),
        ("64k", 65536),
    ],
)
def test_docker_sizes_are_read_as_docker_reads_them(text: object, size: int) -> None:
    assert docker_bytes(text) == size


def test_a_size_docker_cannot_read_is_named() -> None:
    with pytest.raises(ServingError, match="vllm_server_shm_size must be a Docker size.*'lots'"):
        docker_bytes("lots")


def test_auto_shares_what_the_os_the_page_cache_and_fixed_sizes_leave() -> None:
    models = [
        {"name": "a", "kv_offload": "auto"},
        {"name": "b", "kv_offload": "auto"},
        {"name": "c", "kv_offload": 20},
    ]
    weights = {"a": 16 * GIB, "b": 16 * GIB, "c": 8 * GIB}
    got = kv_offload(models, 256 * 1024, "0.32.0", weights, {"a": 1, "b": 2, "c": 1})
    # 256 - 25.6 (10% for the OS) - 40 (weights) - 20 (c) = 170.4 -> 85 GiB each
    assert got["a"]["size_gib"] == got["b"]["size_gib"] == 85
    assert got["b"]["per_rank_gib"] == 42.5 and got["c"]["size_gib"] == 20


def test_a_tier_the_host_cannot_hold_is_refused_with_the_figures() -> None:
    with pytest.raises(
        ServingError, match=r"host RAM 64 GiB - OS 8 GiB - weights in the page cache 16.0 GiB"
    ):
        kv_offload([{"name": "m", "kv_offload": 48}], 64 * 1024, "0.32.0", {"m": 16 * GIB}, {"m": 1})
    with pytest.raises(ServingError, match="gather facts first"):
        kv_offload([{"name": "m", "kv_offload": "auto"}], None, "0.32.0", {}, {})


def test_before_the_flags_native_is_refused_and_lmcache_goes_through_kv_transfer_config() -> None:
    assert "no --kv-offloading-backend" in (check_setting(32, "0.11.0", "v") or "")
    got = kv_offload(
        [{"name": "m", "kv_offload": {"size": 32, "backend": "lmcache"}}], 256 * 1024, "0.11.0", {}, {"m": 2}
    )["m"]
    assert got["args"][0] == "--kv-transfer-config" and "LMCacheConnectorV1" in got["args"][1]
    assert got["env"] == {"LMCACHE_MAX_LOCAL_CPU_SIZE": "16.0"}


def test_each_model_gets_the_flags_of_the_release_it_runs() -> None:
    """A model with its own older image: LMCache through --kv-transfer-config, and native refused, while its
    neighbour on the group's release gets the native flags."""
    models = [
        {"name": "old", "kv_offload": {"size": 8, "backend": "lmcache"}},
        {"name": "new", "kv_offload": 8},
    ]
    releases = {"old": {"vllm_version": "0.11.0"}, "new": {"vllm_version": "0.32.0"}}
    got = kv_offload(models, 256 * 1024, releases, {}, {"old": 1, "new": 1})
    assert got["old"]["args"][0] == "--kv-transfer-config" and got["old"]["env"]
    assert got["new"]["args"][:2] == ["--kv-offloading-backend", "native"] and got["new"]["env"] == {}
    with pytest.raises(ServingError, match="no --kv-offloading-backend"):
        kv_offload([{"name": "old", "kv_offload": 8}], 256 * 1024, releases, {}, {"old": 1})


@pytest.mark.parametrize("value", [-1, "lots", True, {"size": 8, "backend": "nvme"}])
def test_bad_values_are_named(value: Any) -> None:
    assert check_setting(value, "0.32.0", "vllm_server_models[m].kv_offload")


def test_models_without_a_tier_get_nothing() -> None:
    assert kv_offload([{"name": "m"}, {"name": "n", "kv_offload": False}], 1024, "0.32.0", {}, {}) == {}


# --- sleep ------------------------------------------------------------------------------------------


def test_sleep_turns_on_sleep_mode_and_the_dev_mode_endpoints() -> None:
    assert sleep_launch(1, "0.32.0", "v") == {
        "args": ["--enable-sleep-mode"],
        "env": {"VLLM_SERVER_DEV_MODE": "1"},
        "level": 1,
    }
    assert "--enable-sleep-mode, --no-enable-sleep-mode" in HELP
    assert sleep_launch(None, "0.32.0", "v") == {}
    with pytest.raises(ServingError, match="must be 1"):
        sleep_launch(3, "0.32.0", "v")
    features = model_features(_config("Qwen__Qwen3-8B"), None, {"sleep": 2}, "0.32.0", "q")
    assert "--enable-sleep-mode" in features["args"]
    assert features["env"] == {"VLLM_SERVER_DEV_MODE": "1"} and features["sleep_level"] == 2


def _plan(name: str, gmu: float) -> dict[str, Any]:
    return plan(_config(name), H100, options={"vllm_version": "0.32.0", "gpu_memory_utilization": gmu})


def test_two_sleepers_with_room_awake_for_one_fit() -> None:
    plans = {"a": _plan("Qwen__Qwen3-8B", 0.8), "b": _plan("meta-llama__Meta-Llama-3.1-8B", 0.8)}
    models = [{"name": "a", "sleep": 1}, {"name": "b", "sleep": 1}]
    got = awake_check(models, plans, 1)
    assert got["fits"] and len(got["worst_awake_sleepers"]) == 1 and len(got["asleep"]) == 1
    # the one asleep still holds its CUDA context and graphs
    assert got["worst_awake_bytes"] > 0.8 * got["gpu_bytes"]
    with pytest.raises(ServingError, match="do not fit their GPUs"):
        awake_check(models, plans, 2)


def test_a_model_without_sleep_is_always_awake() -> None:
    plans = {"a": _plan("Qwen__Qwen3-8B", 0.5), "b": _plan("meta-llama__Meta-Llama-3.1-8B", 0.6)}
    with pytest.raises(ServingError, match=r"a 39.6 GiB, b 47.5 GiB awake, 0 asleep .* of 79.2 GiB"):
        awake_check([{"name": "a"}, {"name": "b", "sleep": 2}], plans, 1)


@pytest.mark.parametrize(
    ("flag", "setting"),
    [
        ("--kv-offloading-size", "kv_offload"),
        ("--kv-offloading-backend", "kv_offload"),
        ("--enable-sleep-mode", "sleep"),
    ],
)
def test_extra_args_may_not_set_the_tier_or_sleep_flags(flag: str, setting: str) -> None:
    from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_serving.deploy import (
        vllm_command,
    )

    with pytest.raises(ServingError, match=rf"set vllm_server_models\[m\]\.{setting}"):
        vllm_command("/p", "m", "0.0.0.0", 8000, [], [flag, "1"])


CPU_IMAGE = {
    "Id": "sha256:0f8ea2a49bdd",
    "RepoTags": ["vllm-fleet/vllm-cpu:0.32.0"],
    # the lab image's Config (docker image inspect vllm-fleet/vllm-cpu:0.32.0)
    "Config": {
        "Labels": {
            "io.vllm-fleet.cuda-version": "none",
            "org.opencontainers.image.title": "vllm-fleet lab vLLM (CPU build)",
        },
        "Env": ["PATH=/opt/vllm/bin:/usr/bin", "HF_HUB_OFFLINE=1"],
    },
}
CUDA_IMAGE = {
    "Id": "sha256:1a2b",
    "RepoTags": ["vllm/vllm-openai:v0.32.0"],
    "Config": {"Labels": {}, "Env": ["CUDA_VERSION=12.9.1", "NVIDIA_VISIBLE_DEVICES=all"]},
}
NATIVE = {"size_gib": 1, "backend": "native", "args": ["--kv-offloading-backend", "native"]}


@pytest.mark.parametrize("ref", ["vllm-fleet/vllm-cpu:0.32.0", "sha256:0f8ea2a49bdd"])
def test_a_cpu_build_is_refused_sleep_and_the_native_tier_in_vllms_words(ref: str) -> None:
    spec = {"name": "tiny", "image": ref, "sleep_level": 1, "kv_offload": NATIVE}
    sleep_line, offload_line = platform_problems([CUDA_IMAGE, CPU_IMAGE], spec)
    assert sleep_line.startswith(
        "vllm_server_models[tiny].sleep: Sleep mode is not supported on current platform."
    )
    assert offload_line.startswith(
        "vllm_server_models[tiny].kv_offload: CPU Offloading is currently only supported on CUDA-alike"
    )
    assert "sleep: false" in sleep_line and "kv_offload: false" in offload_line


@pytest.mark.parametrize(
    ("images", "spec"),
    [
        # a CUDA image
        (
            [CUDA_IMAGE, CPU_IMAGE],
            {"image": "vllm/vllm-openai:v0.32.0", "sleep_level": 2, "kv_offload": NATIVE},
        ),
        # not on the host yet: vLLM judges it at start
        ([CUDA_IMAGE], {"image": "vllm-fleet/vllm-cpu:0.32.0", "sleep_level": 1}),
        ([], {"image": "vllm/vllm-openai:v0.32.0", "sleep_level": 1}),
        # a CPU build with neither feature (ngram speculation runs there)
        ([CPU_IMAGE], {"image": "vllm-fleet/vllm-cpu:0.32.0", "sleep_level": None, "kv_offload": {}}),
    ],
)
def test_other_images_and_models_are_left_to_vllm(images: list, spec: dict) -> None:
    assert platform_problems(images, {"name": "m", **spec}) == []
