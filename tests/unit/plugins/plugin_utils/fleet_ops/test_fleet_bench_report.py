"""Benchmark report logic: parsing recorded `vllm bench serve` output, knee detection, rendering, plot."""

from __future__ import annotations

import io
import json
import re
import struct
import subprocess
from pathlib import Path

import matplotlib.image as mpimg
import pytest
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_ops import (
    bench,
    plot,
)
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_ops.textable import (
    render_table,
)

ROOT = Path(__file__).resolve().parents[5]
DATA = ROOT / "tests" / "data" / "vllm-bench" / "cpu-tiny"


def recorded(kind: str) -> list[dict]:
    """The recorded sweep of one kind (concurrency or rate) as the playbook records steps."""
    steps = []
    for path in sorted(DATA.glob(f"{kind}-*.log")):
        load = int(re.search(r"-(\d+)\.log$", path.name).group(1))
        steps.append({"load": load, "rc": 0, "output": path.read_text(), "elapsed_s": 10.0})
    return steps


def step(load, p99, status="ok", p50=None, failed=0, completed=10, out_tps=100.0):
    """A synthetic step summary."""
    return {
        "load": load,
        "status": status,
        "message": "" if status == "ok" else "broken",
        "completed": completed,
        "failed": failed,
        "output_throughput": out_tps,
        "request_throughput": out_tps / 10,
        "ttft_ms": {"mean": p99, "p50": p50 or p99 / 2, "p90": p99 * 0.9, "p99": p99},
        "tpot_ms": {"mean": 1.0, "p50": 1.0, "p90": 1.1, "p99": 1.2},
    }


# --- parsing the recorded output -----------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "completed", "failed", "max_concurrency", "request_rate", "p99_ttft"),
    [
        ("concurrency-1.log", 24, 0, 1, "inf", 15.42),
        ("concurrency-8.log", 32, 0, 8, "inf", 45.54),
        ("concurrency-16.log", 64, 0, 16, "inf", 1117.74),
        ("rate-80.log", 40, 0, None, 80.0, 231.71),
        ("unreachable.log", 0, 4, 1, "inf", 0.0),
    ],
)
def test_extract_result_from_recorded_output(
    name, completed, failed, max_concurrency, request_rate, p99_ttft
):
    result = bench.extract_result((DATA / name).read_text())
    assert result["completed"] == completed
    assert result["failed"] == failed
    assert result["max_concurrency"] == max_concurrency
    assert result["request_rate"] == request_rate
    assert result["p99_ttft_ms"] == pytest.approx(p99_ttft, abs=0.01)


@pytest.mark.parametrize(
    "output",
    [
        (DATA / "timeout.log").read_text(),  # stopped by `timeout --signal=INT`: no result printed
        "",
        'log line {"not": "a result"} more log',
        '{"request_throughput": 1.0',  # truncated
    ],
)
def test_extract_result_refuses_output_without_a_result(output):
    with pytest.raises(bench.BenchError, match="no `vllm bench serve` result"):
        bench.extract_result(output)


def test_extract_result_takes_the_last_result_when_several_are_printed():
    first = json.dumps({"request_throughput": 1.0, "completed": 1})
    last = json.dumps({"request_throughput": 2.0, "completed": 2})
    assert bench.extract_result(f"a {first} b\n{{broken\n{last}")["completed"] == 2


@pytest.mark.parametrize(
    ("record", "status", "message"),
    [
        ({"load": 1, "rc": 0, "output": (DATA / "concurrency-1.log").read_text()}, "ok", ""),
        (
            {"load": 1, "rc": 0, "output": (DATA / "unreachable.log").read_text()},
            "failed",
            "all 4 requests failed",
        ),
        ({"load": 8, "rc": 124, "output": (DATA / "timeout.log").read_text()}, "timeout", "time limit"),
        (
            {"load": 8, "rc": 1, "output": "Traceback\nValueError: bad tokenizer\n"},
            "failed",
            "exit 1: ValueError",
        ),
        ({"load": 16, "skipped": "time limit reached"}, "skipped", "time limit reached"),
    ],
)
def test_summarize_step_status(record, status, message):
    summary = bench.summarize_step(record)
    assert summary["status"] == status
    assert message in summary["message"]


def test_summarize_step_reports_partial_failures():
    result = {
        "completed": 7,
        "failed": 3,
        "request_throughput": 1.0,
        "p99_ttft_ms": 5.0,
        "median_ttft_ms": 2.0,
    }
    summary = bench.summarize_step({"load": 2, "rc": 0, "output": json.dumps(result)})
    assert summary["status"] == "partial"
    assert summary["message"] == "3 of 10 requests failed"
    assert summary["ttft_ms"]["p50"] == 2.0  # median stands in for a missing p50
    assert summary["ttft_ms"]["p90"] is None


def test_summarize_step_needs_a_load():
    with pytest.raises(bench.BenchError, match="numeric load"):
        bench.summarize_step({"rc": 0, "output": ""})


# --- the knee ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("steps", "factor", "knee_load", "exceeded_load", "reason"),
    [
        ([step(1, 10), step(2, 20), step(4, 29), step(8, 31)], 3, 4, 8, "p99 TTFT 31.0 ms > 3 x 10.0 ms"),
        ([step(1, 10), step(2, 30), step(4, 30.01)], 3, 2, 4, "> 3 x"),  # exactly at the threshold is within
        ([step(1, 10), step(2, 12), step(4, 15)], 3, 4, None, "beyond"),
        ([step(1, 10), step(2, 11, status="partial"), step(4, 12)], 3, 1, 2, "partial"),
        ([step(1, 10), step(2, 11, status="timeout"), step(4, 12)], 3, 1, 2, "timeout"),
        ([step(1, 10, status="failed"), step(2, 11)], 3, None, 1, "first step did not complete"),
        ([{"load": 1, "status": "skipped", "message": "x"}], 3, None, None, "no step ran"),
        ([step(1, 10), step(2, 19), step(4, 21)], 2, 2, 4, "> 2 x 10.0"),
    ],
)
def test_find_knee(steps, factor, knee_load, exceeded_load, reason):
    knee = bench.find_knee(steps, factor)
    assert knee["load"] == knee_load
    assert knee["exceeded_load"] == exceeded_load
    assert reason in knee["reason"]


def test_find_knee_refuses_a_factor_that_cannot_rise():
    with pytest.raises(bench.BenchError, match="greater than 1"):
        bench.find_knee([step(1, 10)], 1.0)


@pytest.mark.parametrize(("factor", "knee_load", "exceeded_load"), [(3, 8, 16), (1.2, 1, 2), (100, 32, None)])
def test_knee_of_the_recorded_concurrency_sweep(factor, knee_load, exceeded_load):
    report = bench.build_report(recorded("concurrency"), {"mode": "concurrency", "knee_factor": factor})
    assert [s["load"] for s in report["steps"]] == [1, 2, 4, 8, 16, 32]  # sorted by load, not by file name
    assert report["knee"]["load"] == knee_load
    assert report["knee"]["exceeded_load"] == exceeded_load
    assert report["knee"]["baseline_ms"] == pytest.approx(15.42, abs=0.01)


def test_recorded_rate_sweep():
    report = bench.build_report(recorded("rate"), {"mode": "request_rate", "knee_factor": 3})
    assert [s["load"] for s in report["steps"]] == [5, 20, 80]
    assert report["knee"]["load"] == 20
    assert report["peak_output_throughput"]["load"] == 80


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"mode": "qps", "knee_factor": 3}, "settings.mode"),
        ({"mode": "concurrency"}, "knee_factor is required"),
    ],
)
def test_build_report_refuses_bad_settings(settings, message):
    with pytest.raises(bench.BenchError, match=message):
        bench.build_report(recorded("concurrency"), settings)


# --- rendering ------------------------------------------------------------------------------


def test_markdown_report_names_the_knee_and_lists_every_step():
    settings = {
        "mode": "concurrency",
        "knee_factor": 3,
        "model": "tiny",
        "target": "gateway",
        "base_url": "http://g",
    }
    report = bench.build_report(
        recorded("concurrency") + [{"load": 64, "skipped": "time limit reached"}], settings
    )
    text = bench.render_markdown(report, plot_name="report.png")
    assert "Knee at concurrency 8: 29.90 req/s" in text
    assert "Next step (16): p99 TTFT 1117.7 ms > 3 x 15.4 ms = 46.3 ms." in text
    rows = [line for line in text.splitlines() if line.startswith("| ") and "---" not in line]
    assert len(rows) == 1 + 7  # header + 6 recorded steps + the skipped one
    assert any(line.startswith("| 8 (knee) ") for line in rows)
    assert "- 64: skipped: time limit reached" in text
    assert "![latency vs load](report.png)" in text


def test_progress_line():
    summary = bench.summarize_step({"load": 4, "rc": 0, "output": (DATA / "concurrency-4.log").read_text()})
    line = bench.progress_line(summary, 3, 6, "concurrency", 32.4, 600)
    assert line.startswith("step 3/6 concurrency 4: 25.22 req/s, 1,614 out tok/s, TTFT p50/p99 18.0/31.1 ms")
    assert line.endswith("(elapsed 32 s of 600 s)")
    failed = bench.summarize_step({"load": 0.5, "rc": 124, "output": ""})
    assert "0.5 req/s: TIMEOUT" in bench.progress_line(failed, 1, 2, "request_rate", 5, 60)


def test_render_table_aligns_and_checks_width():
    text = render_table(["a", "bb"], [[1, 22.5], ["xyz", None]], align="lr")
    assert text.splitlines() == ["a      bb", "---  ----", "1    22.5", "xyz     -"]
    with pytest.raises(ValueError, match="2 columns"):
        render_table(["a", "b"], [[1]])


# --- plot -----------------------------------------------------------------------------------

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _pixels(data: bytes):
    """The PNG's (height, width, RGB) pixels as 0-255 integers, read back with matplotlib."""
    assert data[:8] == PNG_MAGIC
    width, height = struct.unpack(">II", data[16:24])  # the IHDR chunk
    assert (width, height) == (plot.WIDTH, plot.HEIGHT)
    image = mpimg.imread(io.BytesIO(data), format="png")
    assert image.shape[:2] == (plot.HEIGHT, plot.WIDTH)
    return (image[:, :, :3] * 255).round().astype(int)


def _is(pixels, x, y, color, tolerance=12):
    return int(abs(pixels[y, x] - color).max()) <= tolerance


def _near(pixels, x, y, color, radius=3):
    return any(
        _is(pixels, round(x) + dx, round(y) + dy, color)
        for dy in range(-radius, radius + 1)
        for dx in range(-radius, radius + 1)
    )


def test_chart_is_a_png_with_three_panels_sharing_the_load_axis():
    report = bench.build_report(
        recorded("concurrency"), {"mode": "concurrency", "knee_factor": 3, "model": "tiny"}
    )
    data, layout = plot.render_chart_with_layout(report)
    _pixels(data)
    panels = layout["panels"]
    assert list(panels) == ["ttft", "tpot", "throughput"]
    assert [p["ax"].get_title() for p in panels.values()] == [
        "Time to first token",
        "Time per output token",
        "Output throughput",
    ]
    assert [p["ax"].get_ylabel() for p in panels.values()] == ["ms (log)", "ms", "tokens/s"]
    assert all(p["ax"].get_xlabel() == "concurrency" for p in panels.values())
    assert all(p["ax"].get_xscale() == "log" for p in panels.values())
    # side by side, inside the image
    boxes = [p["box"]() for p in panels.values()]
    assert all(0 < b[0] < b[2] < plot.WIDTH and 0 < b[1] < b[3] < plot.HEIGHT for b in boxes)
    assert boxes[0][2] < boxes[1][0] and boxes[1][2] < boxes[2][0]
    assert [t.get_text() for t in panels["ttft"]["ax"].get_legend().get_texts()] == ["p50", "p90", "p99"]
    assert "knee" in [t.get_text() for t in panels["ttft"]["ax"].texts]


def test_chart_draws_points_where_the_figures_are_and_marks_the_knee():
    report = bench.build_report(
        recorded("concurrency"), {"mode": "concurrency", "knee_factor": 3, "model": "tiny"}
    )
    data, layout = plot.render_chart_with_layout(report)
    pixels = _pixels(data)
    ttft = layout["panels"]["ttft"]
    assert ttft["log_y"] is True  # the saturated step spans > 20x: log axis
    assert layout["panels"]["throughput"]["log_y"] is False
    for s in report["steps"]:
        x = ttft["x_axis"](s["load"])
        assert _near(pixels, x, ttft["y_axis"](s["ttft_ms"]["p99"]), plot.RED), s["load"]
        assert _near(pixels, x, ttft["y_axis"](s["ttft_ms"]["p50"]), plot.BLUE), s["load"]
    # the x axis is logarithmic: 1, 2, 4, 8 ... are evenly spaced
    xs = [ttft["x_axis"](v) for v in (1, 2, 4, 8)]
    assert xs[1] - xs[0] == pytest.approx(xs[3] - xs[2])
    # dashed knee line at concurrency 8 in the TTFT panel
    _, top, _, bottom = ttft["box"]()
    knee_x = round(ttft["x_axis"](8))
    column = [any(_is(pixels, knee_x + dx, y, plot.KNEE) for dx in (-1, 0, 1)) for y in range(top, bottom)]
    assert 0.3 * (bottom - top) < sum(column) < 0.9 * (bottom - top)  # dashed: on and off
    # threshold line (3 x first p99) is drawn at its height
    y = round(ttft["y_axis"](report["knee"]["threshold_ms"]))
    left = round(ttft["x_axis"](1))
    red = [any(_is(pixels, x, y + dy, plot.RED) for dy in (-1, 0, 1)) for x in range(left, left + 60)]
    assert sum(red) > 20


def test_chart_without_figures_says_so():
    report = bench.build_report(
        [{"load": 1, "rc": 1, "output": "boom"}], {"mode": "concurrency", "knee_factor": 3}
    )
    data, layout = plot.render_chart_with_layout(report)
    _pixels(data)
    assert layout["panels"] == {}


# --- the command --------------------------------------------------------------------------


def test_report_command_writes_markdown_json_and_png(tmp_path):
    run = {
        "settings": {"mode": "concurrency", "knee_factor": 3, "model": "tiny"},
        "steps": recorded("concurrency"),
    }
    (tmp_path / "run.json").write_text(json.dumps(run))
    proc = subprocess.run(
        [str(ROOT / "bin" / "vllm-fleet-bench-report"), str(tmp_path / "run.json")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("Knee at concurrency 8:")
    saved = json.loads((tmp_path / "report.json").read_text())
    assert saved["knee"]["load"] == 8
    assert "![latency vs load](report.png)" in (tmp_path / "report.md").read_text()
    _pixels((tmp_path / "report.png").read_bytes())


def test_report_command_refuses_bad_input(tmp_path):
    (tmp_path / "run.json").write_text("[]")
    proc = subprocess.run(
        [str(ROOT / "bin" / "vllm-fleet-bench-report"), str(tmp_path / "run.json")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 1
    assert "expected an object with a 'steps' list" in proc.stderr


# --- a sweep recorded by playbooks/bench.yml ------------------------------------------------------


def test_report_of_a_sweep_recorded_by_the_playbook(tmp_path):
    run = json.loads((ROOT / "tests/data/vllm-bench/cpu-tiny-playbook/run.json").read_text())
    assert run["settings"]["mode"] == "concurrency" and run["settings"]["knee_factor"] == 3.0
    report = bench.build_report(run["steps"], run["settings"])
    assert [(s["load"], s["status"]) for s in report["steps"]] == [
        (1, "ok"),
        (4, "ok"),
        (16, "ok"),
        (64, "ok"),
    ]
    assert report["knee"]["load"] == 64 and report["knee"]["exceeded_load"] is None
    sentence = bench.knee_sentence(report)
    assert sentence.endswith(
        "P99 TTFT stayed within the threshold over the whole sweep: the knee is beyond it."
    )
    data, layout = plot.render_chart_with_layout(report)
    pixels = _pixels(data)
    ttft = layout["panels"]["ttft"]
    x = ttft["x_axis"](64)
    assert _near(pixels, x, ttft["y_axis"](report["steps"][-1]["ttft_ms"]["p99"]), plot.RED)
    # no knee inside the sweep: the marker is on the last step
    assert "last step" in [t.get_text() for t in ttft["ax"].texts]


def test_chart_cuts_a_long_title_to_the_image():
    settings = {
        "mode": "request_rate",
        "knee_factor": 2,
        "model": "m" * 200,
        "target": "https://" + "x" * 300,
    }
    report = bench.build_report(recorded("rate"), settings)
    pixels = _pixels(plot.render_chart(report))
    # the title row keeps white margins at both edges
    assert (pixels[:60, :5] == 255).all() and (pixels[:60, -5:] == 255).all()
    assert not (pixels[10:50, 100:1400] == 255).all()
