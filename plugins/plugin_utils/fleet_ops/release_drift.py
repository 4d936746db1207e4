"""Drift between what vllm-fleet emits and what one vLLM release accepts: CLI flags and metric names.

vLLM renames and removes flags and metrics between releases. The inputs are read from the release itself
(`vllm serve --help=all`, `vllm bench serve --help=all`, the metric names in its source), so a check against
them fails naming the flag or metric, where vllm-fleet uses it, and the release. The tool-call parser names
model_features claims for a release are checked against the choices its help offers (parser_drift).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from ..fleet_planner.options import OPTIONS
from ..fleet_serving import model_features, start_cache
from ..fleet_serving.deploy import FEATURE_FLAGS, ROLE_FLAGS

# An argparse help option line: two spaces, the flag and its aliases ("--a A, --b A", "-tp TP, --x TP").
_HELP_OPTION = re.compile(r"^ {2}(-{1,2}[A-Za-z0-9][^\n]*?)(?: {2,}|$)")
_METRIC = re.compile(r"vllm:[a-z0-9_]+")
_SERIES_SUFFIX = re.compile(r"_(bucket|sum|count|created|total)$")
# Flags the role passes another way (the model directory is positional, the key an environment variable).
_NOT_ON_THE_COMMAND_LINE = ("--model", "--api-key")
_LEGACY_FEATURE_FLAGS = ("--task", "--enable-reasoning")
# aliases FEATURE_FLAGS guards in extra_args but the role never renders (it writes --speculative-config)
_GUARDED_ALIASES = ("-sc",)


def help_flags(text: str) -> frozenset[str]:
    """Every option string an argparse ``--help`` output defines (aliases and ``--no-`` forms included)."""
    flags: set[str] = set()
    for line in text.splitlines():
        match = _HELP_OPTION.match(line)
        if not match:
            continue
        for part in match.group(1).split(", "):
            token = part.split(" ", 1)[0]
            if token.startswith("-"):
                flags.add(token)
    return frozenset(flags)


def emitted_serve_flags() -> dict[str, str]:
    """Every ``vllm serve`` flag the serving role can put on a command line -> the variable that sets it."""
    emitted = {flag: owner for flag, owner in ROLE_FLAGS.items() if flag not in _NOT_ON_THE_COMMAND_LINE}
    # the per-model feature flags of current releases (--task and --enable-reasoning go to releases before
    # 0.10.1 / 0.9 only, which a current image does not have)
    emitted |= {
        flag: owner
        for flag, owner in FEATURE_FLAGS.items()
        if flag not in _LEGACY_FEATURE_FLAGS and flag not in _GUARDED_ALIASES
    }
    for option in OPTIONS:
        if option.vllm_flag is not None:
            emitted[option.vllm_flag] = f"the planner (vllm_server_models[].overrides.{option.name})"
    return emitted


def template_flags(text: str, where: str) -> dict[str, str]:
    """The quoted ``--flags`` a task file builds a command line from -> the file."""
    return {flag: where for flag in re.findall(r"'(--[a-z0-9][a-z0-9-]*)'", text)}


def flag_drift(emitted: Mapping[str, str], known: Iterable[str], version: str, command: str) -> list[str]:
    """One line per emitted flag that ``command`` of vLLM ``version`` does not define."""
    known_flags = frozenset(known)
    return [
        f"vLLM {version} `{command}` has no {flag} (set by {owner}): the release renamed or removed it; "
        "pin vllm_server_vllm_version and vllm_server_image to a release that has it"
        for flag, owner in sorted(emitted.items())
        if flag not in known_flags
    ]


def _base(name: str) -> str:
    return _SERIES_SUFFIX.sub("", name)


def source_metrics(text: str) -> frozenset[str]:
    """Metric names a release's source defines (quoted ``vllm:`` names), without series suffixes."""
    return frozenset(_base(name) for name in re.findall(r"[\"'](vllm:[a-z0-9_]+)[\"']", text))


def metric_drift(sources: Mapping[str, str], known: Iterable[str], version: str) -> list[str]:
    """One line per ``vllm:`` metric a file uses that vLLM ``version`` does not define.

    ``sources``: file -> text. A line that offers alternatives (``a or b``, the PromQL way to span releases)
    passes when one alternative uses only metrics the release has.
    """
    have = frozenset(_base(name) for name in known)
    problems: list[str] = []
    for where, text in sorted(sources.items()):
        for number, line in enumerate(text.splitlines(), 1):
            parts = [set(_METRIC.findall(part)) for part in re.split(r"\bor\b", line)]
            parts = [part for part in parts if part]
            if not parts or any(all(_base(m) in have for m in part) for part in parts):
                continue
            for name in sorted(set().union(*parts)):
                if _base(name) not in have:
                    problems.append(
                        f"{where}:{number}: vLLM {version} has no metric {name}: the release renamed or "
                        f"removed it; use its new name (with `or {name}` for older releases)"
                    )
    return problems


def parser_drift(serve_help: str, version: str) -> list[str]:
    """One line per tool-call parser model_features claims for ``version`` that its help does not offer."""
    return model_features.parser_table_drift(serve_help, version)


def subcommands(text: str) -> frozenset[str]:
    """The subcommands ``vllm --help`` offers (its ``{serve,bench,...}`` choices)."""
    match = re.search(r"\{([a-z0-9_,-]+)\}", text)
    return frozenset(match.group(1).split(",")) if match else frozenset()


def cache_drift(vllm_help: str, env_names: Iterable[str], version: str) -> list[str]:
    """One line per disagreement between start_cache and the release: ``vllm download-kernels`` gated on but
    missing (the role would run a command the release lacks) or present but gated off (the gate is too late),
    and each ``VLLM_`` cache variable the role sets that the release does not read."""
    have = "download-kernels" in subcommands(vllm_help)
    gated = start_cache.has_download_kernels(version)
    since = ".".join(map(str, start_cache.DOWNLOAD_KERNELS_SINCE))
    problems = []
    if gated and not have:
        problems.append(
            f"vLLM {version} has no `vllm download-kernels` (vllm_server runs it when an image arrives, from "
            f"{since}: fleet_serving/start_cache.DOWNLOAD_KERNELS_SINCE): the release renamed or removed it"
        )
    elif have and not gated:
        problems.append(
            f"vLLM {version} has `vllm download-kernels` but "
            f"fleet_serving/start_cache.DOWNLOAD_KERNELS_SINCE is {since}: lower it to this release"
        )
    known = frozenset(env_names)
    problems += [
        f"vLLM {version} does not read {name} (vllm_server points a cache there: fleet_serving/start_cache):"
        " the release renamed or removed it"
        for name in sorted(start_cache.cache_env())
        if name.startswith("VLLM_") and name not in known
    ]
    return problems
