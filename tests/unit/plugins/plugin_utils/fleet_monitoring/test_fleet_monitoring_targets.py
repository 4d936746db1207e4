"""Scrape targets computed from the inventory (plugin_utils/fleet_monitoring/targets.py)."""

from __future__ import annotations

import pytest
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_monitoring import targets

GROUPS = {
    "all": ["gw", "gpu1", "gpu2", "gpu3", "mon"],
    "gateways": ["gw"],
    "gpu_nodes": ["gpu1", "gpu2", "gpu3"],
    "lab_h100": ["gpu2"],
    "lab_h200": ["gpu1"],
    "canary": ["gpu1", "mon"],
    "monitoring": ["mon"],
}


def _record(address, port, image):
    """What vllm_server records for a model (ansible_local.vllm_fleet), the part targets read."""
    return {
        "current": {
            "listen_address": address,
            "port": port,
            "url": f"http://{address}:{port}",
            "image": image,
        }
    }


HOSTVARS = {
    "gpu1": {
        "ansible_host": "vllm-fleet-lab-gpu1",
        "group_names": ["canary", "gpu_nodes", "lab_h200"],
        # declared, not what runs: the version label comes from the record
        "vllm_server_image": "vllm/vllm-openai:v0.10.0",
        "vllm_server_models": [{"name": "tiny", "port": 8000}, {"name": "small", "port": "8001"}],
        "ansible_facts": {
            "default_ipv4": {"address": "172.18.0.5"},
            "ansible_local": {
                "vllm_fleet": {
                    "models": {
                        "tiny": _record("172.18.0.5", 8000, "vllm/vllm-openai:v0.11.0"),
                        "small": _record("172.18.0.5", 8001, "vllm/vllm-openai:v0.11.0"),
                    }
                }
            },
        },
    },
    "gpu2": {
        "ansible_host": "10.0.0.2",
        "vllm_fleet_internal_address": "192.168.10.2",
        "group_names": ["gpu_nodes", "lab_h100"],
        "vllm_server_models": [{"name": "tiny", "port": 8000, "image": "vllm/vllm-openai:v0.12.0"}],
        "ansible_facts": {
            "ansible_local": {
                "vllm_fleet": {
                    "models": {
                        "tiny": _record(
                            "192.168.10.2", 8000, "registry.local:5000/vllm@sha256:0123456789abcdef0123"
                        )
                    }
                }
            }
        },
    },
    "gpu3": {
        "ansible_host": "gpu3.example",
        "ansible_facts": {"default_ipv4": {"address": "10.1.0.3"}},
        "group_names": ["gpu_nodes"],
        "vllm_fleet_gpu_group": "spare",
    },
    "gw": {"group_names": ["gateways"]},
}


@pytest.mark.parametrize(
    ("image", "expected"),
    [
        ("vllm/vllm-openai:v0.11.0", "v0.11.0"),
        ("registry.local:5000/vllm/vllm-openai:0.32.0-cpu", "0.32.0-cpu"),
        ("registry.local:5000/vllm/vllm-openai", "latest"),
        ("vllm/vllm-openai:v0.11.0@sha256:abc", "v0.11.0"),
        ("vllm/vllm-openai@sha256:0123456789abcdef99", "sha256:0123456789ab"),
        ("", "unknown"),
        (None, "unknown"),
    ],
)
def test_image_version(image, expected):
    assert targets.image_version(image) == expected


@pytest.mark.parametrize(
    ("host", "expected"),
    [
        ("gpu1", "lab_h200"),  # 'canary' also holds 'mon', so it is not a GPU child group
        ("gpu2", "lab_h100"),
        ("gpu3", "spare"),  # explicit vllm_fleet_gpu_group wins
        ("gw", "gpu_nodes"),  # no child group: the root group
    ],
)
def test_gpu_group(host, expected):
    assert targets.gpu_group(host, HOSTVARS, GROUPS, "gpu_nodes") == expected


@pytest.mark.parametrize(
    ("host", "expected"),
    [
        ("gpu1", "172.18.0.5"),  # gathered default IPv4 before ansible_host
        ("gpu2", "192.168.10.2"),  # vllm_fleet_internal_address first
        ("gw", "gw"),  # nothing known: the inventory name
        ("gpu3", "10.1.0.3"),
        ("unknown-host", "unknown-host"),
    ],
)
def test_host_address(host, expected):
    assert targets.host_address(host, HOSTVARS) == expected


def test_vllm_targets_one_entry_per_model_where_and_what_is_recorded():
    configs = targets.vllm_targets(["gpu1", "gpu2", "gpu3"], HOSTVARS, GROUPS)
    assert configs == [
        {
            "targets": ["172.18.0.5:8000"],
            "labels": {"host": "gpu1", "model": "tiny", "gpu_group": "lab_h200", "version": "v0.11.0"},
        },
        {
            "targets": ["172.18.0.5:8001"],
            "labels": {"host": "gpu1", "model": "small", "gpu_group": "lab_h200", "version": "v0.11.0"},
        },
        {
            "targets": ["192.168.10.2:8000"],
            "labels": {
                "host": "gpu2",
                "model": "tiny",
                "gpu_group": "lab_h100",
                "version": "sha256:0123456789ab",
            },
        },
    ]


def test_vllm_target_follows_the_recorded_address_and_port():
    hvars = {
        "vllm_fleet_internal_address": "10.0.0.1",
        "vllm_server_models": [{"name": "m", "port": 8000}],
        "ansible_facts": {
            "ansible_local": {"vllm_fleet": {"models": {"m": _record("10.9.9.9", 8100, "i:v1")}}}
        },
    }
    [config] = targets.vllm_targets(["h"], {"h": hvars}, {})
    assert config["targets"] == ["10.9.9.9:8100"] and config["labels"]["version"] == "v1"


def test_vllm_target_before_deployment_is_the_listen_address_default():
    hvars = {
        "vllm_fleet_internal_address": "10.0.0.1",
        "vllm_server_listen_address": "10.9.9.9",
        "ansible_host": "public.example",
        "vllm_server_models": [{"name": "m", "port": 8000}],
    }
    [config] = targets.vllm_targets(["h"], {"h": hvars}, {})
    assert config["targets"] == ["10.9.9.9:8000"] and config["labels"]["version"] == "unknown"
    del hvars["vllm_server_listen_address"]
    assert targets.vllm_targets(["h"], {"h": hvars}, {})[0]["targets"] == ["10.0.0.1:8000"]


def test_vllm_target_without_any_address_names_the_variable():
    hvars = {"ansible_host": "public.example", "vllm_server_models": [{"name": "m", "port": 8000}]}
    with pytest.raises(targets.TargetError, match="set vllm_server_listen_address"):
        targets.vllm_targets(["h"], {"h": hvars}, {})


def test_vllm_targets_fallback_models_for_hosts_without_models():
    configs = targets.vllm_targets(["gpu3"], HOSTVARS, GROUPS, fallback_models=[{"name": "m", "port": 9000}])
    assert configs == [
        {
            "targets": ["10.1.0.3:9000"],
            "labels": {"host": "gpu3", "model": "m", "gpu_group": "spare", "version": "unknown"},
        }
    ]
    assert targets.hosts_without_models(["gpu1", "gpu2", "gpu3"], HOSTVARS) == ["gpu3"]


def test_ipv6_address_is_bracketed():
    hostvars = {
        "h": {"vllm_fleet_internal_address": "fd00::2", "vllm_server_models": [{"name": "m", "port": 8000}]}
    }
    assert targets.vllm_targets(["h"], hostvars, {})[0]["targets"] == ["[fd00::2]:8000"]


@pytest.mark.parametrize(
    ("models", "message"),
    [
        ("tiny:8000", "must be a list"),
        ([{"port": 8000}], "needs a 'name'"),
        (["tiny"], "needs a 'name'"),
        ([{"name": "tiny"}], "needs a 'port'"),
        ([{"name": "tiny", "port": "http"}], "is not a number"),
        ([{"name": "tiny", "port": 0}], "outside 1-65535"),
        ([{"name": "tiny", "port": 70000}], "outside 1-65535"),
        ([{"name": "a", "port": 8000}, {"name": "b", "port": 8000}], "already used by h model a"),
    ],
)
def test_vllm_targets_rejects_bad_models(models, message):
    with pytest.raises(targets.TargetError, match=message):
        targets.vllm_targets(
            ["h"], {"h": {"vllm_server_models": models, "vllm_fleet_internal_address": "a"}}, {}
        )


def test_host_targets():
    configs = targets.host_targets(["gw", "gpu2"], HOSTVARS, 9100, labels={"role": "x"})
    assert configs == [
        {"targets": ["gw:9100"], "labels": {"role": "x", "host": "gw"}},
        {"targets": ["192.168.10.2:9100"], "labels": {"role": "x", "host": "gpu2"}},
    ]
    with pytest.raises(targets.TargetError, match="outside"):
        targets.host_targets(["gw"], HOSTVARS, 99999)


@pytest.mark.parametrize(
    ("hvars", "selected"),
    [
        ({}, True),  # nothing known: assume a GPU host runs it
        ({"dcgm_exporter_enabled": False}, False),
        ({"dcgm_exporter_enabled": "false"}, False),
        ({"dcgm_exporter_enabled": "yes"}, True),
        ({"ansible_facts": {"nvidia_gpu": {"present": False}}}, False),
        ({"ansible_facts": {"nvidia_gpu": {"present": True}}}, True),
        ({"ansible_facts": {"nvidia_gpu": {"state": "timeout"}}}, True),
        ({"ansible_facts": {}}, True),
    ],
)
def test_dcgm_hosts(hvars, selected):
    assert targets.dcgm_hosts(["h"], {"h": hvars}) == (["h"] if selected else [])


def test_sleep_controller_targets_only_where_a_model_sleeps():
    hostvars = {
        **HOSTVARS,
        "s1": {
            "vllm_server_models": [{"name": "a", "port": 8000, "sleep": 1}, {"name": "b", "port": 8001}],
            "ansible_facts": {
                "default_ipv4": {"address": "10.0.0.9"},
                "ansible_local": {"vllm_fleet": {"models": {"a": _record("10.1.1.1", 8000, "img:v1")}}},
            },
        },
        "s2": {
            "vllm_server_models": [{"name": "a", "port": 8000, "sleep": 2}],
            "vllm_fleet_internal_address": "10.0.0.2",
            "vllm_server_sleep_controller_port": 9300,
        },  # fmt: skip
        "s3": {"vllm_server_models": [{"name": "a", "port": 8000, "sleep": False}]},
    }
    got = targets.sleep_controller_targets(["gpu1", "s1", "s2", "s3"], hostvars)
    # where the models were recorded listening, at vllm_server's default port; a host's own port wins
    assert got == [
        {"targets": ["10.1.1.1:9190"], "labels": {"host": "s1"}},
        {"targets": ["10.0.0.2:9300"], "labels": {"host": "s2"}},
    ]
    with pytest.raises(targets.TargetError, match="s4: no address to scrape its sleep controller"):
        targets.sleep_controller_targets(
            ["s4"], {"s4": {"vllm_server_models": [{"name": "a", "port": 1, "sleep": 1}]}}
        )
