"""Balance-over-time chart as an inline SVG, rendered on the server (no JS library).

A balance is a step function: it keeps its value until the next entry. The
chart draws it so, over the time span of the points given, with the lowest and
highest balance and the first and last date as axis labels. Each point has a
``<title>`` (a native tooltip). Every text is escaped; the output is safe to
insert into a page with ``|safe``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from html import escape

WIDTH = 720
HEIGHT = 240
_LEFT, _RIGHT, _TOP, _BOTTOM = 76, 18, 16, 34


@dataclass(frozen=True, slots=True)
class Point:
    at: datetime
    balance: int
    label: str = ""


def _fmt(value: int) -> str:
    return f"{value:,}"


def balance_chart(
    points: Sequence[Point],
    *,
    title: str = "Balance over time",
    fmt: Callable[[int], str] = _fmt,
) -> str:
    """An SVG of ``points`` (oldest first); a short message when there is nothing to draw.

    ``fmt`` writes a balance for people (the admin page passes the fund's currency)."""
    if not points:
        return (
            f'<svg class="chart" viewBox="0 0 {WIDTH} 40" role="img" '
            f'aria-label="{escape(title)}: no entries">'
            f'<text x="{WIDTH // 2}" y="24" text-anchor="middle">no entries in this range</text>'
            "</svg>"
        )
    pts = sorted(points, key=lambda p: p.at)
    t0, t1 = pts[0].at.timestamp(), pts[-1].at.timestamp()
    low = min(0, *(p.balance for p in pts))
    high = max(p.balance for p in pts)
    if high == low:
        high = low + 1
    span_t = t1 - t0
    plot_w = WIDTH - _LEFT - _RIGHT
    plot_h = HEIGHT - _TOP - _BOTTOM

    def x(i: int, p: Point) -> float:
        if span_t <= 0:  # all at one instant: spread them evenly
            return _LEFT + plot_w * (i / max(1, len(pts) - 1) if len(pts) > 1 else 1.0)
        return _LEFT + plot_w * (p.at.timestamp() - t0) / span_t

    def y(value: int) -> float:
        return _TOP + plot_h * (high - value) / (high - low)

    coords = [(x(i, p), y(p.balance)) for i, p in enumerate(pts)]
    if len(coords) == 1:  # one entry: its balance held over the whole width
        path = f"M{_LEFT},{coords[0][1]:.1f}H{coords[0][0]:.1f}"
    else:
        path = f"M{coords[0][0]:.1f},{coords[0][1]:.1f}" + "".join(
            f"H{cx:.1f}V{cy:.1f}" for cx, cy in coords[1:]
        )
    dots = "".join(
        f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="4"><title>'
        f"{escape(p.at.strftime('%Y-%m-%d %H:%M'))}: {escape(fmt(p.balance))}"
        f"{escape(' — ' + p.label) if p.label else ''}</title></circle>"
        for (cx, cy), p in zip(coords, pts, strict=True)
    )
    zero = (
        f'<line class="zero" x1="{_LEFT}" x2="{WIDTH - _RIGHT}" y1="{y(0):.1f}" y2="{y(0):.1f}"/>'
        if low < 0
        else ""
    )
    first, last = pts[0].at.strftime("%Y-%m-%d"), pts[-1].at.strftime("%Y-%m-%d")
    label = (
        f"{title}: {len(pts)} entries from {first} to {last}, "
        f"lowest {fmt(low)}, highest {fmt(high)}"
    )
    return (
        f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
        f'aria-label="{escape(label)}" preserveAspectRatio="xMidYMid meet">'
        f'<line class="axis" x1="{_LEFT}" x2="{_LEFT}" y1="{_TOP}" y2="{HEIGHT - _BOTTOM}"/>'
        f'<line class="axis" x1="{_LEFT}" x2="{WIDTH - _RIGHT}" y1="{HEIGHT - _BOTTOM}" '
        f'y2="{HEIGHT - _BOTTOM}"/>{zero}'
        f'<text x="{_LEFT - 6}" y="{_TOP + 5}" text-anchor="end">{escape(fmt(high))}</text>'
        f'<text x="{_LEFT - 6}" y="{HEIGHT - _BOTTOM}" text-anchor="end">{escape(fmt(low))}</text>'
        f'<text x="{_LEFT}" y="{HEIGHT - 10}">{escape(first)}</text>'
        f'<text x="{WIDTH - _RIGHT}" y="{HEIGHT - 10}" text-anchor="end">{escape(last)}</text>'
        f'<path class="line" d="{path}"/>{dots}</svg>'
    )
