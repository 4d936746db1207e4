"""Latency-vs-load chart of a benchmark report, drawn as a PNG with the standard library.

Three panels side by side, sharing the load axis: time to first token (p50/p90/p99,
with the knee threshold), time per output token (p50/p90/p99) and output throughput.
The knee is a dashed vertical line in every panel. The load axis is logarithmic when
the sweep spans a factor of 4 or more (1, 2, 4, 8, ... spreads evenly); a latency
axis is logarithmic when its values span more than a factor of 20, so one saturated
step does not flatten the others.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from . import font5x7
from .bench import mode_label
from .png import BLACK, Canvas, Color

BLUE: Color = (31, 119, 180)
ORANGE: Color = (255, 127, 14)
RED: Color = (214, 39, 40)
GREEN: Color = (44, 160, 44)
GREY: Color = (120, 120, 120)
GRID: Color = (225, 225, 225)
KNEE: Color = (90, 90, 90)

WIDTH, HEIGHT = 1500, 600
PANEL_TOP, PANEL_BOTTOM = 132, 520
SCALE = 2  # font scale: glyphs are 10 x 14 px


def nice_step(span: float, target_ticks: int = 5) -> float:
    """A 1/2/2.5/5 x 10^k step giving about ``target_ticks`` intervals over ``span``."""
    if span <= 0:
        return 1.0
    raw = span / target_ticks
    power = 10 ** math.floor(math.log10(raw))
    for mult in (1, 2, 2.5, 5, 10):
        if raw <= mult * power:
            return mult * power
    return 10 * power


def linear_ticks(top: float) -> tuple[float, list[float]]:
    """(axis maximum, ticks) for a linear axis from 0 that shows ``top``."""
    step = nice_step(top if top > 0 else 1.0)
    maximum = step * math.ceil((top if top > 0 else 1.0) / step)
    count = round(maximum / step)
    return maximum, [round(i * step, 10) for i in range(count + 1)]


def log_ticks(low: float, high: float) -> tuple[float, float, list[float]]:
    """(axis min, axis max, ticks at 1/2/5 x 10^k) for a log axis covering [low, high]."""
    lo = 10 ** math.floor(math.log10(low))
    hi = 10 ** math.ceil(math.log10(high))
    ticks = []
    decade = lo
    while decade <= hi * 1.0001:
        for mult in (1, 2, 5):
            value = decade * mult
            if lo * 0.9999 <= value <= hi * 1.0001:
                ticks.append(value)
        decade *= 10
    # tighten to the data: drop whole decades of empty axis at either end
    axis_lo = max(t for t in ticks if t <= low * 1.0001)
    axis_hi = min(t for t in ticks if t >= high * 0.9999)
    return axis_lo, axis_hi, [t for t in ticks if axis_lo <= t <= axis_hi]


def tick_label(value: float) -> str:
    if value >= 10000:
        return f"{value / 1000:g}k"
    if value >= 1 or value == 0:
        return f"{value:g}"
    return f"{value:.3g}"


class Axis:
    """Maps data values to pixels along one direction."""

    def __init__(self, lo: float, hi: float, p_lo: float, p_hi: float, log: bool) -> None:
        self.lo, self.hi, self.p_lo, self.p_hi, self.log = lo, hi, p_lo, p_hi, log

    def __call__(self, value: float) -> float:
        if self.log:
            a, b, v = math.log10(self.lo), math.log10(self.hi), math.log10(max(value, self.lo * 1e-3))
        else:
            a, b, v = self.lo, self.hi, value
        frac = 0.5 if b == a else (v - a) / (b - a)
        return self.p_lo + frac * (self.p_hi - self.p_lo)


def _x_axis(loads: Sequence[float], left: int, right: int) -> Axis:
    positive = [v for v in loads if v > 0]
    if len(positive) == len(loads) and len(loads) > 1 and max(loads) / min(loads) >= 4:
        lo, hi = min(loads), max(loads)
        pad = (math.log10(hi) - math.log10(lo)) * 0.06
        return Axis(10 ** (math.log10(lo) - pad), 10 ** (math.log10(hi) + pad), left, right, True)
    lo, hi = (min(loads), max(loads)) if loads else (0.0, 1.0)
    pad = (hi - lo) * 0.06 or max(abs(hi) * 0.5, 0.5)
    return Axis(lo - pad, hi + pad, left, right, False)


def _panel(
    canvas: Canvas,
    box: tuple[int, int, int, int],
    title: str,
    y_label: str,
    loads: Sequence[float],
    series: Sequence[tuple[str, Color, str, Sequence[float | None]]],
    x_label: str,
    knee_load: float | None,
    hline: tuple[float, str] | None = None,
    allow_log: bool = True,
    knee_label: str = "knee",
) -> dict[str, Any]:
    left, top, right, bottom = box
    values = [v for _, _, _, vals in series for v in vals if v is not None]
    if hline:
        values.append(hline[0])
    positive = [v for v in values if v > 0]
    log_y = allow_log and len(positive) == len(values) and len(values) > 1 and max(values) / min(values) > 20
    if log_y:
        y_lo, y_hi, y_ticks = log_ticks(min(values), max(values))
        y_axis = Axis(y_lo, y_hi, bottom, top, True)
    else:
        y_hi, y_ticks = linear_ticks(max(values) * 1.05 if values else 1.0)
        y_axis = Axis(0.0, y_hi, bottom, top, False)
    x_axis = _x_axis(loads, left, right)
    # title and y label
    canvas.text(left + (right - left - font5x7.text_width(title, SCALE)) // 2, top - 40, title, BLACK, SCALE)
    label = y_label + (" (log)" if log_y else "")
    canvas.text_vertical(
        left - 78, (top + bottom) // 2 + font5x7.text_width(label, SCALE) // 2, label, GREY, SCALE
    )
    # grid and y ticks
    for tick in y_ticks:
        y = round(y_axis(tick))
        canvas.line(left, y, right, y, GRID)
        text = tick_label(tick)
        canvas.text(left - 8 - font5x7.text_width(text, SCALE), y - 7, text, BLACK, SCALE)
    # x ticks at the swept loads, skipping labels that would overlap
    last_end = -1e9
    for load in loads:
        x = round(x_axis(load))
        canvas.line(x, bottom, x, bottom + 5, BLACK)
        text = tick_label(load)
        width = font5x7.text_width(text, SCALE)
        if x - width / 2 > last_end + 6:
            canvas.text(round(x - width / 2), bottom + 10, text, BLACK, SCALE)
            last_end = x + width / 2
    canvas.text((left + right - font5x7.text_width(x_label, SCALE)) // 2, bottom + 34, x_label, GREY, SCALE)
    # reference lines
    if hline is not None:
        y = round(y_axis(hline[0]))
        canvas.line(left, y, right, y, RED, width=1, dash=(6, 4))
        canvas.text(right - 6 - font5x7.text_width(hline[1], SCALE), y + 5, hline[1], RED, SCALE)
    if knee_load is not None:
        x = round(x_axis(knee_load))
        canvas.line(x, top, x, bottom, KNEE, width=2, dash=(8, 6))
        label_x = (
            x + 6
            if x + 6 + font5x7.text_width(knee_label, SCALE) < right
            else x - 6 - font5x7.text_width(knee_label, SCALE)
        )
        canvas.text(label_x, bottom - 22, knee_label, KNEE, SCALE)
    # series
    shapes = ("circle", "square", "triangle", "diamond")
    for number, (_, color, _style, vals) in enumerate(series):
        points = [(x_axis(ld), y_axis(v)) for ld, v in zip(loads, vals, strict=True) if v is not None]
        for (xa, ya), (xb, yb) in zip(points, points[1:], strict=False):
            canvas.line(xa, ya, xb, yb, color, width=3)
        for px, py in points:
            canvas.marker(px, py, color, shapes[number % len(shapes)], 5)
    canvas.rect(left, top, right, bottom, BLACK)
    # legend, top left inside the frame
    ly = top + 10
    for number, (name, color, _style, _vals) in enumerate(series):
        canvas.line(left + 12, ly + 7, left + 42, ly + 7, color, width=3)
        canvas.marker(left + 27, ly + 7, color, shapes[number % len(shapes)], 4)
        canvas.text(left + 50, ly, name, BLACK, SCALE)
        ly += 22
    return {"x_axis": x_axis, "y_axis": y_axis, "log_y": log_y}


def render_chart(report: Mapping[str, Any]) -> bytes:
    """The PNG bytes of the report's latency-vs-load chart."""
    png, _ = render_chart_with_layout(report)
    return png


def render_chart_with_layout(report: Mapping[str, Any]) -> tuple[bytes, dict[str, Any]]:
    """The PNG and the axes used (for tests that check where points landed)."""
    settings = report["settings"]
    mode = settings["mode"]
    steps = [s for s in report["steps"] if s.get("ttft_ms")]
    loads = [float(s["load"]) for s in steps]
    canvas = Canvas(WIDTH, HEIGHT)
    knee = report.get("knee") or {}
    title = (
        f"vllm bench serve: {settings.get('model', 'model')} via {settings.get('target', 'endpoint')}"
        f" ({len(steps)} steps)"
    )
    scale = 3 if font5x7.text_width(title, 3) <= WIDTH - 20 else 2
    while font5x7.text_width(title, scale) > WIDTH - 20:
        title = title[:-4] + "..."
    canvas.text((WIDTH - font5x7.text_width(title, scale)) // 2, 14, title, BLACK, scale)
    factor = f"{knee.get('factor', 0):g}x"
    if knee.get("index") is None:
        sub, knee_label = "no knee: the first step did not complete cleanly (see the report)", "knee"
    elif knee.get("exceeded_load") is None:
        sub = (
            f"no knee within the sweep: p99 TTFT stayed under {factor} the first step's up to {knee['load']}"
        )
        knee_label = "last step"
    else:
        sub = (
            f"knee: {mode_label(mode)} {knee['load']} (p99 TTFT past {factor} the first step's at "
            f"{knee['exceeded_load']})"
        )
        knee_label = "knee"
    canvas.text((WIDTH - font5x7.text_width(sub, SCALE)) // 2, 52, sub, GREY, SCALE)
    layout: dict[str, Any] = {"panels": {}}
    if not steps:
        msg = "no step produced figures: see the Markdown report"
        canvas.text((WIDTH - font5x7.text_width(msg, SCALE)) // 2, HEIGHT // 2, msg, RED, SCALE)
        return canvas.to_png(), layout
    knee_load = float(knee["load"]) if knee.get("index") is not None else None
    x_label = mode_label(mode)

    def pct(metric: str) -> Callable[[str], list[float | None]]:
        return lambda p: [(s.get(f"{metric}_ms") or {}).get(p) for s in steps]

    ttft, tpot = pct("ttft"), pct("tpot")
    threshold = knee.get("threshold_ms")
    hline = (float(threshold), f"{knee.get('factor', 0):g}x first p99") if threshold else None
    margin_left, margin_right = 100, 25
    width = (WIDTH - 3 * (margin_left + margin_right)) // 3
    boxes = []
    x = margin_left
    for _ in range(3):
        boxes.append((x, PANEL_TOP, x + width, PANEL_BOTTOM))
        x += width + margin_right + margin_left
    layout["panels"]["ttft"] = _panel(
        canvas,
        boxes[0],
        "Time to first token",
        "ms",
        loads,
        [("p50", BLUE, "-", ttft("p50")), ("p90", ORANGE, "-", ttft("p90")), ("p99", RED, "-", ttft("p99"))],
        x_label,
        knee_load,
        hline,
        knee_label=knee_label,
    )
    layout["panels"]["tpot"] = _panel(
        canvas,
        boxes[1],
        "Time per output token",
        "ms",
        loads,
        [("p50", BLUE, "-", tpot("p50")), ("p90", ORANGE, "-", tpot("p90")), ("p99", RED, "-", tpot("p99"))],
        x_label,
        knee_load,
        knee_label=knee_label,
    )
    layout["panels"]["throughput"] = _panel(
        canvas,
        boxes[2],
        "Output throughput",
        "tokens/s",
        loads,
        [("output tok/s", GREEN, "-", [s.get("output_throughput") for s in steps])],
        x_label,
        knee_load,
        allow_log=False,
        knee_label=knee_label,
    )
    return canvas.to_png(), layout
