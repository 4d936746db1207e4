"""vLLM's compile and kernel caches on the host per image (#26 fast starts): the release gate of
`vllm download-kernels`, the folder, mount and environment each container gets, and which folders go.

The image data is what `docker image inspect` printed for the lab's CPU vLLM image (Id, RepoTags, Config.Env).
"""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.vllm_fleet.vllm_fleet.plugins.filter.vllm_serving_start_caches import FilterModule
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_serving import start_cache
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_serving.deploy import ServingError

LAB_ID = "sha256:0f8ea2a49bdd311c7baf86e8d0ff5989613b1650c85894c9f075e83ebd47e903"
LAB_IMAGE = {
    "Id": LAB_ID,
    "RepoTags": ["vllm-fleet/vllm-cpu:0.32.0", "vllm-fleet/vllm-cpu:0.32.0-7ed572fd1858"],
    "Config": {
        "Env": [
            "container=docker",
            "PATH=/opt/vllm/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "HF_HUB_OFFLINE=1",
            "TRANSFORMERS_OFFLINE=1",
            "VLLM_NO_USAGE_STATS=1",
            "DO_NOT_TRACK=1",
        ]
    },
}
CANARY_ID = "sha256:" + "7" * 64
CANARY_IMAGE = {
    "Id": CANARY_ID,
    "RepoTags": ["vllm/vllm-openai:v0.34.0"],
    "Config": {"Env": ["PATH=/usr/bin", "PYTHONPATH=/opt/extra"]},
}
ROOT = "/var/cache/vllm-fleet/vllm"
LAB_DIR = f"{ROOT}/{LAB_ID.removeprefix('sha256:')}"


@pytest.mark.parametrize(
    ("version", "has"),
    [("0.8.5", False), ("0.31.1", False), ("0.32.0", True), ("0.33.1", True), ("0.34.0", True)],
)
def test_download_kernels_is_gated_on_the_release(version: str, has: bool) -> None:
    assert start_cache.has_download_kernels(version) is has


def test_a_version_that_is_no_release_names_itself() -> None:
    with pytest.raises(ServingError, match="nightly"):
        start_cache.has_download_kernels("nightly")


def test_each_container_mounts_its_image_folder_with_every_cache_in_it() -> None:
    specs = [
        {"container": "vllm-tiny", "image": "vllm-fleet/vllm-cpu:0.32.0"},
        {"container": "vllm-embed", "image": LAB_ID},  # a rollback names the image by ID
    ]
    got = start_cache.start_caches(specs, [LAB_IMAGE], ROOT, "0.32.0")
    assert got["images"] == [
        {
            "id": LAB_ID,
            "dir": LAB_DIR,
            "volume": f"{LAB_DIR}:/var/cache/vllm-fleet:rw",
            "kernels": True,
            "kernels_env": {
                "PIP_TARGET": "/var/cache/vllm-fleet/python",
                "PIP_NO_DEPS": "1",
                "PIP_UPGRADE": "1",
                "PIP_NO_CACHE_DIR": "1",
            },
            "stamp": f"{LAB_DIR}/download-kernels.log",
        }
    ]
    assert set(got["containers"]) == {"vllm-tiny", "vllm-embed"}
    tiny = got["containers"]["vllm-tiny"]
    assert tiny == got["containers"]["vllm-embed"]
    assert tiny["volumes"] == [f"{LAB_DIR}:/var/cache/vllm-fleet:rw"]
    assert tiny["env"] == {
        "VLLM_CACHE_ROOT": "/var/cache/vllm-fleet/vllm",
        "TORCHINDUCTOR_CACHE_DIR": "/var/cache/vllm-fleet/torchinductor",
        "TRITON_CACHE_DIR": "/var/cache/vllm-fleet/triton",
        "FLASHINFER_WORKSPACE_BASE": "/var/cache/vllm-fleet",
        "CUDA_CACHE_PATH": "/var/cache/vllm-fleet/nv",
        "PYTHONPATH": "/var/cache/vllm-fleet/python",
    }


def test_two_images_get_two_folders_and_the_image_pythonpath_is_kept() -> None:
    specs = [
        {"container": "vllm-a", "image": "vllm-fleet/vllm-cpu:0.32.0-7ed572fd1858"},
        {"container": "vllm-b", "image": "vllm/vllm-openai:v0.34.0"},
    ]
    got = start_cache.start_caches(specs, [LAB_IMAGE, CANARY_IMAGE], ROOT + "/", "0.34.0")
    assert [i["dir"] for i in got["images"]] == [LAB_DIR, f"{ROOT}/{'7' * 64}"]
    assert got["containers"]["vllm-b"]["env"]["PYTHONPATH"] == "/var/cache/vllm-fleet/python:/opt/extra"
    assert got["containers"]["vllm-b"]["volumes"] == [f"{ROOT}/{'7' * 64}:/var/cache/vllm-fleet:rw"]


def test_a_release_without_download_kernels_gets_the_mount_but_no_kernel_step() -> None:
    got = start_cache.start_caches([{"container": "c", "image": LAB_ID}], [LAB_IMAGE], ROOT, "0.31.0")
    assert got["images"][0]["kernels"] is False and got["images"][0]["kernels_env"] == {}
    assert got["containers"]["c"]["volumes"] == [f"{LAB_DIR}:/var/cache/vllm-fleet:rw"]


def test_an_empty_root_turns_the_caches_off() -> None:
    assert start_cache.start_caches([{"container": "c", "image": LAB_ID}], [LAB_IMAGE], "", "0.32.0") == {
        "images": [],
        "containers": {},
    }


@pytest.mark.parametrize("root", ["/", "relative/cache", "//"])
def test_a_root_that_is_not_an_absolute_folder_is_refused(root: str) -> None:
    with pytest.raises(ServingError, match="vllm_server_cache_root must be an absolute folder"):
        start_cache.start_caches([{"container": "c", "image": LAB_ID}], [LAB_IMAGE], root, "0.32.0")


def test_the_filter_names_a_missing_image() -> None:
    start_caches = FilterModule().filters()["vllm_serving_start_caches"]
    missing = [{"container": "vllm-x", "image": "vllm/vllm-openai:v0.99.0"}]
    with pytest.raises(AnsibleFilterError, match="v0.99.0 of vllm-x is not on this host"):
        start_caches(missing, [LAB_IMAGE], ROOT, "0.32.0")


def _fact(current: str, previous: str | None) -> dict:
    entry = {"current": {"image_id": current}, "previous": {"image_id": previous} if previous else None}
    return {"schema": 1, "models": {"tiny": entry}}


def test_only_folders_of_images_no_container_or_rollback_needs_are_removed() -> None:
    old_id, gone_id, other_id = "a" * 64, "b" * 64, "c" * 64
    found = [LAB_DIR, *(f"{ROOT}/{name}" for name in (old_id, gone_id, other_id, "notes", "ab"))]
    stale = start_cache.stale_caches(
        found,
        containers=[LAB_ID, "sha256:" + other_id],  # the running model, and another container of the host
        fact=_fact(LAB_ID, "sha256:" + old_id),  # the previous version, still on the host: a rollback target
        images=[LAB_ID, "sha256:" + old_id, "sha256:" + other_id],
    )
    # gone_id: no container, not recorded; a folder not named by an image ID is never touched
    assert stale == [f"{ROOT}/{gone_id}"]


def test_a_recorded_image_that_left_the_host_loses_its_folder() -> None:
    old_id = "a" * 64
    stale = start_cache.stale_caches(
        [LAB_DIR, f"{ROOT}/{old_id}"], [LAB_ID], _fact(LAB_ID, "sha256:" + old_id), images=[LAB_ID]
    )
    assert stale == [f"{ROOT}/{old_id}"]


def test_no_fact_and_no_container_removes_every_image_folder() -> None:
    assert start_cache.stale_caches([LAB_DIR + "/"], [], None, []) == [LAB_DIR + "/"]


def test_a_rollback_to_an_older_release_is_gated_on_the_release_it_recorded() -> None:
    specs = [{"container": "c", "image": LAB_ID, "vllm_version": "0.30.1"}]
    got = start_cache.start_caches(specs, [LAB_IMAGE], ROOT, "0.34.0")
    assert got["images"][0]["kernels"] is False
