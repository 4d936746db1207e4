"""The ``fleet_*`` packages re-export their public names lazily (plugin_utils/lazy_exports.py, #30): every
name of ``__all__`` is the object of the submodule it comes from, submodules read as attributes still work,
and a filter over a light module does not load the planner or every inventory check.
"""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[4]
PACKAGE = "ansible_collections.vllm_fleet.vllm_fleet.plugins"
# the whole planner, and the inventory checks (which call it)
HEAVY = (".fleet_planner.planner", ".fleet_validate.cross")
LAZY = [f"{PACKAGE}.plugin_utils.fleet_planner", f"{PACKAGE}.plugin_utils.fleet_validate"]


@pytest.mark.parametrize("name", LAZY)
def test_every_public_name_is_its_submodules_object(name: str) -> None:
    package = importlib.import_module(name)
    for public in package.__all__:
        value = getattr(package, public)
        origin = getattr(value, "__module__", None)
        if origin is not None and origin.startswith(name + "."):  # a constant has no module to compare
            assert getattr(sys.modules[origin], public) is value, public
    assert set(package.__all__) <= set(dir(package))
    star: dict[str, object] = {}
    exec(f"from {name} import *", star)
    assert set(package.__all__) <= set(star)


def test_submodules_read_as_attributes_and_unknown_names_fail() -> None:
    validate = importlib.import_module(f"{PACKAGE}.plugin_utils.fleet_validate")
    assert validate.cross.check_image_version  # as when __init__ imported every check
    with pytest.raises(AttributeError):
        validate.no_such_name  # noqa: B018


def test_deploy_tables_keep_their_names() -> None:
    deploy = importlib.import_module(f"{PACKAGE}.plugin_utils.fleet_serving.deploy")
    assert deploy.PLANNER_FLAGS is deploy.planner_flags()
    assert deploy.PLAN_FIELDS is deploy.summary_fields()


@pytest.mark.parametrize(
    "filter_name",
    ["vllm_fleet_var", "vllm_serving_kv_cache", "fleet_monitoring_dcgm_hosts", "vllm_fleet_plan_table"],
)
def test_a_filter_over_a_light_module_does_not_load_the_planner(filter_name: str) -> None:
    # a fresh process: this one has loaded everything the other tests import
    code = (
        f"import sys; import {PACKAGE}.filter.{filter_name}; "
        f"print(' '.join(m for m in sys.modules if m.endswith({HEAVY!r})))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONPATH": str(REPO / "collections"), "PATH": ""},
    )
    assert done.stdout.split() == []
