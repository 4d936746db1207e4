"""Each filter lives in a file named after it: ``plugins/filter/<name>.py`` exports the one filter ``<name>``
and ``plugins/filter/<name>.yml`` documents it, so the file a filter's code or doc is in follows from its
name (issue #29). A second filter added to a file, a file named otherwise, or a filter without its doc (or
a doc without its filter) fails here.
"""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[4]
FILTER_DIR = REPO / "plugins" / "filter"
PACKAGE = "ansible_collections.vllm_fleet.vllm_fleet.plugins.filter"
PLUGIN_FILES = sorted(FILTER_DIR.glob("*.py"))


def test_there_are_filter_files() -> None:
    assert len(PLUGIN_FILES) > 50, f"expected the collection's filters in {FILTER_DIR}"


@pytest.mark.parametrize("path", PLUGIN_FILES, ids=lambda p: p.name)
def test_a_filter_file_exports_the_one_filter_it_is_named_after(path: Path) -> None:
    module = importlib.import_module(f"{PACKAGE}.{path.stem}")
    assert hasattr(module, "FilterModule"), f"{path.name}: no FilterModule"
    assert list(module.FilterModule().filters()) == [path.stem]


def test_every_filter_file_has_its_doc_and_every_doc_its_file() -> None:
    code = {p.stem for p in PLUGIN_FILES}
    docs = {p.stem for p in FILTER_DIR.glob("*.yml")}
    assert sorted(docs - code) == [], "sidecar docs without a plugins/filter/<name>.py"
    assert sorted(code - docs) == [], "filter files without a plugins/filter/<name>.yml"
    assert not list(FILTER_DIR.glob("*.yaml")), "filter docs are <name>.yml"
