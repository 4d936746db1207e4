"""LoRA adapters: declaration checks, paths in the weights layout, the launch, routes by adapter name."""

from __future__ import annotations

import json

import pytest
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_serving import deploy, gateway, lora
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_serving.deploy import ServingError

MODELS = [
    {
        "name": "tiny",
        "path": "/srv/models/lab/tiny/abc",
        "port": 8000,
        "adapters": [
            {"name": "tiny-a", "repo": "lab/tiny-lora-a", "revision": "main"},
            {"name": "tiny-b", "path": "/opt/adapters/b"},
        ],
    },
    {"name": "other", "path": "/srv/models/lab/other/abc", "port": 8001},
]


def test_adapters_are_laid_out_like_weights_and_resolved_through_refs() -> None:
    found = lora.adapters(MODELS, "/srv/models/")
    assert [(a["model"], a["name"], a["path"], a["ref"]) for a in found] == [
        ("tiny", "tiny-a", "/srv/models/lab/tiny-lora-a/main", "/srv/models/lab/tiny-lora-a/refs/main"),
        ("tiny", "tiny-b", "/opt/adapters/b", ""),
    ]
    resolved = lora.resolve(found, ["0123abcd\n", ""])
    assert resolved[0]["path"] == "/srv/models/lab/tiny-lora-a/0123abcd"
    assert resolved[0]["resolved_revision"] == "0123abcd"
    assert resolved[1]["path"] == "/opt/adapters/b"


@pytest.mark.parametrize(
    ("adapter", "message"),
    [
        ({"name": "x", "repo": "lab/x"}, r"adapters\[0\] \(x\) needs repo ORG/NAME and a pinned revision"),
        ({"name": "x", "path": "rel/dir"}, r"adapters\[0\]\.path must be an absolute directory"),
        ({"name": "-bad", "path": "/a"}, r"adapters\[0\]\.name '-bad' must start with a letter"),
        ({"name": "tiny", "path": "/a"}, r"adapters\[0\]\.name 'tiny' is already a served model"),
        ({"name": "x", "path": "/a", "revison": "1"}, r"adapters\[0\]: unknown key\(s\) revison"),
    ],
)
def test_bad_adapter_declarations_name_the_entry_and_the_fix(adapter: dict, message: str) -> None:
    models = [{"name": "tiny", "path": "/m", "port": 8000, "adapters": [adapter]}]
    with pytest.raises(
        ServingError, match=r"^vllm_server_models\[tiny\]\." + message if "]." in message else message
    ):
        lora.adapters(models, "/srv/models")


def test_launch_sizes_slots_and_rank_from_the_adapter_configs() -> None:
    """A release without runtime LoRA updating: every adapter in --lora-modules and mounted on its own."""
    found = lora.resolve(lora.adapters(MODELS, "/srv/models"), ["c0ffee", ""])
    out = lora.launch(found, [json.dumps({"peft_type": "LORA", "r": 8}), {"r": 20}], "0.6.0", "/srv/models")
    assert out["tiny"]["options"] == {"max_loras": 2, "max_lora_rank": 32}  # 20 -> the next rank vLLM takes
    assert out["tiny"]["modules"] == ["tiny-a=/srv/models/lab/tiny-lora-a/c0ffee", "tiny-b=/opt/adapters/b"]
    assert out["tiny"]["paths"] == ["/srv/models/lab/tiny-lora-a/c0ffee", "/opt/adapters/b"]
    assert out["tiny"]["runtime"] is False and out["tiny"]["env"] == {}
    assert "other" not in out


def test_sizing_from_ranks_alone_is_what_the_launch_plans() -> None:
    """The doctor sizes from the ranks it probed, with no paths: the same options the serve stage plans."""
    found = lora.resolve(lora.adapters(MODELS, "/srv/models"), ["c0ffee", ""])
    for version in ("0.6.0", "0.32.0"):
        planned = lora.launch(found, [{"r": 8}, {"r": 20}], version, "/srv/models")["tiny"]
        assert lora.sizing([8, 20], lora.runtime_updating(version)) == planned["options"]
    assert lora.sizing([64] * 8, True) == {"max_loras": 8, "max_lora_rank": 64}
    with pytest.raises(ServingError, match="rank 1024 is above vLLM's largest --max-lora-rank"):
        lora.sizing([8, 1024], True)


def test_each_model_is_sized_for_the_release_it_runs() -> None:
    """vllm_server passes each model's own release (a model with its own image): the group's release must
    not decide whether its adapters load at runtime."""
    found = lora.resolve(lora.adapters(MODELS, "/srv/models"), ["c0ffee", ""])
    configs = [{"r": 8}, {"r": 16}]
    releases = {"tiny": {"image": "vllm/vllm-openai:v0.6.0", "vllm_version": "0.6.0"}, "other": "0.32.0"}
    own = lora.launch(found, configs, releases, "/srv/models")["tiny"]
    assert own == lora.launch(found, configs, "0.6.0", "/srv/models")["tiny"]
    assert own["runtime"] is False and own["modules"]
    newer = lora.launch(found, configs, {"tiny": "0.32.0"}, "/srv/models")["tiny"]
    assert newer["runtime"] is True and newer["modules"] == []


@pytest.mark.parametrize(
    ("version", "runtime"), [("0.6.0", False), ("0.6.1", True), ("0.32.0", True), (None, True)]
)
def test_runtime_lora_updating_starts_with_0_6_1(version: str | None, runtime: bool) -> None:
    assert lora.runtime_updating(version) is runtime


def test_with_runtime_updating_the_adapter_set_is_no_part_of_the_container() -> None:
    found = lora.resolve(lora.adapters(MODELS, "/srv/models/"), ["c0ffee", ""])
    configs = [{"r": 8}, {"r": 16}]
    out = lora.launch(found, configs, "0.32.0", "/srv/models/")["tiny"]
    assert out["runtime"] is True and out["env"] == {"VLLM_ALLOW_RUNTIME_LORA_UPDATING": "True"}
    assert out["modules"] == []  # loaded through the API after readiness
    # the root as a whole (a new adapter needs no new mount); an explicit path outside it on its own
    assert out["paths"] == ["/srv/models", "/opt/adapters/b"]
    assert out["options"] == {"max_loras": lora.RUNTIME_LORA_SLOTS, "max_lora_rank": 16}
    assert [a["path"] for a in out["adapters"]] == ["/srv/models/lab/tiny-lora-a/c0ffee", "/opt/adapters/b"]
    # one more adapter in the weights layout, of a rank the slots hold: nothing of the launch changes
    models = [
        {
            **MODELS[0],
            "adapters": [*MODELS[0]["adapters"], {"name": "tiny-c", "repo": "lab/c", "revision": "1"}],
        }
    ]
    more = lora.launch(lora.adapters(models, "/srv/models"), [*configs, {"r": 8}], "0.32.0", "/srv/models")[
        "tiny"
    ]
    assert {k: more[k] for k in ("options", "modules", "paths", "env")} == {
        k: out[k] for k in ("options", "modules", "paths", "env")
    }
    # more adapters than the slots: the slots grow so that all still fit one batch (a restart)
    many = [{"name": f"a{i}", "repo": f"lab/a{i}", "revision": "1"} for i in range(6)]
    grown = lora.launch(
        lora.adapters([{**MODELS[0], "adapters": many}], "/srv/models"),
        [{"r": 8}] * 6,
        "0.32.0",
        "/srv/models",
    )
    assert grown["tiny"]["options"]["max_loras"] == 6


def _served(*cards: tuple[str, str | None, str]) -> dict:
    return {
        "object": "list",
        "data": [{"id": i, "object": "model", "parent": p, "root": r} for i, p, r in cards],
    }


def test_runtime_changes_load_the_missing_and_unload_the_removed() -> None:
    served = _served(("tiny", None, "/m"), ("tiny-a", "tiny", "/r/a/1"), ("tiny-old", "tiny", "/r/old/1"))
    declared = [{"name": "tiny-a", "path": "/r/a/1"}, {"name": "tiny-c", "path": "/r/c/1"}]
    assert lora.runtime_changes(served, "tiny", declared) == {
        "load": [{"lora_name": "tiny-c", "lora_path": "/r/c/1"}],
        "unload": [{"lora_name": "tiny-old"}],
        "served": ["tiny-a", "tiny-old"],
    }


def test_runtime_changes_are_empty_when_vllm_serves_what_is_declared() -> None:
    served = _served(("tiny", None, "/m"), ("tiny-b", "tiny", "/r/b/1"), ("tiny-a", "tiny", "/r/a/1"))
    declared = [{"name": "tiny-a", "path": "/r/a/1", "rank": 8}, {"name": "tiny-b", "path": "/r/b/1"}]
    changes = lora.runtime_changes(served, "tiny", declared)
    assert changes["load"] == [] and changes["unload"] == []


def test_runtime_changes_reload_an_adapter_on_a_new_revision_and_ignore_other_models() -> None:
    # the base model and an adapter of another model served by the same vLLM are not this model's adapters
    served = _served(("tiny", None, "/m"), ("tiny-a", "tiny", "/r/a/old"), ("x-a", "other", "/r/x"))
    changes = lora.runtime_changes(served, "tiny", [{"name": "tiny-a", "path": "/r/a/new"}])
    assert changes["unload"] == [{"lora_name": "tiny-a"}]
    assert changes["load"] == [{"lora_name": "tiny-a", "lora_path": "/r/a/new"}]
    # every adapter removed: all unloaded, the base model never
    gone = lora.runtime_changes(served, "tiny", [])
    assert gone == {"load": [], "unload": [{"lora_name": "tiny-a"}], "served": ["tiny-a"]}


def test_runtime_changes_name_a_model_list_that_is_not_one() -> None:
    with pytest.raises(ServingError, match=r"^tiny: vLLM's /v1/models answered without a model list"):
        lora.runtime_changes({"error": {"message": "no"}}, "tiny", [])


def test_launch_refuses_what_is_not_a_lora_adapter() -> None:
    found = lora.adapters(MODELS, "/srv/models")
    with pytest.raises(ServingError, match=r"tiny-a.*has no LoRA rank 'r'"):
        lora.launch(found, [{}, {"r": 8}])
    with pytest.raises(ServingError, match=r"peft_type is 'IA3'"):
        lora.launch(found, [{"r": 8, "peft_type": "IA3"}, {"r": 8}])


def test_lora_modules_follow_the_plan_and_extra_args_cannot_set_them() -> None:
    cmd = deploy.vllm_command(
        "/m",
        "tiny",
        "10.0.0.1",
        8000,
        ["--max-loras", "2", "--enable-lora"],
        [],
        None,
        "0.32.0",
        ["a=/x", "b=/y"],
    )
    assert cmd[-6:] == ["--max-loras", "2", "--enable-lora", "--lora-modules", "a=/x", "b=/y"]
    assert cmd[cmd.index("--lora-modules") :] == ["--lora-modules", "a=/x", "b=/y"]
    with pytest.raises(
        ServingError, match=r"extra_args sets --lora-modules: remove it, it comes from .*adapters"
    ):
        deploy.vllm_command("/m", "tiny", "10.0.0.1", 8000, [], ["--lora-modules", "a=/x"])
    with pytest.raises(ServingError, match=r"overrides\.max_loras"):
        deploy.vllm_command("/m", "tiny", "10.0.0.1", 8000, [], ["--enable-lora"])


def test_adapters_route_to_the_servers_of_their_base_model() -> None:
    backends = [
        {
            "host": "gpu1",
            "address": "10.0.0.1",
            "models": [{"name": "tiny", "port": 8000, "adapters": MODELS[0]["adapters"]}],
        },
        {"host": "gpu2", "address": "10.0.0.2", "models": [{"name": "tiny", "port": 8000}]},
    ]
    routes = {r["model"]: r for r in gateway.routes(backends, drained=["gpu1"])}
    assert sorted(routes) == ["tiny", "tiny-a", "tiny-b"]
    assert [s["server"] for s in routes["tiny-a"]["servers"]] == ["10.0.0.1:8000"]  # only where it is served
    assert routes["tiny-a"]["parent"] == "tiny" and "parent" not in routes["tiny"]
    assert routes["tiny-a"]["available"] == 0  # its one host is drained
    assert routes["tiny-a"]["upstream"] != routes["tiny"]["upstream"]


def test_an_adapter_name_means_one_thing_across_the_fleet() -> None:
    backends = [
        {
            "host": "gpu1",
            "address": "10.0.0.1",
            "models": [{"name": "a", "port": 8000, "adapters": [{"name": "b"}]}],
        },
        {"host": "gpu2", "address": "10.0.0.2", "models": [{"name": "b", "port": 8000}]},
    ]
    with pytest.raises(ServingError, match=r"'b' is a served model here but an adapter of a elsewhere"):
        gateway.routes(backends)


def test_the_model_list_names_each_adapters_parent() -> None:
    backends = [{"host": "gpu1", "address": "10.0.0.1", "models": [{**MODELS[0]}, {**MODELS[1]}]}]
    body = gateway.models_list(gateway.routes(backends))
    assert body["object"] == "list"
    assert [(m["id"], m.get("parent")) for m in body["data"]] == [
        ("other", None),
        ("tiny", None),
        ("tiny-a", "tiny"),
        ("tiny-b", "tiny"),
    ]
    assert all(m["object"] == "model" and m["owned_by"] == "vllm-fleet" for m in body["data"])
