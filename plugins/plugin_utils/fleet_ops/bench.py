"""Benchmark report logic: read `vllm bench serve` results, find the knee, render the report.

A sweep is a list of steps, each one `vllm bench serve` run at one load (a maximum
concurrency or a request rate). The playbook records, per step, what the container
printed (the result JSON is written to stdout with
``--save-result --result-dir /dev --result-filename stdout``) and how it ended; this
module turns that into figures per step, finds the knee and renders Markdown/JSON.

The knee is the last step (in increasing load) whose p99 time-to-first-token stays
within ``factor`` times the p99 TTFT of the first step. A step that failed, timed out
or lost requests ends the usable range as well.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from typing import Any

from .textable import render_table

REPORT_SCHEMA = 1
MODES = ("concurrency", "request_rate")
PERCENTILES = ("p50", "p90", "p99")
LATENCY_METRICS = ("ttft", "tpot", "itl", "e2el")

STATUS_OK = "ok"
STATUS_PARTIAL = "partial"  # some requests failed
STATUS_FAILED = "failed"  # no request completed, or no result printed
STATUS_TIMEOUT = "timeout"
STATUS_SKIPPED = "skipped"


class BenchError(ValueError):
    """Input the report cannot be built from; the message says what is wrong."""


def extract_result(output: str) -> dict[str, Any]:
    """The last `vllm bench serve` result object in ``output`` (logs and JSON interleaved).

    `vllm bench serve` writes its result as one JSON object without a trailing newline,
    possibly between log lines; the object is the one that has ``request_throughput``.
    """
    decoder = json.JSONDecoder()
    found: dict[str, Any] | None = None
    pos = output.find("{")
    while pos != -1:
        try:
            value, end = decoder.raw_decode(output, pos)
        except ValueError:
            pos = output.find("{", pos + 1)
            continue
        if isinstance(value, dict) and "request_throughput" in value and "completed" in value:
            found = value
            pos = output.find("{", end)
        else:
            pos = output.find("{", pos + 1)
    if found is None:
        tail = "\n".join(line for line in output.strip().splitlines()[-5:])
        raise BenchError(f"no `vllm bench serve` result in the output; last lines:\n{tail}")
    return found


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _latency(result: Mapping[str, Any], metric: str) -> dict[str, float | None]:
    out: dict[str, float | None] = {"mean": _num(result.get(f"mean_{metric}_ms"))}
    for pct in PERCENTILES:
        value = _num(result.get(f"{pct}_{metric}_ms"))
        if value is None and pct == "p50":
            value = _num(result.get(f"median_{metric}_ms"))
        out[pct] = value
    return out


def _last_error_line(output: str) -> str:
    for line in reversed(output.strip().splitlines()):
        line = line.strip()
        if line and not line.startswith(("File ", "^", "~")):
            return line[:300]
    return "no output"


def summarize_step(step: Mapping[str, Any]) -> dict[str, Any]:
    """Figures of one sweep step.

    ``step`` is what the playbook recorded: ``load`` (the swept value), optional ``rc``
    (exit status of the container, 124 when the time limit stopped it), ``output``,
    ``elapsed_s`` and ``skipped`` (a reason, when the step never ran).
    """
    load = _num(step.get("load"))
    if load is None:
        raise BenchError(f"step without a numeric load: {dict(step)!r}")
    summary: dict[str, Any] = {
        "load": int(load) if float(load).is_integer() else load,
        "status": STATUS_OK,
        "message": "",
        "elapsed_s": _num(step.get("elapsed_s")),
    }
    if step.get("skipped"):
        summary.update(status=STATUS_SKIPPED, message=str(step["skipped"]))
        return summary
    output = str(step.get("output") or "")
    rc = step.get("rc")
    try:
        result = extract_result(output)
    except BenchError:
        if rc in (124, 137):
            summary.update(status=STATUS_TIMEOUT, message="stopped by the time limit before it finished")
        else:
            summary.update(status=STATUS_FAILED, message=f"exit {rc}: {_last_error_line(output)}")
        return summary
    completed = int(result.get("completed") or 0)
    failed = int(result.get("failed") or 0)
    summary.update(
        {
            "num_prompts": result.get("num_prompts"),
            "completed": completed,
            "failed": failed,
            "duration_s": _num(result.get("duration")),
            "request_throughput": _num(result.get("request_throughput")),
            "output_throughput": _num(result.get("output_throughput")),
            "total_token_throughput": _num(result.get("total_token_throughput")),
            "total_input_tokens": result.get("total_input_tokens"),
            "total_output_tokens": result.get("total_output_tokens"),
            "max_concurrency": result.get("max_concurrency"),
            "request_rate": result.get("request_rate"),
        }
    )
    for metric in LATENCY_METRICS:
        summary[f"{metric}_ms"] = _latency(result, metric)
    if completed == 0:
        summary.update(status=STATUS_FAILED, message=f"all {failed} requests failed (is the endpoint up?)")
    elif failed:
        summary.update(status=STATUS_PARTIAL, message=f"{failed} of {completed + failed} requests failed")
    return summary


def find_knee(steps: list[Mapping[str, Any]], factor: float) -> dict[str, Any]:
    """The last step before p99 TTFT rises past ``factor`` x the first step's p99 TTFT.

    ``steps`` are summaries (:func:`summarize_step`) in increasing load. Returns
    ``index``/``load`` of the knee (None when even the first step is unusable), the
    ``baseline_ms`` and ``threshold_ms`` used, and where and why the sweep left the
    usable range (``exceeded_index``/``exceeded_load``/``reason``; None when it never did).
    """
    if factor <= 1:
        raise BenchError(f"the knee factor must be greater than 1, got {factor}")
    knee: dict[str, Any] = {
        "factor": factor,
        "metric": "p99 TTFT",
        "index": None,
        "load": None,
        "baseline_ms": None,
        "threshold_ms": None,
        "exceeded_index": None,
        "exceeded_load": None,
        "reason": "",
    }
    ran = [(i, s) for i, s in enumerate(steps) if s.get("status") != STATUS_SKIPPED]
    if not ran:
        knee["reason"] = "no step ran"
        return knee
    first_index, first = ran[0]
    baseline = (first.get("ttft_ms") or {}).get("p99")
    if first.get("status") != STATUS_OK or baseline is None:
        knee.update(
            exceeded_index=first_index,
            exceeded_load=first.get("load"),
            reason=f"the first step did not complete cleanly ({first.get('message') or first.get('status')})",
        )
        return knee
    threshold = baseline * factor
    knee.update(baseline_ms=baseline, threshold_ms=threshold)
    for index, step in ran:
        p99 = (step.get("ttft_ms") or {}).get("p99")
        if step.get("status") != STATUS_OK:
            reason = f"{step.get('status')}: {step.get('message')}"
        elif p99 is None:
            reason = "no p99 TTFT reported"
        elif p99 > threshold:
            reason = f"p99 TTFT {p99:.1f} ms > {factor:g} x {baseline:.1f} ms = {threshold:.1f} ms"
        else:
            knee.update(index=index, load=step.get("load"))
            continue
        knee.update(exceeded_index=index, exceeded_load=step.get("load"), reason=reason)
        break
    else:
        knee["reason"] = "p99 TTFT stayed within the threshold over the whole sweep: the knee is beyond it"
    return knee


def mode_label(mode: str) -> str:
    return {"concurrency": "concurrency", "request_rate": "request rate (req/s)"}.get(mode, mode)


def build_report(steps: Iterable[Mapping[str, Any]], settings: Mapping[str, Any]) -> dict[str, Any]:
    """The whole report: settings, per-step figures (sorted by load) and the knee.

    ``settings`` needs ``mode`` (concurrency or request_rate) and ``knee_factor``; every
    other key (model, target, image, lengths, time limit, timings) is carried into the report.
    """
    mode = settings.get("mode")
    if mode not in MODES:
        raise BenchError(f"settings.mode must be one of {', '.join(MODES)}, got {mode!r}")
    factor = _num(settings.get("knee_factor"))
    if factor is None:
        raise BenchError("settings.knee_factor is required (e.g. 3.0)")
    summaries = sorted((summarize_step(s) for s in steps), key=lambda s: s["load"])
    if not summaries:
        raise BenchError("the sweep has no steps")
    ok = [s for s in summaries if s["status"] in (STATUS_OK, STATUS_PARTIAL)]
    best = max(ok, key=lambda s: s.get("output_throughput") or 0.0, default=None)
    return {
        "schema": REPORT_SCHEMA,
        "settings": dict(settings),
        "steps": summaries,
        "knee": find_knee(summaries, factor),
        "peak_output_throughput": (
            {"load": best["load"], "output_throughput": best.get("output_throughput")} if best else None
        ),
    }


def _fmt(value: Any, digits: int = 1) -> str:
    number = _num(value)
    if number is None:
        return "-"
    if abs(number) >= 1000:
        return f"{number:,.0f}"
    return f"{number:.{digits}f}"


def _load_text(mode: str, load: Any) -> str:
    return f"{_fmt(load, 2).rstrip('0').rstrip('.')} req/s" if mode == "request_rate" else f"{load}"


def steps_table(report: Mapping[str, Any], markdown: bool = True) -> str:
    mode = report["settings"]["mode"]
    knee_index = report["knee"].get("index")
    headers = [
        "load" if markdown else mode_label(mode),
        "status",
        "req/s",
        "out tok/s",
        "TTFT p50",
        "TTFT p90",
        "TTFT p99",
        "TPOT p50",
        "TPOT p90",
        "TPOT p99",
        "ok/failed",
    ]
    rows = []
    for index, step in enumerate(report["steps"]):
        ttft, tpot = step.get("ttft_ms") or {}, step.get("tpot_ms") or {}
        load = _load_text(mode, step["load"]) + (" (knee)" if index == knee_index else "")
        done = f"{step['completed']}/{step['failed']}" if "completed" in step else "-"
        rows.append(
            [
                load,
                step["status"],
                _fmt(step.get("request_throughput"), 2),
                _fmt(step.get("output_throughput")),
                *(_fmt(ttft.get(p)) for p in PERCENTILES),
                *(_fmt(tpot.get(p), 2) for p in PERCENTILES),
                done,
            ]
        )
    return render_table(headers, rows, markdown=markdown, align="l" + "l" + "r" * 9)


def knee_sentence(report: Mapping[str, Any]) -> str:
    knee, mode = report["knee"], report["settings"]["mode"]
    what = mode_label(mode)
    if knee.get("index") is None:
        return f"No knee: {knee.get('reason')}."
    step = report["steps"][knee["index"]]
    text = (
        f"Knee at {what} {_load_text(mode, knee['load'])}: {_fmt(step.get('request_throughput'), 2)} req/s, "
        f"{_fmt(step.get('output_throughput'))} output tok/s, p99 TTFT {_fmt(step['ttft_ms'].get('p99'))} ms "
        f"(threshold {knee['factor']:g} x {_fmt(knee['baseline_ms'])} ms = {_fmt(knee['threshold_ms'])} ms)."
    )
    if knee.get("exceeded_load") is not None:
        text += f" Next step ({_load_text(mode, knee['exceeded_load'])}): {knee['reason']}."
    else:
        text += f" {knee['reason'][:1].upper()}{knee['reason'][1:]}."
    return text


def render_markdown(report: Mapping[str, Any], plot_name: str | None = None) -> str:
    s = report["settings"]
    lines = [f"# Benchmark: {s.get('model', 'model')} via {s.get('target', 'endpoint')}", ""]
    facts = [
        ("endpoint", s.get("base_url")),
        ("image", s.get("image")),
        ("sweep", f"{mode_label(s['mode'])}: {', '.join(str(st['load']) for st in report['steps'])}"),
        ("requests per step", s.get("num_prompts")),
        ("input / output tokens", f"{s.get('input_len', '-')} / {s.get('output_len', '-')}"),
        ("knee factor", s.get("knee_factor")),
        ("time limit", f"{s['time_limit_s']} s" if s.get("time_limit_s") else None),
        ("started", s.get("started_at")),
        ("elapsed", f"{_fmt(s.get('elapsed_s'), 0)} s" if s.get("elapsed_s") is not None else None),
    ]
    lines += [f"- **{k}**: {v}" for k, v in facts if v not in (None, "")]
    lines += ["", "## Result", "", knee_sentence(report), ""]
    peak = report.get("peak_output_throughput")
    if peak:
        lines += [f"Peak output throughput: {_fmt(peak['output_throughput'])} tok/s at {peak['load']}.", ""]
    lines += ["Latencies in ms; TTFT = time to first token, TPOT = time per output token.", ""]
    lines += [steps_table(report, markdown=True), ""]
    problems = [st for st in report["steps"] if st["status"] != STATUS_OK]
    if problems:
        lines += ["## Steps that did not complete cleanly", ""]
        lines += [f"- {st['load']}: {st['status']}: {st['message']}" for st in problems]
        lines.append("")
    if plot_name:
        lines += ["## Latency vs load", "", f"![latency vs load]({plot_name})", ""]
    return "\n".join(lines)


def progress_line(
    summary: Mapping[str, Any], index: int, total: int, mode: str, elapsed_s: float, limit_s: float
) -> str:
    """One line per finished step, for the playbook output."""
    head = f"step {index}/{total} {mode_label(mode)} {_load_text(mode, summary['load'])}"
    clock = f"(elapsed {elapsed_s:.0f} s of {limit_s:.0f} s)"
    if summary["status"] in (STATUS_OK, STATUS_PARTIAL):
        ttft, tpot = summary["ttft_ms"], summary["tpot_ms"]
        rps, tps = _fmt(summary.get("request_throughput"), 2), _fmt(summary.get("output_throughput"))
        body = (
            f"{rps} req/s, {tps} out tok/s, TTFT p50/p99 {_fmt(ttft.get('p50'))}/{_fmt(ttft.get('p99'))} ms, "
            f"TPOT p99 {_fmt(tpot.get('p99'), 2)} ms"
        )
        if summary["status"] == STATUS_PARTIAL:
            body += f" [{summary['message']}]"
    else:
        body = f"{summary['status'].upper()}: {summary['message']}"
    return f"{head}: {body} {clock}"


def step_progress(step: Any, index: Any, total: Any, mode: Any, elapsed: Any, limit: Any) -> str:
    """One progress line for a finished sweep step (filter vllm_fleet_bench_progress)."""
    summary = summarize_step(step)
    return progress_line(summary, int(index), int(total), str(mode), float(elapsed), float(limit))


def steps_knee(steps: Any, factor: Any) -> dict[str, Any]:
    """The knee of the steps recorded so far, in load order (filter vllm_fleet_bench_knee)."""
    summaries = sorted((summarize_step(s) for s in steps or []), key=lambda s: s["load"])
    return find_knee(summaries, float(factor))
