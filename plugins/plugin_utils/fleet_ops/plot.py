"""Latency-vs-load chart of a benchmark report, drawn as a PNG with matplotlib (Agg).

Three panels side by side, sharing the load axis: time to first token (p50/p90/p99,
with the knee threshold), time per output token (p50/p90/p99) and output throughput.
The knee (or, when the sweep never crossed the threshold, the last step) is a dashed
vertical line in every panel. The load axis is logarithmic when the sweep spans a factor
of 4 or more (1, 2, 4, 8, ... spreads evenly); a latency axis is logarithmic when its
values span more than a factor of 20, so one saturated step does not flatten the others.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Mapping, Sequence
from typing import Any

try:  # the control-node venv has it (requirements.txt); the collection still loads where it does not
    from matplotlib.axes import Axes
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.text import Text
    from matplotlib.ticker import FuncFormatter, LogLocator, NullLocator
except ImportError as exc:
    MATPLOTLIB_ERROR: ImportError | None = exc
else:
    MATPLOTLIB_ERROR = None

from .bench import mode_label

Color = tuple[int, int, int]
Series = tuple[str, Color, Sequence[float | None]]

BLUE: Color = (31, 119, 180)
ORANGE: Color = (255, 127, 14)
RED: Color = (214, 39, 40)
GREEN: Color = (44, 160, 44)
GREY: Color = (120, 120, 120)
KNEE: Color = (90, 90, 90)

WIDTH, HEIGHT, DPI = 1500, 600, 100
MARKERS = ("o", "s", "^", "D")


def _rgb(color: Color) -> tuple[float, float, float]:
    return (color[0] / 255, color[1] / 255, color[2] / 255)


def tick_label(value: float, _pos: object = None) -> str:
    if value >= 10000:
        return f"{value / 1000:g}k"
    if value >= 1 or value == 0:
        return f"{value:g}"
    return f"{value:.3g}"


def _is_log(values: Sequence[float], ratio: float, strict: bool) -> bool:
    if len(values) < 2 or min(values) <= 0:
        return False
    span = max(values) / min(values)
    return span > ratio if strict else span >= ratio


def _pixel_mapper(ax: Axes, axis: str) -> Callable[[float], float]:
    """Data value -> pixel column (``x``) or row from the top (``y``) of the rendered PNG."""

    def to_pixel(value: float) -> float:
        if axis == "x":
            return float(ax.transData.transform((value, 1.0 if ax.get_yscale() == "log" else 0.0))[0])
        x_ref = ax.get_xlim()[0]
        return HEIGHT - float(ax.transData.transform((x_ref, value))[1])

    return to_pixel


def _panel(
    ax: Axes,
    title: str,
    y_label: str,
    loads: Sequence[float],
    series: Sequence[Series],
    x_label: str,
    knee_load: float | None,
    hline: tuple[float, str] | None = None,
    allow_log: bool = True,
    knee_label: str = "knee",
) -> dict[str, Any]:
    values = [v for _unused, _unused, vals in series for v in vals if v is not None]
    if hline:
        values.append(hline[0])
    log_y = allow_log and _is_log(values, 20, strict=True)
    if log_y:
        ax.set_yscale("log")
        ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        ax.yaxis.set_major_formatter(FuncFormatter(tick_label))
        ax.yaxis.set_minor_formatter(FuncFormatter(lambda _v, _p: ""))
    else:
        ax.set_ylim(0, (max(values) if values else 1.0) * 1.1 or 1.0)
    if _is_log(loads, 4, strict=False):
        ax.set_xscale("log")
        ax.xaxis.set_minor_locator(NullLocator())
    # ticks at the swept loads
    ax.set_xticks(list(loads))
    ax.xaxis.set_major_formatter(FuncFormatter(tick_label))
    ax.margins(x=0.06)
    ax.set_title(title, fontsize=13)
    ax.set_xlabel(x_label, color=_rgb(GREY))
    ax.set_ylabel(y_label + (" (log)" if log_y else ""), color=_rgb(GREY))
    ax.grid(True, color="0.88", linewidth=0.8)
    ax.set_axisbelow(True)
    for number, (name, color, vals) in enumerate(series):
        points = [(ld, v) for ld, v in zip(loads, vals, strict=True) if v is not None]
        ax.plot(
            [p[0] for p in points],
            [p[1] for p in points],
            color=_rgb(color),
            marker=MARKERS[number % len(MARKERS)],
            markersize=7,
            linewidth=2.2,
            label=name,
        )
    if hline is not None:
        ax.axhline(hline[0], color=_rgb(RED), linewidth=1.5, linestyle=(0, (6, 4)))
        ax.annotate(
            hline[1],
            xy=(1.0, hline[0]),
            xycoords=("axes fraction", "data"),
            xytext=(-6, -4),
            textcoords="offset points",
            ha="right",
            va="top",
            color=_rgb(RED),
        )
    if knee_load is not None:
        ax.axvline(knee_load, color=_rgb(KNEE), linewidth=2, linestyle=(0, (5, 4)))
        ax.annotate(
            knee_label,
            xy=(knee_load, 0.0),
            xycoords=("data", "axes fraction"),
            xytext=(-6, 6),
            textcoords="offset points",
            ha="right",
            va="bottom",
            color=_rgb(KNEE),
        )
    ax.legend(loc="upper left", fontsize=10, framealpha=0.9)
    return {"ax": ax, "x_axis": _pixel_mapper(ax, "x"), "y_axis": _pixel_mapper(ax, "y"), "log_y": log_y,
            "box": _box(ax)}  # fmt: skip


def _box(ax: Axes) -> Callable[[], tuple[int, int, int, int]]:
    """(left, top, right, bottom) of the panel's frame in PNG pixels, once the figure is laid out."""

    def box() -> tuple[int, int, int, int]:
        x0, y0, x1, y1 = ax.get_window_extent().extents
        return round(x0), round(HEIGHT - y1), round(x1), round(HEIGHT - y0)

    return box


def render_chart(report: Mapping[str, Any]) -> bytes:
    """The PNG bytes of the report's latency-vs-load chart."""
    png, _layout = render_chart_with_layout(report)
    return png


def _headline(report: Mapping[str, Any], steps: Sequence[Mapping[str, Any]]) -> tuple[str, str, str]:
    """(title, subtitle, label of the vertical marker)."""
    settings = report["settings"]
    knee = report.get("knee") or {}
    title = (
        f"vllm bench serve: {settings.get('model', 'model')} via {settings.get('target', 'endpoint')}"
        f" ({len(steps)} steps)"
    )
    factor = f"{knee.get('factor', 0):g}x"
    if knee.get("index") is None:
        return title, "no knee: the first step did not complete cleanly (see the report)", "knee"
    if knee.get("exceeded_load") is None:
        sub = (
            f"no knee within the sweep: p99 TTFT stayed under {factor} the first step's up to {knee['load']}"
        )
        return title, sub, "last step"
    sub = (
        f"knee: {mode_label(settings['mode'])} {knee['load']} (p99 TTFT past {factor} the first step's at "
        f"{knee['exceeded_load']})"
    )
    return title, sub, "knee"


def render_chart_with_layout(report: Mapping[str, Any]) -> tuple[bytes, dict[str, Any]]:
    """The PNG and, per panel, the axes and data -> pixel mappings (for tests that check where
    points landed)."""
    if MATPLOTLIB_ERROR is not None:
        raise RuntimeError(
            f"the bench plot needs matplotlib ({MATPLOTLIB_ERROR}): "
            "pip install -r requirements.txt on the control node"
        )
    mode = report["settings"]["mode"]
    steps = [s for s in report["steps"] if s.get("ttft_ms")]
    loads = [float(s["load"]) for s in steps]
    knee = report.get("knee") or {}
    title, sub, knee_label = _headline(report, steps)
    fig = Figure(figsize=(WIDTH / DPI, HEIGHT / DPI), dpi=DPI, facecolor="white")
    FigureCanvasAgg(fig)
    _fit(fig.text(0.5, 0.965, title, ha="center", va="top", fontsize=16), WIDTH - 20)
    fig.text(0.5, 0.905, sub, ha="center", va="top", fontsize=12, color=_rgb(GREY))
    layout: dict[str, Any] = {"panels": {}}
    if not steps:
        fig.text(0.5, 0.5, "no step produced figures: see the Markdown report", ha="center",
                 color=_rgb(RED), fontsize=14)  # fmt: skip
        return _png(fig), layout
    knee_load = float(knee["load"]) if knee.get("index") is not None else None
    x_label = mode_label(mode)

    def pct(metric: str) -> Callable[[str], list[float | None]]:
        return lambda p: [(s.get(f"{metric}_ms") or {}).get(p) for s in steps]

    def percentiles(metric: str) -> list[Series]:
        values = pct(metric)
        return [("p50", BLUE, values("p50")), ("p90", ORANGE, values("p90")), ("p99", RED, values("p99"))]

    threshold = knee.get("threshold_ms")
    hline = (float(threshold), f"{knee.get('factor', 0):g}x first p99") if threshold else None
    axes = fig.subplots(1, 3)
    fig.subplots_adjust(left=0.06, right=0.985, top=0.79, bottom=0.12, wspace=0.24)
    panels = layout["panels"]
    panels["ttft"] = _panel(
        axes[0], "Time to first token", "ms", loads, percentiles("ttft"), x_label, knee_load, hline,
        knee_label=knee_label,
    )  # fmt: skip
    panels["tpot"] = _panel(
        axes[1], "Time per output token", "ms", loads, percentiles("tpot"), x_label, knee_load,
        knee_label=knee_label,
    )  # fmt: skip
    throughput: list[Series] = [("output tok/s", GREEN, [s.get("output_throughput") for s in steps])]
    panels["throughput"] = _panel(
        axes[2], "Output throughput", "tokens/s", loads, throughput, x_label, knee_load, allow_log=False,
        knee_label=knee_label,
    )  # fmt: skip
    return _png(fig), layout


def _fit(text: Text, width: float) -> None:
    """Cut ``text`` (ending it with "...") until it is at most ``width`` pixels wide."""
    renderer = text.figure.canvas.get_renderer()
    content = text.get_text()
    while len(content) > 4 and text.get_window_extent(renderer).width > width:
        content = content[: max(4, int(len(content) * 0.9)) - 3] + "..."
        text.set_text(content)


def _png(fig: Figure) -> bytes:
    out = io.BytesIO()
    fig.savefig(out, format="png", dpi=DPI)
    return out.getvalue()
