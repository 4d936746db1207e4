"""Build a benchmark report (Markdown, JSON, PNG plot) from a recorded `vllm bench serve` sweep.

Usage: vllm-fleet-bench-report RUN_JSON [--out-dir DIR] [--name NAME]

RUN_JSON holds {"settings": {...}, "steps": [{"load", "rc", "output", "elapsed_s", "skipped"}]},
as playbooks/bench.yml records it (settings need "mode": concurrency|request_rate and
"knee_factor"). Writes DIR/NAME.md, DIR/NAME.json and DIR/NAME.png (DIR defaults to the
folder of RUN_JSON, NAME to "report") and prints the knee and the paths.
Exit status: 0 report written, 1 bad input (one line on stderr).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from . import bench, plot


def write_report(run_json: Path, out_dir: Path | None = None, name: str = "report") -> dict[str, Any]:
    """Write NAME.md, NAME.json and NAME.png beside RUN_JSON (or in OUT_DIR); return the knee sentence,
    the steps table and the paths. Raises OSError/ValueError (BenchError) on bad input."""
    run = json.loads(run_json.read_text(encoding="utf-8"))
    if not isinstance(run, dict) or not isinstance(run.get("steps"), list):
        raise bench.BenchError(f"{run_json}: expected an object with a 'steps' list")
    report = bench.build_report(run["steps"], run.get("settings") or {})
    out = out_dir or run_json.parent
    out.mkdir(parents=True, exist_ok=True)
    png, md, js = (out / f"{name}.{ext}" for ext in ("png", "md", "json"))
    png.write_bytes(plot.render_chart(report))
    md.write_text(bench.render_markdown(report, plot_name=png.name), encoding="utf-8")
    js.write_text(json.dumps(report, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return {
        "knee": bench.knee_sentence(report),
        "table": bench.steps_table(report, markdown=False),
        "markdown": str(md),
        "json": str(js),
        "plot": str(png),
    }


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_json", type=Path)
    parser.add_argument("--out-dir", type=Path)
    parser.add_argument("--name", default="report")
    args = parser.parse_args(argv)
    try:
        written = write_report(args.run_json, args.out_dir, args.name)
    except (OSError, ValueError) as exc:
        print(f"vllm-fleet-bench-report: {exc}", file=sys.stderr)
        return 1
    print(written["knee"])
    print(written["table"])
    print(f"report: {written['markdown']}\njson:   {written['json']}\nplot:   {written['plot']}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
