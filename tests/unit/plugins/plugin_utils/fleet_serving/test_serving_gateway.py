"""Gateway routes, client keys and rate-limit tiers."""

from __future__ import annotations

import hashlib

import pytest
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_serving import gateway
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_serving.deploy import ServingError

BACKENDS = [
    {"host": "gpu2", "address": "10.0.0.2", "models": [{"name": "llama", "port": 8000}]},
    {
        "host": "gpu1",
        "address": "10.0.0.1",
        "models": [{"name": "llama", "port": 8000}, {"name": "qwen", "port": 8001}],
    },
    {"host": "storage", "address": "", "models": []},
    {"host": "gpu6", "address": "fd00::6", "models": [{"name": "qwen", "port": "8001"}]},
]


def test_routes_one_upstream_per_model_over_its_hosts() -> None:
    result = gateway.routes(BACKENDS, drained=["gpu2"])
    assert [r["model"] for r in result] == ["llama", "qwen"]
    llama, qwen = result
    assert llama["servers"] == [
        {"host": "gpu1", "server": "10.0.0.1:8000", "down": False},
        {"host": "gpu2", "server": "10.0.0.2:8000", "down": True},
    ]
    assert llama["available"] == 1
    assert [s["server"] for s in qwen["servers"]] == ["10.0.0.1:8001", "[fd00::6]:8001"]
    assert llama["upstream"] != qwen["upstream"]


@pytest.mark.parametrize(
    ("backends", "needle"),
    [
        ([{"host": "h", "address": "", "models": [{"name": "m", "port": 1}]}], "vllm_fleet_internal_address"),
        ([{"host": "h", "address": "a", "models": [{"name": "m"}]}], "needs a 'port'"),
        ([{"host": "h", "address": "a", "models": [{"port": 1}]}], "needs a 'name'"),
        ([{"host": "h", "address": "a", "models": [{"name": "m", "port": 0}]}], "outside 1-65535"),
        ([{"host": "h", "address": "a", "models": "m"}], "must be a list"),
        ([{"host": "h", "address": "a", "models": [{"name": "~re", "port": 1}]}], "must start with"),
        ([{"host": "h", "address": "a", "models": [{"name": 'a"b', "port": 1}]}], "must start with"),
        (
            [{"host": "h", "address": "a", "models": [{"name": "m", "port": 1}, {"name": "n", "port": 1}]}],
            "already used by h model m",
        ),
    ],
)
def test_routes_errors(backends: list, needle: str) -> None:
    with pytest.raises(ServingError) as err:
        gateway.routes(backends)
    assert needle in str(err.value)


@pytest.mark.parametrize(
    "model",
    ["Qwen/Qwen3-8B", "meta-llama/Llama-3.1-8B-Instruct", "tiny", "a.b:c", "ÄÖ"],
)
def test_upstream_name_is_nginx_safe_and_distinct(model: str) -> None:
    name = gateway.upstream_name(model)
    assert name.startswith("vf_")
    assert all(c.isalnum() or c == "_" for c in name) and name.isascii()
    assert gateway.upstream_name(model + "x") != name


def test_upstream_names_of_similar_models_differ() -> None:
    assert gateway.upstream_name("a/b") != gateway.upstream_name("a.b")


TIERS = {"default": {"rate": "10r/s", "burst": 20}, "batch": {"rate": "60r/m"}}


def test_clients_store_hashes_only() -> None:
    keys = [{"name": "bob", "key": "b" * 24, "tier": "batch"}, {"name": "alice", "key": "a" * 24}]
    result = gateway.clients(keys, TIERS)
    assert result == [
        {"name": "alice", "sha256": hashlib.sha256(b"a" * 24).hexdigest(), "tier": "default"},
        {"name": "bob", "sha256": hashlib.sha256(b"b" * 24).hexdigest(), "tier": "batch"},
    ]
    assert "a" * 24 not in repr(result)


@pytest.mark.parametrize(
    ("keys", "needle"),
    [
        ([], "is empty"),
        ([{"name": "x", "key": "short"}], "at least 16"),
        ([{"name": "x", "key": "a" * 20 + " b"}], "without spaces"),
        ([{"name": "bad name", "key": "a" * 20}], "1-64 characters"),
        ([{"name": "x", "key": "a" * 20, "tier": "gold"}], "tier 'gold'"),
        ([{"name": "x", "key": "a" * 20}, {"name": "x", "key": "b" * 20}], "used twice"),
        ([{"name": "x", "key": "a" * 20}, {"name": "y", "key": "a" * 20}], "x and y have the same key"),
        (["just-a-key"], "must be a mapping"),
    ],
)
def test_clients_errors(keys: list, needle: str) -> None:
    with pytest.raises(ServingError) as err:
        gateway.clients(keys, TIERS)
    assert needle in str(err.value)
    assert "a" * 20 not in str(err.value)


def test_rate_tiers() -> None:
    assert gateway.rate_tiers(TIERS) == [
        {"name": "batch", "zone": "vf_tier_batch", "rate": "60r/m", "burst": 0},
        {"name": "default", "zone": "vf_tier_default", "rate": "10r/s", "burst": 20},
    ]


@pytest.mark.parametrize(
    ("tiers", "needle"),
    [
        ({}, "must map tier names"),
        ({"default": {"rate": "10/s"}}, "must look like"),
        ({"default": {"rate": "0r/s"}}, "must look like"),
        ({"default": {"rate": "1r/s", "burst": -1}}, "whole number"),
        ({"default": {"rate": "1r/s", "burst": True}}, "whole number"),
        ({"Gold": {"rate": "1r/s"}}, "must match"),
    ],
)
def test_rate_tiers_errors(tiers: dict, needle: str) -> None:
    with pytest.raises(ServingError) as err:
        gateway.rate_tiers(tiers)
    assert needle in str(err.value)


MODELS_BY_HOST = {
    "gpu1": [{"name": "llama", "port": 8000}, {"name": "qwen", "port": 8001}],
    "gpu2": [{"name": "llama", "port": 8000}],
    "gpu3": [{"name": "llama", "port": 8000}],
    "storage": [],
}


@pytest.mark.parametrize(
    ("drained", "host", "minimum", "expected"),
    [
        ([], "gpu2", 1, []),
        ([], "gpu2", 2, []),
        ([], "gpu2", 3, [{"model": "llama", "available": 2}]),
        (["gpu3"], "gpu2", 2, [{"model": "llama", "available": 1}]),
        ([], "gpu1", 1, [{"model": "qwen", "available": 0}]),
        (
            ["gpu2", "gpu3"],
            "gpu1",
            1,
            [{"model": "llama", "available": 0}, {"model": "qwen", "available": 0}],
        ),
        ([], "storage", 1, []),
    ],
)
def test_replicas_left(drained: list, host: str, minimum: int, expected: list) -> None:
    assert gateway.replicas_left(MODELS_BY_HOST, drained, host, minimum) == expected


def test_affinity_routes_default_per_model_and_off() -> None:
    routes = gateway.routes(BACKENDS, drained=["gpu2"])
    assert gateway.affinity_routes(routes, {"key": "none"}, {}) == []
    pinned = gateway.affinity_routes(routes, {"key": "header"}, {"qwen": {"key": "user"}})
    assert [(r["model"], r["key"], r["header"]) for r in pinned] == [
        ("llama", "header", "X-Session-Id"),
        ("qwen", "user", "X-Session-Id"),
    ]
    llama = pinned[0]
    assert llama["upstream"] == routes[0]["upstream"]
    assert llama["affinity_upstream"] == routes[0]["upstream"] + "_affinity"
    # the drained host stays on the ring, down: the other sessions keep their replica
    assert llama["servers"] == routes[0]["servers"]
    only_qwen = gateway.affinity_routes(
        routes, {}, {"qwen": {"key": "prompt_prefix", "prompt_prefix_chars": 64}}
    )
    assert [(r["model"], r["prompt_prefix_chars"]) for r in only_qwen] == [("qwen", 64)]


@pytest.mark.parametrize(
    ("default", "models", "needle"),
    [
        ({"key": "cookie"}, {}, "gateway_affinity.key: 'cookie' is not a session key"),
        ({"key": "header", "header": "X Session"}, {}, "gateway_affinity.header:"),
        ({"key": "prompt_prefix", "prompt_prefix_chars": 4}, {}, "gateway_affinity.prompt_prefix_chars:"),
        ({"keys": "header"}, {}, "gateway_affinity.keys: is not a setting"),
        ("header", {}, "gateway_affinity: is str"),
        ({}, {"mistral": {"key": "user"}}, "gateway_affinity_models['mistral']: is not a model"),
        ({}, {"llama": {"key": True}}, "gateway_affinity_models['llama'].key:"),
        ({}, ["llama"], "gateway_affinity_models: is list"),
    ],
)
def test_affinity_errors_name_the_variable(default: object, models: object, needle: str) -> None:
    with pytest.raises(ServingError) as err:
        gateway.affinity_routes(gateway.routes(BACKENDS), default, models)  # type: ignore[arg-type]
    assert needle in str(err.value)
    assert "Fix: " in str(err.value)
