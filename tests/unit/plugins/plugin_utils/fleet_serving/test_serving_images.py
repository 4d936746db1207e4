"""One tag parser and one image/version fallback (plugins/plugin_utils/fleet_serving/images.py).

Before, three parsers read an image tag: the planner's (fleet_planner.versions.version_from_image), validate's
(fleet_validate.cross.image_tag_version, a regex anywhere in the tag) and the monitoring label's
(fleet_monitoring.targets.image_version, its own split of the reference). The cases where they disagreed are
pinned here to the planner's reading, the one the memory accounting uses.
"""

from __future__ import annotations

import pytest
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_monitoring import targets
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_planner import (
    parse_version,
    resolve_version_text,
)
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_serving import images
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_serving.deploy import ServingError

DIGEST = "sha256:" + "a" * 64


@pytest.mark.parametrize(
    ("image", "version"),
    [
        ("vllm/vllm-openai:v0.34.0", "0.34.0"),
        ("registry.local:5000/vllm/vllm-openai:0.32.0-cu129", "0.32.0"),
        ("vllm-fleet/vllm-cpu:0.32.0", "0.32.0"),
        ("registry.local:5000/vllm", None),  # a registry port is not a tag
        ("vllm/vllm-openai:latest", None),
        ("vllm/vllm-openai@" + DIGEST, None),
        ("vllm/vllm-openai:build-2026.12.04", None),
        (None, None),
        ("", None),
        # where validate's parser disagreed with the planner's:
        ("registry.local:5000/vllm/vllm-openai:0.10.1.1-cu128", "0.10.1.1"),  # validate: None
        ("vllm/vllm-openai:v0.20.0rc1", "0.20.0rc1"),  # validate: 0.20.0 (the release, not its candidate)
        ("vllm/vllm-openai:v0.11.0.post1", "0.11.0.post1"),  # validate: 0.11.0
        ("vllm/vllm-openai:nightly-0.11.0", None),  # validate: 0.11.0 (a nightly is no release)
        ("vllm/vllm-openai:v0.11.0@" + DIGEST, "0.11.0"),  # a tag with a digest pin
    ],
)
def test_the_release_an_image_tag_names(image, version):
    assert images.tag_version(image) == version


@pytest.mark.parametrize(
    "image",
    [
        "registry.local:5000/vllm/vllm-openai:0.10.1.1-cu128",
        "vllm/vllm-openai:v0.20.0rc1",
        "vllm/vllm-openai:nightly-0.11.0",
        "vllm/vllm-openai:v0.11.0.post1",
    ],
)
def test_validate_and_the_planner_read_a_tag_alike(image):
    # validate's image check (check_image_version) and the planner take the release from the same parser
    tagged = images.tag_version(image)
    if tagged is None:
        with pytest.raises(ValueError, match="names no vLLM release"):
            resolve_version_text(None, image)
    else:
        assert resolve_version_text(None, image) == tagged
        assert parse_version(tagged) == parse_version(tagged.split("-")[0])


@pytest.mark.parametrize(
    ("image", "name", "tag", "digest"),
    [
        ("vllm/vllm-openai:v0.11.0", "vllm/vllm-openai", "v0.11.0", ""),
        ("registry.local:5000/vllm", "registry.local:5000/vllm", "", ""),
        ("registry.local:5000/vllm:0.1@" + DIGEST, "registry.local:5000/vllm", "0.1", DIGEST),
        ("vllm@" + DIGEST, "vllm", "", DIGEST),
    ],
)
def test_an_image_reference_splits_as_docker_reads_it(image, name, tag, digest):
    assert images.split_image(image) == images.ImageRef(name, tag, digest)


def test_the_monitoring_version_label_is_the_tag_of_the_same_split():
    # the label keeps the tag as written (the dashboards show it); the split is the shared one
    assert targets.image_version("registry.local:5000/vllm") == "latest"
    assert targets.image_version("registry.local:5000/vllm/vllm-openai:v0.20.0rc1") == "v0.20.0rc1"
    assert targets.image_version("vllm@" + DIGEST) == "sha256:aaaaaaaaaaaa"


GROUP = ("vllm/vllm-openai:v0.34.0", "0.34.0")


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        # the group's image and version
        ({"name": "m"}, {"image": GROUP[0], "vllm_version": "0.34.0"}),
        # the model's own image: the release its tag names, not the group's version
        (
            {"name": "m", "image": "vllm/vllm-openai:v0.11.0"},
            {"image": "vllm/vllm-openai:v0.11.0", "vllm_version": "0.11.0"},
        ),
        # its own image and version: the version it sets (the plan and the flags are made for it)
        (
            {"name": "m", "image": "local/vllm:canary", "overrides": {"vllm_version": "0.33.1"}},
            {"image": "local/vllm:canary", "vllm_version": "0.33.1"},
        ),
        # only a version: the group's image, the model's version (what the planner plans it for)
        (
            {"name": "m", "overrides": {"vllm_version": "0.33.0"}},
            {"image": GROUP[0], "vllm_version": "0.33.0"},
        ),
    ],
)
def test_a_models_image_and_version(model, expected):
    assert images.image_version(model, *GROUP) == expected


def test_a_group_without_a_version_takes_its_image_tag():
    assert images.image_version(None, "vllm/vllm-openai:v0.32.0", "") == {
        "image": "vllm/vllm-openai:v0.32.0",
        "vllm_version": "0.32.0",
    }


def test_an_own_image_naming_no_release_needs_a_version():
    own = r"vllm_server_models\[m\]\.image 'local/vllm:canary'.*overrides\.vllm_version"
    with pytest.raises(ServingError, match=own):
        images.image_version({"name": "m", "image": "local/vllm:canary"}, *GROUP)
    with pytest.raises(ServingError, match="vllm_server_vllm_version is empty"):
        images.image_version({}, "local/vllm:canary", "")


def test_validate_refuses_a_models_image_and_version_that_serve_would_refuse_or_misplan():
    from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils import fleet_validate as ic
    from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_validate.cross import HostView

    cat = ic.load_catalogue()
    models = [
        {"name": "ok", "path": "/m/ok", "port": 8001, "image": "vllm/vllm-openai:v0.11.0"},
        {
            "name": "pinned",
            "path": "/m/p",
            "port": 8002,
            "image": "local/vllm:canary",
            "overrides": {"vllm_version": "0.33.1"},
        },
        {"name": "untagged", "path": "/m/u", "port": 8003, "image": "local/vllm:canary"},
        {
            "name": "other",
            "path": "/m/o",
            "port": 8004,
            "image": "vllm/vllm-openai:v0.11.0",
            "overrides": {"vllm_version": "0.12.0"},
        },
    ]
    found = ic.cross.check_image_version(HostView("h", {"vllm_server_models": models}, cat))
    assert [p.variable for p in found] == [
        "vllm_server_models[untagged].image",
        "vllm_server_models[other].overrides.vllm_version",
    ]
    assert "tagged 0.11.0" in found[1].what and 'overrides.vllm_version: "0.11.0"' in found[1].fix
    # what validate accepts, serve plans and flags alike
    assert [images.image_version(m, *GROUP)["vllm_version"] for m in models[:2]] == ["0.11.0", "0.33.1"]
