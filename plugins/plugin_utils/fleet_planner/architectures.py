"""Architectures: whether the planned vLLM release registers the model's `architectures` entry.

vLLM picks the model class from config.json `architectures` through its registry
(vllm/model_executor/models/registry.py) and refuses a model none of whose names it registers. The
table (data/architectures.json) records, per architecture, the first release listing it and, where a
later release dropped it, the last.
"""

from __future__ import annotations

import difflib

from .config import ModelArch
from .versions import Version, VersionInfo, parse_version
from .vllm_tables import newest_read, table


def _supported(name: str, v: Version) -> bool:
    entry = table("architectures")["architectures"].get(name)
    if entry is None:
        return False
    last = entry.get("last")
    return parse_version(entry["first"]) <= v and (last is None or v <= parse_version(last))


def _not_supported(archs: list[str], v: str) -> str:
    """vLLM's wording (`_raise_for_unsupported`), the supported list shortened."""
    return (
        f"Model architectures {archs} are not supported for now. Supported architectures: [...] (vLLM {v})."
    )


def _why(name: str, vinfo: VersionInfo) -> tuple[str, str]:
    """(why this release lacks the architecture, the fix)."""
    entry = table("architectures")["architectures"].get(name)
    if entry is not None and parse_version(entry["first"]) > vinfo.version:
        return (
            f"vLLM added {name} in {entry['first']}.",
            f"set vllm_version >= {entry['first']} and run an image of that release.",
        )
    if entry is not None and entry.get("last"):
        return (
            f"vLLM removed {name} after {entry['last']}.",
            f"set vllm_version <= {entry['last']}, or serve a checkpoint of an architecture vLLM "
            f"{vinfo.text} registers.",
        )
    close = difflib.get_close_matches(name, list(table("architectures")["architectures"]), n=3, cutoff=0.75)
    hint = f" (close: {', '.join(close)})" if close else ""
    return (
        f"No vLLM release up to {table('architectures')['newest']} registers {name}{hint}.",
        "set config.json architectures to the model class of the published checkpoint.",
    )


def architecture_problems(arch: ModelArch, vinfo: VersionInfo) -> tuple[list[str], list[str]]:
    """(errors, warnings) for the model's architectures on this release."""
    archs = list(arch.architectures)
    v = vinfo.version
    if not archs:
        return [
            f'architectures: {_not_supported([], vinfo.text)} config.json has no "architectures" (vLLM '
            'logs "No model architectures are specified"). Fix: add the checkpoint\'s architectures list '
            'to config.json, e.g. "architectures": ["LlamaForCausalLM"].'
        ], []
    if any(_supported(a, v) for a in archs):
        return [], []
    if v > newest_read() and not any(a in table("architectures")["architectures"] for a in archs):
        return [], [
            f"architectures {archs} are not in the registries read (up to vLLM "
            f"{table('architectures')['newest']}); vLLM {vinfo.text} is assumed to register them"
        ]
    why, fix = _why(archs[0], vinfo)
    return [f"architectures: {_not_supported(archs, vinfo.text)} {why} Fix: {fix}"], []
