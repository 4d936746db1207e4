"""Each variable against its role's argument_specs: types, choices, required and unknown sub-options.

Type conversion follows Ansible's own (ArgumentSpecValidator, as role argument validation does), except that a
list or a dict is never accepted where a string is expected: Ansible would quietly turn it into its repr.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from .names import closest
from .problems import Problem, Unresolved
from .specs import Option

_LEAF_KEYS = ("type", "choices", "elements", "no_log")
_SCALAR_TYPES = ("str", "path", "int", "float", "bool", "bytes", "bits", "jsonarg")


def check_option(host: str, name: str, value: Any, option: Option) -> list[Problem]:
    return _check(host, name, value, option.spec, option.role)


def _describe(spec: Mapping[str, Any]) -> str:
    kind = spec.get("type", "str")
    if kind == "list" and spec.get("elements"):
        return f"a list of {spec['elements']}"
    return {
        "str": "a string",
        "int": "an integer",
        "bool": "a boolean",
        "dict": "a dict",
        "list": "a list",
    }.get(kind, f"a {kind}")


def _check(host: str, path: str, value: Any, spec: Mapping[str, Any], role: str) -> list[Problem]:
    if value is None or isinstance(value, Unresolved):
        return []
    where = f"roles/{role}/meta/argument_specs.yml"
    kind = spec.get("type", "str")
    if kind in _SCALAR_TYPES and isinstance(value, (list, dict, Mapping)):
        return [
            Problem(
                path,
                f"is {type(value).__name__}, expected {_describe(spec)}",
                f"give {_describe(spec)} ({where})",
                host,
            )
        ]
    leaf = {k: spec[k] for k in ("type", "choices") if k in spec}
    result = ArgumentSpecValidator({"value": leaf}).validate({"value": value})
    if result.error_messages:
        message = str(result.errors[0])
        if "must be one of" in message:
            choices = ", ".join(str(c) for c in spec.get("choices") or [])
            guess = closest(str(value), [str(c) for c in spec.get("choices") or []], 0.6)
            what = f"{value!r} is not one of {choices}" + (f"; did you mean {guess}?" if guess else "")
            return [Problem(path, what, f"use one of {choices} ({where})", host)]
        return [
            Problem(path, f"{value!r} is not {_describe(spec)}", f"give {_describe(spec)} ({where})", host)
        ]
    converted = result.validated_parameters["value"]
    problems: list[Problem] = []
    if kind == "list" and isinstance(converted, list) and spec.get("elements"):
        element = {"type": spec["elements"]}
        if spec.get("options"):
            element["options"] = spec["options"]
        for index, item in enumerate(value if isinstance(value, list) else converted):
            problems += _check(host, f"{path}[{index}]", item, element, role)
    elif kind == "dict" and isinstance(value, Mapping) and spec.get("options"):
        options = spec["options"]
        for key in value:
            if key not in options:
                guess = closest(str(key), options, 0.6)
                what = f"has no key {key!r}" + (f"; did you mean {guess}?" if guess else "")
                fix = f"rename {key} to {guess}" if guess else f"use only {', '.join(options)} ({where})"
                problems.append(Problem(f"{path}.{key}", what, fix, host))
        for key, sub in options.items():
            if (sub or {}).get("required") and key not in value:
                problems.append(
                    Problem(
                        f"{path}.{key}", "is missing", f"add {key} ({_describe(sub or {})}) to {path}", host
                    )
                )
            elif key in value:
                problems += _check(host, f"{path}.{key}", value[key], sub or {}, role)
    return problems
