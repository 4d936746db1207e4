"""Every filter the collection exports has a sidecar doc that ansible-doc reads and that matches its function.

The filters are found the way Ansible finds them: every FilterModule of plugins/filter/*.py. For each one
``ansible-doc -t filter --json vllm_fleet.vllm_fleet.<name>`` must answer with a short description and with
options that are the function's parameters: ``_input`` for the first (the value before the ``|``), then the
others by name; ``positional`` lists those that can be given by position, in order; an option is required
exactly when its parameter has no default. A filter added without ``plugins/filter/<name>.yml`` fails here.
"""

from __future__ import annotations

import importlib
import inspect
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[4]
FILTER_DIR = REPO / "plugins" / "filter"
NAMESPACE = "vllm_fleet.vllm_fleet"
PACKAGE = "ansible_collections.vllm_fleet.vllm_fleet.plugins.filter"


def exported_filters() -> dict[str, tuple[str, Callable[..., Any]]]:
    """Filter name -> (plugin file, function) for every FilterModule under plugins/filter."""
    found: dict[str, tuple[str, Callable[..., Any]]] = {}
    for path in sorted(FILTER_DIR.glob("*.py")):
        if path.stem.startswith("_"):
            continue
        module = importlib.import_module(f"{PACKAGE}.{path.stem}")
        if not hasattr(module, "FilterModule"):
            continue
        for name, func in module.FilterModule().filters().items():
            assert name not in found, f"filter {name} is exported by both {found[name][0]} and {path.name}"
            found[name] = (path.name, func)
    return found


def real_function(func: Callable[..., Any]) -> Callable[..., Any]:
    """The function behind the error wrappers of plugin_utils/filter_errors.py (they keep it as ``func``)."""
    seen = set()
    while id(func) not in seen:
        seen.add(id(func))
        func = inspect.unwrap(func)
        inner = inspect.getclosurevars(func).nonlocals.get("func") if inspect.isfunction(func) else None
        if not callable(inner):
            return func
        func = inner
    return func


FILTERS = exported_filters()


def ansible_doc(*args: str) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).with_name("ansible-doc")
    command = str(exe) if exe.exists() else shutil.which("ansible-doc")
    if command is None:
        pytest.skip("ansible-doc is not installed")
    env = {
        **os.environ,
        "ANSIBLE_COLLECTIONS_PATH": str(REPO / "collections"),
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_DEPRECATION_WARNINGS": "0",
    }
    return subprocess.run(
        [command, "-t", "filter", *args], capture_output=True, text=True, env=env, cwd=REPO, check=False
    )


@pytest.fixture(scope="module")
def docs() -> dict[str, Any]:
    """Filter name -> its ``doc`` from ansible-doc; names whose doc ansible-doc cannot read are absent."""
    names = [f"{NAMESPACE}.{n}" for n in FILTERS]
    run = ansible_doc("--json", *names)
    if run.returncode == 0:
        answer = json.loads(run.stdout)
    else:  # one missing doc fails the whole call: ask for each, to name the missing ones
        answer = {}
        for name in names:
            one = ansible_doc("--json", name)
            if one.returncode == 0:
                answer.update(json.loads(one.stdout))
    return {key.removeprefix(NAMESPACE + "."): (value or {}).get("doc") for key, value in answer.items()}


def expected_options(func: Callable[..., Any]) -> tuple[list[str], list[str], set[str]]:
    """(option names, positional names, required names) the doc must show for ``func``."""
    params = list(inspect.signature(real_function(func)).parameters.values())
    assert params, "a filter takes at least the value it filters"
    assert params[0].kind in (params[0].POSITIONAL_ONLY, params[0].POSITIONAL_OR_KEYWORD)
    assert not [p for p in params if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD)], (
        "the signature hides the filter's arguments (*args/**kwargs): the doc cannot be checked"
    )
    names = ["_input"] + [p.name for p in params[1:]]
    positional = ["_input"] + [p.name for p in params[1:] if p.kind is not p.KEYWORD_ONLY]
    required = {"_input"} | {p.name for p in params[1:] if p.default is inspect.Parameter.empty}
    return names, positional, required


def test_filters_are_found() -> None:
    assert len(FILTERS) >= 63, sorted(FILTERS)


@pytest.mark.parametrize("name", sorted(FILTERS))
def test_filter_doc(name: str, docs: dict[str, Any]) -> None:
    source, func = FILTERS[name]
    doc = docs.get(name)
    assert doc, (
        f"ansible-doc has no documentation for {NAMESPACE}.{name} (exported by plugins/filter/{source}): "
        f"write plugins/filter/{name}.yml"
    )
    assert doc.get("name") == name
    assert str(doc.get("short_description") or "").strip(), f"{name}.yml has no short_description"
    assert doc.get("description"), f"{name}.yml has no description"
    assert doc.get("version_added"), f"{name}.yml has no version_added"
    assert doc.get("author"), f"{name}.yml has no author"

    names, positional, required = expected_options(func)
    options = doc.get("options") or {}
    assert sorted(options) == sorted(names), (
        f"{name}.yml documents {sorted(options)}; {real_function(func).__qualname__} takes {names}"
    )
    shown = doc.get("positional") or []
    if isinstance(shown, str):
        shown = [part.strip() for part in shown.split(",") if part.strip()]
    assert shown == positional, f"{name}.yml: positional should be {', '.join(positional)}"
    for option, spec in options.items():
        assert spec.get("description"), f"{name}.yml: option {option} has no description"
        assert spec.get("type"), f"{name}.yml: option {option} has no type"
        assert bool(spec.get("required")) == (option in required), (
            f"{name}.yml: option {option} should {'' if option in required else 'not '}be required"
        )


def test_every_sidecar_documents_an_exported_filter() -> None:
    stray = sorted(p.name for p in FILTER_DIR.glob("*.yml") if p.stem not in FILTERS)
    assert not stray, f"docs of filters that no FilterModule exports: {stray}"


def test_listing_shows_every_filter_with_its_description() -> None:
    run = ansible_doc("--json", "-l", NAMESPACE)
    assert run.returncode == 0, run.stderr
    listed = {key.removeprefix(NAMESPACE + "."): value for key, value in json.loads(run.stdout).items()}
    assert sorted(listed) == sorted(FILTERS)
    undocumented = sorted(n for n, text in listed.items() if not text or text == "UNDOCUMENTED")
    assert not undocumented, f"listed without a description: {undocumented}"
