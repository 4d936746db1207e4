"""vllm_fleet_preload(pattern): the host pattern unchanged. In a play's ``hosts:`` it loads the collection's
filters once, in the controller's main process, before any task runs.

ansible-core (2.19.14: ``Jinja2Loader.get_with_context``) resolves a collection filter by importing every
file of the collection's plugins/filter, and does so in the worker process it forks for each task on each
host, where the loaded files die with the worker: every task using one of this collection's filters paid it
again on every host (0.4-0.7 s a task a host on the 2-core lab machine, loaded). A play's ``hosts:`` is
templated in the main process, so every worker forked after it inherits the loaded filters.
"""

from __future__ import annotations

from typing import Any


def preload(pattern: Any) -> Any:
    """The pattern as given: resolving this filter is what loads the others."""
    return pattern


class FilterModule:
    """The collection's filters loaded before the first task."""

    def filters(self) -> dict[str, Any]:
        return {"vllm_fleet_preload": preload}
