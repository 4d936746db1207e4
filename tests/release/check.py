#!/usr/bin/env python3
"""Every flag and metric vllm-fleet uses, checked against the vLLM release in an image.

Reads the release itself (`vllm serve --help=all`, `vllm bench serve --help=all`, `vllm --help`, the metric
names in its installed source and the environment variables of vllm/envs.py) from a container of IMAGE, then
checks the serving role's flags, the bench role's flags, the metrics the alert rules, the dashboard and the
rollout gates read, and the `vllm download-kernels` gate and cache variables of the start caches. Exit 1 names
each drift.
Usage: tests/release/check.py IMAGE [--capture DIR]   (--capture keeps what was read, for the unit tests)
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "collections"))  # this clone as the collection vllm_fleet.vllm_fleet

from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_ops import (  # noqa: E402
    release_drift,
)

# Files whose `vllm:` metric names must exist in the release.
METRIC_USERS = (
    "roles/monitoring/templates/etc/prometheus/rules/vllm-fleet.rules.yml.j2",
    "roles/grafana/files/dashboards/vllm-fleet.json",
    "plugins/plugin_utils/fleet_rollout/metrics.py",
)
BENCH_TASKS = "roles/fleet_bench/tasks/step.yml"
# Prints the release and every quoted `vllm:` name in its installed source (run inside the image).
METRICS_SCRIPT = """
import pathlib, re, vllm
print(vllm.__version__)
root = pathlib.Path(vllm.__file__).parent
names = set()
for f in root.rglob("*.py"):
    names.update(re.findall(r"[\\"'](vllm:[a-z0-9_]+)[\\"']", f.read_text(errors="replace")))
print("\\n".join(f'"{n}"' for n in sorted(names)))
"""

# Prints the name of every environment variable the release reads (vllm/envs.py), one a line.
ENVS_SCRIPT = """
import vllm.envs
print("\\n".join(sorted(vllm.envs.environment_variables)))
"""


def _in_image(image: str, entrypoint: str, *args: str, stdin: str | None = None) -> str:
    result = subprocess.run(
        ["docker", "run", "--rm", "-i", "--entrypoint", entrypoint, image, *args],
        input=stdin,
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        sys.exit(f"{image}: `{entrypoint} {' '.join(args)}` failed: {result.stderr.strip()[-500:]}")
    return result.stdout


def expressions(path: str, text: str) -> str:
    """The text of a file where metrics are read: a dashboard's and a rule file's PromQL, a module's code."""
    if path.endswith(".json"):
        found: list[str] = []

        def walk(node: object) -> None:
            if isinstance(node, dict):
                found.extend(str(v) for k, v in node.items() if k == "expr")
                for value in node.values():
                    walk(value)
            elif isinstance(node, list):
                for value in node:
                    walk(value)

        walk(json.loads(text))
        return "\n".join(" ".join(expr.split()) for expr in found)
    if ".yml" in path:  # each `expr:` with its folded continuation lines, as one line
        exprs, current, indent = [], None, 0
        for line in text.splitlines():
            stripped = line.lstrip()
            if current is not None and stripped and len(line) - len(stripped) > indent:
                current.append(stripped)
                continue
            if current is not None:
                exprs.append(" ".join(current).strip())
                current = None
            if stripped.startswith("expr:"):
                current, indent = [stripped[5:].strip().removeprefix(">-").strip()], len(line) - len(stripped)
        if current is not None:
            exprs.append(" ".join(current).strip())
        return "\n".join(exprs)
    return text


def check(
    version: str,
    serve_help: str,
    bench_help: str,
    metrics_source: str,
    vllm_help: str | None = None,
    env_names: str | None = None,
) -> list[str]:
    """Every drift of this checkout against one release's help texts, metric names and, given ``vllm --help``
    and the names of its environment variables (one a line), its subcommands and cache variables."""
    bench_tasks = (ROOT / BENCH_TASKS).read_text()
    caches = (
        release_drift.cache_drift(vllm_help, env_names.split(), version)
        if vllm_help is not None and env_names is not None
        else []
    )
    return [
        *caches,
        *release_drift.flag_drift(
            release_drift.emitted_serve_flags(), release_drift.help_flags(serve_help), version, "vllm serve"
        ),
        *release_drift.flag_drift(
            release_drift.template_flags(bench_tasks, BENCH_TASKS),
            release_drift.help_flags(bench_help),
            version,
            "vllm bench serve",
        ),
        *release_drift.parser_drift(serve_help, version),
        *release_drift.metric_drift(
            {path: expressions(path, (ROOT / path).read_text()) for path in METRIC_USERS},
            release_drift.source_metrics(metrics_source),
            version,
        ),
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("image", help="a vLLM image, e.g. the lab's vllm-fleet/vllm-cpu:0.32.0")
    parser.add_argument("--capture", type=Path, help="keep what was read from the release in this folder")
    args = parser.parse_args()
    # each read a container of its own, side by side: each spends its time importing vllm
    with ThreadPoolExecutor(max_workers=5) as pool:
        vllm_help, env_names, serve_help, bench_help, printed = (
            future.result()
            for future in [
                pool.submit(_in_image, args.image, "vllm", "--help"),
                pool.submit(_in_image, args.image, "python3", "-", stdin=ENVS_SCRIPT),
                pool.submit(_in_image, args.image, "vllm", "serve", "--help=all"),
                pool.submit(_in_image, args.image, "vllm", "bench", "serve", "--help=all"),
                pool.submit(_in_image, args.image, "python3", "-", stdin=METRICS_SCRIPT),
            ]
        )
    version, _sep, metrics_source = printed.partition("\n")
    if args.capture:
        args.capture.mkdir(parents=True, exist_ok=True)
        for name, text in (
            ("serve-help.txt", serve_help),
            ("bench-serve-help.txt", bench_help),
            ("metrics.txt", metrics_source),
            ("VERSION", version + "\n"),
            ("vllm-help.txt", vllm_help),
            ("envs.txt", env_names),
        ):
            (args.capture / name).write_text(text)
    problems = check(version, serve_help, bench_help, metrics_source, vllm_help, env_names)
    for problem in problems:
        print(problem)
    flags, metrics = (
        len(release_drift.help_flags(serve_help)),
        len(release_drift.source_metrics(metrics_source)),
    )
    print(f"vLLM {version} ({args.image}): {flags} serve flags, {metrics} metrics; {len(problems)} drift(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
