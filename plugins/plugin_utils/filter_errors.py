"""Error handling shared by the filter plugins in plugins/filter/ (control node only).

Unlike the packages beside it this module imports Ansible: it turns the errors a filter raises on bad
input into AnsibleFilterError naming the filter, so a failed task says which filter refused a value.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ansible.errors import AnsibleFilterError

Errors = type[Exception] | tuple[type[Exception], ...]


def wrap_filter(name: str, func: Callable[..., Any], errors: Errors = (ValueError, TypeError)) -> Any:
    """`func` raising AnsibleFilterError("<name>: <message>") in place of `errors`."""

    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except errors as exc:
            raise AnsibleFilterError(f"{name}: {exc}") from exc

    call.__doc__ = func.__doc__
    return call


def wrap_filters(
    table: Mapping[str, Callable[..., Any]], errors: Errors = (ValueError, TypeError)
) -> dict[str, Any]:
    """Every filter of `table` (name -> function) wrapped by wrap_filter."""
    return {name: wrap_filter(name, func, errors) for name, func in table.items()}


def short_repr(value: Any) -> str:
    """``repr(value)`` cut to 200 characters, for a value named in a filter's error."""
    text = repr(value)
    return text if len(text) <= 200 else text[:197] + "..."
