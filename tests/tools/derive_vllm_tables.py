"""Derive the planner's per-release vLLM tables from the Python sources of vLLM's released wheels.

Usage: python tests/tools/derive_vllm_tables.py SRC_ROOT OUT_DIR, where SRC_ROOT/<version>/vllm/...
holds the files unpacked from each `vllm-<version>` wheel on PyPI. Writes OUT_DIR/architectures.json
(first and last release whose model registry lists each architecture), OUT_DIR/quant_capability.json
(each quantization method's releases and `get_min_capability()`) and OUT_DIR/kv_cache_dtypes.json (the
`--kv-cache-dtype` choices per release). Files read per release: vllm/model_executor/models/registry.py
(0.6+), vllm/model_executor/models/__init__.py (0.2.2-0.5), vllm/model_executor/model_loader.py (0.2.0),
vllm/model_executor/layers/quantization/**.py, vllm/config.py / vllm/config/cache.py and
vllm/engine/arg_utils.py.
"""

from __future__ import annotations

import ast
import json
import re
import sys
from pathlib import Path

REGISTRY_FILES = (
    "vllm/model_executor/models/registry.py",
    "vllm/model_executor/models/__init__.py",
    "vllm/model_executor/model_loader.py",
)


def vkey(v: str) -> tuple[int, ...]:
    return tuple(int(p) for p in v.split("."))


def registry_archs(root: Path) -> set[str]:
    out: set[str] = set()
    for rel in REGISTRY_FILES:
        path = root / rel
        if not path.is_file():
            continue
        tree = ast.parse(path.read_text())
        for node in tree.body:
            targets = []
            if isinstance(node, ast.Assign):
                targets, value = node.targets, node.value
            elif isinstance(node, ast.AnnAssign) and node.value is not None:
                targets, value = [node.target], node.value
            names = [t.id for t in targets if isinstance(t, ast.Name)]
            if not any("MODELS" in n or "REGISTRY" in n for n in names):
                continue
            if isinstance(value, ast.Dict):
                for k in value.keys:
                    if isinstance(k, ast.Constant) and isinstance(k.value, str):
                        out.add(k.value)
    return out


def _const_return(fn: ast.FunctionDef) -> object:
    rets = [n for n in ast.walk(fn) if isinstance(n, ast.Return)]
    if len(rets) == 1 and isinstance(rets[0].value, ast.Constant):
        return rets[0].value.value
    return None


def quant_caps(root: Path) -> dict[str, int]:
    out: dict[str, int] = {}
    qdir = root / "vllm/model_executor/layers/quantization"
    if not qdir.is_dir():
        return out
    for path in sorted(qdir.rglob("*.py")):
        try:
            tree = ast.parse(path.read_text())
        except SyntaxError:
            continue
        for cls in (n for n in tree.body if isinstance(n, ast.ClassDef)):
            methods = {f.name: f for f in cls.body if isinstance(f, ast.FunctionDef)}
            if "get_name" not in methods or "get_min_capability" not in methods:
                continue
            name, cap = _const_return(methods["get_name"]), _const_return(methods["get_min_capability"])
            if isinstance(name, str) and isinstance(cap, int):
                out[name] = cap
    return out


_METHODS_LITERAL = re.compile(r"QuantizationMethods\s*=\s*Literal\[(.*?)\]", re.S)
_METHODS_DICT = re.compile(
    r"(?:QUANTIZATION_METHODS|_QUANTIZATION_CONFIG_REGISTRY)[^=]*=\s*[\[{](.*?)[\]}]", re.S
)


def quant_names(root: Path) -> set[str]:
    """The `--quantization` names a release accepts (QuantizationMethods / QUANTIZATION_METHODS)."""
    path = root / "vllm/model_executor/layers/quantization/__init__.py"
    if not path.is_file():
        return set()
    text = path.read_text()
    m = _METHODS_LITERAL.search(text) or _METHODS_DICT.search(text)
    return set(re.findall(r"['\"]([\w.-]+)['\"]\s*[:,\]]?", m.group(1))) if m else set()


_CACHE_DTYPE = re.compile(r"CacheDType\s*=\s*Literal\[([^\]]*)\]", re.S)
_CHOICES = re.compile(r"['\"]--kv-cache-dtype['\"],.*?choices=\[([^\]]*)\]", re.S)


def kv_dtypes(root: Path) -> list[str]:
    for rel in ("vllm/config/cache.py", "vllm/config.py", "vllm/engine/arg_utils.py"):
        path = root / rel
        if not path.is_file():
            continue
        text = path.read_text()
        m = _CACHE_DTYPE.search(text) or _CHOICES.search(text)
        if m:
            return re.findall(r"['\"]([\w.-]+)['\"]", m.group(1))
    return []


def main(src: str, out_dir: str) -> None:
    versions = sorted((p.name for p in Path(src).iterdir() if p.is_dir()), key=vkey)
    first: dict[str, str] = {}
    last: dict[str, str] = {}
    caps: dict[str, list[list[object]]] = {}
    names_first: dict[str, str] = {}
    names_last: dict[str, str] = {}
    kvs: list[list[object]] = []
    for v in versions:
        root = Path(src) / v
        for a in registry_archs(root):
            first.setdefault(a, v)
            last[a] = v
        for name in quant_names(root):
            names_first.setdefault(name, v)
            names_last[name] = v
        for name, cap in quant_caps(root).items():
            names_first.setdefault(name, v)
            names_last[name] = max(names_last.get(name, v), v, key=vkey)
            hist = caps.setdefault(name, [])
            if not hist or hist[-1][1] != cap:
                hist.append([v, cap])
        kv = kv_dtypes(root)
        if kv and (not kvs or kvs[-1][1] != kv):
            kvs.append([v, kv])
    newest = versions[-1]
    archs = {
        a: {"first": first[a], **({"last": last[a]} if last[a] != newest else {})} for a in sorted(first)
    }
    methods = {
        n: {
            "first": names_first[n],
            **({"last": names_last[n]} if names_last[n] != versions[-1] else {}),
            "min_capability": caps.get(n, []),
        }
        for n in sorted(names_first)
    }
    read = f"vllm wheels from PyPI, releases read: {', '.join(versions)}"
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "architectures.json").write_text(
        json.dumps({"source": read, "newest": newest, "architectures": archs}, indent=1) + "\n"
    )
    (out / "quant_capability.json").write_text(
        json.dumps({"source": read, "newest": newest, "methods": methods}, indent=1) + "\n"
    )
    (out / "kv_cache_dtypes.json").write_text(
        json.dumps({"source": read, "newest": newest, "choices": kvs}, indent=1) + "\n"
    )


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
