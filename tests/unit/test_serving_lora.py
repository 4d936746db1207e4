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
    found = lora.resolve(lora.adapters(MODELS, "/srv/models"), ["c0ffee", ""])
    out = lora.launch(found, [json.dumps({"peft_type": "LORA", "r": 8}), {"r": 20}])
    assert out["tiny"]["options"] == {"max_loras": 2, "max_lora_rank": 32}  # 20 -> the next rank vLLM takes
    assert out["tiny"]["modules"] == ["tiny-a=/srv/models/lab/tiny-lora-a/c0ffee", "tiny-b=/opt/adapters/b"]
    assert out["tiny"]["paths"] == ["/srv/models/lab/tiny-lora-a/c0ffee", "/opt/adapters/b"]
    assert "other" not in out


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
