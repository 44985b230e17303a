"""The team panel in a notebook: one self-contained HTML table, no script, no server.

Each run gets a status light (red failed, amber worth a look, green fine) and
an inline SVG sparkline of its smoothed loss, so twenty runs fit on one screen
and the front end (JupyterLab, VS Code, a static HTML export) needs nothing
but HTML to show them.
"""

from __future__ import annotations

import html
import math

from ..status import IDLE, LIGHT_COLORS, PASS, SKIP, status_word
from .cells import COLUMNS, text_cells

LIGHTS = LIGHT_COLORS
SPARK_WIDTH, SPARK_HEIGHT, SPARK_PAD = 160, 28, 2


def sparkline_svg(values, color: str, *, width: int = SPARK_WIDTH, height: int = SPARK_HEIGHT) -> str:
    """An inline SVG line of *values* scaled to fit, its last point marked; a dash when there are fewer than two finite values.

    Args:
        values: the points, oldest first (non-finite ones are left out).
        color: the line's CSS colour.
        width: pixels.
        height: pixels.

    Returns:
        One ``<svg>`` element.
    """
    ys = [float(v) for v in values if math.isfinite(float(v))]
    head = f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" style="max-width:none" role="img"'
    if len(ys) < 2:
        mid = height / 2
        return f'{head} aria-label="no loss curve"><line x1="{SPARK_PAD}" y1="{mid}" x2="{width - SPARK_PAD}" y2="{mid}" stroke="#8c959f" stroke-dasharray="3,3"/></svg>'
    lo, hi = min(ys), max(ys)
    span = hi - lo or 1.0
    inner_w, inner_h = width - 2 * SPARK_PAD, height - 2 * SPARK_PAD
    pts = [(SPARK_PAD + inner_w * i / (len(ys) - 1), SPARK_PAD + inner_h * (1 - (y - lo) / span)) for i, y in enumerate(ys)]
    path = " ".join(f"{x:.1f},{y:.1f}" for x, y in pts)
    lx, ly = pts[-1]
    label = html.escape(f"smoothed loss {ys[0]:.4g} to {ys[-1]:.4g}")
    return (
        f'{head} aria-label="{label}"><title>{label}</title>'
        f'<polyline points="{path}" fill="none" stroke="{color}" stroke-width="1.5" stroke-linejoin="round"/>'
        f'<circle cx="{lx:.1f}" cy="{ly:.1f}" r="2" fill="{color}"/></svg>'
    )


STATUS_COLORS = {"failed": LIGHTS["red"], "active": "inherit", "idle": IDLE}
NUMERIC = {"last step", "loss", "smoothed", "size", "age"}
PAD = "padding:0.1em 0.5em"
KEEP = ";white-space:nowrap"  # a status, a number, a size or an age on one line in a narrow notebook (runs and flags may wrap)


def verdict_title(row) -> str:
    """The light's tooltip: the checks that did not pass, or that all did."""
    bad = [f"{status_word(c.status)} {c.name}: {c.detail}" for c in row.verdict.checks if c.status not in (PASS, SKIP)]
    if row.missing_ranks:
        bad.append(f"ranks missing: {', '.join(map(str, row.missing_ranks))}" + (f" and {row.missing_more:,} more" if row.missing_more else ""))
    return "\n".join(bad) or "every check passed"


def status_light(light: str, title: str) -> str:
    """A coloured dot (a styled span, so a row holds exactly one SVG: its sparkline)."""
    color = LIGHTS[light]
    return (
        f'<span title="{html.escape(title)}" style="display:inline-block;width:0.8em;height:0.8em;border-radius:50%;'
        f'background:{color};vertical-align:middle;margin-right:0.3em"></span>'
    )


def render_table(table) -> str:
    """The whole panel: a header line, one row per run (light, cells, sparkline), then the flags and problems.

    Args:
        table: a :class:`~msnb.panel.table.RunsTable`.

    Returns:
        An HTML fragment.
    """
    th = "".join(f'<th style="{PAD}">{html.escape(c)}</th>' for c in COLUMNS[:2] + ("loss curve",) + COLUMNS[2:])
    body = []
    for row in table.rows:
        cells = [html.escape(c) for c in text_cells(row, table.now)]
        color = LIGHTS[row.light]
        status = f'{status_light(row.light, verdict_title(row))}<span style="color:{STATUS_COLORS[row.status]};font-weight:bold">{cells[1]}</span>'
        tds = [
            f'<td style="{PAD};text-align:left">{cells[0]}</td>',
            f'<td style="{PAD}{KEEP};text-align:left">{status}</td>',
            f'<td style="{PAD}">{sparkline_svg(row.curve, color)}</td>',
        ]
        for name, c in zip(COLUMNS[2:], cells[2:]):
            style = f"{PAD};text-align:left" if name == "flags" else f"{PAD}{KEEP};text-align:{'right' if name in NUMERIC else 'left'}"
            if name == "missing" and row.missing_ranks:
                style += f";color:{LIGHTS['amber']};font-weight:bold"
            tds.append(f'<td style="{style}">{c}</td>')
        body.append(f"<tr>{''.join(tds)}</tr>")
    notes = []
    for row in table.rows:
        for f in row.flags:
            who = f"rank {f.rank}" if f.rank >= 0 else "run"
            notes.append(
                f'<li><span style="color:{LIGHTS["red"]}">FLAG</span> {html.escape(row.run)}, {who}, {html.escape(f.tag)} from step {f.step}: {html.escape(f.reason)}</li>'
            )
    for p in table.all_problems:
        notes.append(f"<li>{html.escape(str(p.severity))}: {html.escape(str(p))}</li>")
    if table.note:
        notes.append(f"<li>{html.escape(table.note)}</li>")
    head_color = LIGHTS["green" if table.passed else "red"]
    head = f'<b style="color:{head_color}">msnb runs</b> <span>{html.escape(table.summary())}</span>'
    listed = f"<ul>{''.join(notes)}</ul>" if notes else ""
    return f'<div class="msnb-runs">{head}<table><thead><tr>{th}</tr></thead><tbody>{"".join(body)}</tbody></table>{listed}</div>'
