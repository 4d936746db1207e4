"""Filter plugin shims: vllm_fleet_plan and vllm_fleet_gpu_spec inside Jinja, and their errors."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.vllm_fleet.vllm_fleet.plugins.filter import vllm_fleet_gpu_spec, vllm_fleet_plan
from jinja2 import Environment
from planner_helpers import config

FACTS = {
    "present": True,
    "count": 2,
    "driver_version": "580.159.04",
    "cuda_version": "13.0",
    "gpus": [
        {
            "index": i,
            "uuid": f"GPU-{i}",
            "name": "NVIDIA H200",
            "memory_total_mib": 143771,
            "compute_capability": "9.0",
            "pci_bus_id": f"00000000:0{i}:00.0",
            "mig_mode": "Disabled",
            "persistence_mode": "Enabled",
            "numa_node": 0,
        }
        for i in range(2)
    ],
    "topology": {},
}


# the two filters a template composes, each from its own plugin file
FILTERS = {**vllm_fleet_plan.FilterModule().filters(), **vllm_fleet_gpu_spec.FilterModule().filters()}


@pytest.fixture(name="env")
def env_fixture() -> Environment:
    env = Environment()
    env.filters.update(FILTERS)
    return env


def test_filters_compose_in_jinja(env: Environment) -> None:
    tpl = env.from_string(
        "{{ (cfg | vllm_fleet_plan(facts | vllm_fleet_gpu_spec, {'vllm_version': '0.20.1'}))"
        ".tensor_parallel_size }}"
    )
    assert tpl.render(cfg=config("meta-llama__Meta-Llama-3.1-70B"), facts=FACTS) == "2"


def test_gpu_spec_from_facts(env: Environment) -> None:
    spec = FILTERS["vllm_fleet_gpu_spec"](FACTS, nodes=2, shared="false")
    assert spec == {
        "name": "NVIDIA H200",
        "memory_mib": 143771,
        "count": 2,
        "compute_capability": "9.0",
        "nodes": 2,
        "shared": False,
        "mixed": False,
        "models": {"NVIDIA H200": 2},
        "excluded": [],
    }


@pytest.mark.parametrize(
    ("name", "args", "message"),
    [
        ("vllm_fleet_gpu_spec", ({"present": False, "gpus": []},), "vllm_fleet_gpu_spec: no NVIDIA GPU"),
        ("vllm_fleet_gpu_spec", ("not a dict",), "vllm_fleet_gpu_spec: expected the nvidia_gpu facts"),
        ("vllm_fleet_gpu_spec", (FACTS, 1, "maybe"), "vllm_fleet_gpu_spec: shared"),
        ("vllm_fleet_plan", ({"hidden_size": 8}, {"memory_mib": 1}), "vllm_fleet_plan: model_config"),
        ("vllm_fleet_plan", ("nope", {"memory_mib": 1}), "vllm_fleet_plan: model_config: expected a mapping"),
    ],
)
def test_invalid_input_raises_filter_error(name: str, args: tuple, message: str) -> None:
    with pytest.raises(AnsibleFilterError, match=message):
        FILTERS[name](*args)


def test_infeasible_plan_is_data_not_error() -> None:
    result = FILTERS["vllm_fleet_plan"](
        config("meta-llama__Meta-Llama-3.1-405B"), {"memory_mib": 24564, "count": 1}
    )
    assert result["feasible"] is False and result["errors"]
