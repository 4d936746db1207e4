"""Where each host's vLLM is, for every role (plugin_utils/fleet_serving/fleet.py): one definition."""

from __future__ import annotations

import pytest
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_serving import fleet, gateway
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_serving.deploy import ServingError

FACTS = {"default_ipv4": {"address": "172.18.0.5"}}


def _recorded(**models):
    return {
        "ansible_local": {
            "vllm_fleet": {"models": {n: {"current": c, "previous": None} for n, c in models.items()}}
        }
    }


@pytest.mark.parametrize(
    ("hvars", "expected"),
    [
        ({"vllm_server_listen_address": "10.9.9.9", "vllm_fleet_internal_address": "10.0.0.1",
          "ansible_facts": FACTS}, "10.9.9.9"),
        ({"vllm_fleet_internal_address": "10.0.0.1", "ansible_facts": FACTS}, "10.0.0.1"),
        ({"ansible_facts": FACTS, "ansible_host": "public.example"}, "172.18.0.5"),
        ({"ansible_host": "public.example"}, ""),  # vLLM never listens on ansible_host by default
        ({"vllm_server_listen_address": "", "vllm_fleet_internal_address": " 10.0.0.1 "}, "10.0.0.1"),
    ],
)  # fmt: skip
def test_vllm_address(hvars, expected):
    assert fleet.vllm_address(hvars) == expected


def test_host_address_falls_back_to_ansible_host_then_the_name():
    assert (
        fleet.host_address({"vllm_fleet_internal_address": "10.0.0.1", "ansible_facts": FACTS}, "h")
        == "10.0.0.1"
    )
    assert fleet.host_address({"ansible_facts": FACTS, "ansible_host": "x"}, "h") == "172.18.0.5"
    assert fleet.host_address({"ansible_host": "x"}, "h") == "x"
    assert fleet.host_address({}, "h") == "h"


def test_endpoints_prefer_the_recorded_deployment():
    hvars = {
        "vllm_server_listen_address": "10.9.9.9",
        "vllm_server_models": [{"name": "a", "port": 8000}, {"name": "b", "port": "8001"}],
        "ansible_facts": {
            **FACTS,
            **_recorded(a={"listen_address": "10.1.1.1", "port": 8100, "url": "http://10.1.1.1:8100",
                           "image": "vllm/vllm-openai:v0.32.0", "vllm_version": "0.32.0"}),
        },
    }  # fmt: skip
    a, b = fleet.endpoints(hvars)
    assert (a["address"], a["port"], a["server"], a["url"], a["image"], a["recorded"]) == (
        "10.1.1.1",
        8100,
        "10.1.1.1:8100",
        "http://10.1.1.1:8100",
        "vllm/vllm-openai:v0.32.0",
        True,
    )
    assert (b["address"], b["port"], b["server"], b["url"], b["image"], b["recorded"]) == (
        "10.9.9.9",
        8001,
        "10.9.9.9:8001",
        "http://10.9.9.9:8001",
        "",
        False,
    )


def test_endpoints_bracket_ipv6_and_pass_bad_entries_on():
    hvars = {
        "vllm_fleet_internal_address": "fd00::2",
        "vllm_server_models": [{"name": "m", "port": 1}, {"port": 2}],
    }
    good, bad = fleet.endpoints(hvars)
    assert good["server"] == "[fd00::2]:1" and good["url"] == "http://[fd00::2]:1"
    assert bad == {"port": 2}
    assert fleet.endpoints({}) == [] and fleet.endpoints({"vllm_server_models": ""}) == []
    with pytest.raises(ServingError, match="must be a list"):
        fleet.endpoints({"vllm_server_models": "m:1"}, host="h")


def test_gateway_routes_use_each_models_own_address():
    hvars = {
        "vllm_fleet_internal_address": "10.0.0.1",
        "vllm_server_models": [{"name": "m", "port": 8000}],
        "ansible_facts": _recorded(m={"listen_address": "10.9.9.9", "port": 8000}),
    }
    backends = [{"host": "h", "address": fleet.vllm_address(hvars), "models": fleet.endpoints(hvars)}]
    [route] = gateway.routes(backends)
    assert route["servers"] == [{"host": "h", "server": "10.9.9.9:8000", "down": False}]
    with pytest.raises(ServingError, match="set vllm_server_listen_address"):
        gateway.routes(
            [
                {
                    "host": "h",
                    "address": "",
                    "models": fleet.endpoints({"vllm_server_models": [{"name": "m", "port": 1}]}),
                }
            ]
        )
