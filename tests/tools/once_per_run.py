"""A fixture's result made once per test run, however many pytest-xdist workers ask for it.

A module-scoped fixture runs once in each worker that gets one of the module's tests: under `-n auto` an
expensive one (a playbook over simulated hosts) ran twice. pytest-xdist's documented way round it is a
file lock in the run's shared temporary folder (filelock), the result kept there as JSON for the other
workers.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

import pytest
from filelock import FileLock


def once_per_run(tmp_path_factory: pytest.TempPathFactory, name: str, make: Callable[[], Any]) -> Any:
    """``make()``'s result, made by the first worker that asks; ``make`` must return JSON data.

    Outside xdist (one process) it is simply made. ``make`` may put files under
    ``tmp_path_factory.mktemp``: the base folder outlives the run's workers.
    """
    if "PYTEST_XDIST_WORKER" not in os.environ:  # not an xdist worker: nobody to share with
        return make()
    shared = tmp_path_factory.getbasetemp().parent / f"once-{name}.json"
    with FileLock(f"{shared}.lock"):
        if shared.is_file():
            return json.loads(shared.read_text(encoding="utf-8"))
        result = make()
        shared.write_text(json.dumps(result), encoding="utf-8")
        return result
