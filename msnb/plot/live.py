"""A live view: one display handle updated in place, a few times a second at most.

Works the same in JupyterLab, VS Code and nbclient: the first update displays
an HTML block (a status line and the curve as a PNG) with ``display_id=True``;
later ones replace it through that handle.  No clear-and-redraw (it flashes in
VS Code), no server, no port.  Outside a notebook it prints a status line
instead, at the same throttled rate.
"""

from __future__ import annotations

import base64
import html
import sys
import time

import numpy as np

from ..errors import UsageError


def in_notebook() -> bool:
    """True inside a Jupyter kernel (a front end can show rich output)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    ip = get_ipython()
    return ip is not None and getattr(ip, "kernel", None) is not None


def status_line(scalars, *, step=None, total=None, started=None, tag=None, smooth: float = 0.6) -> str:
    """``step 120/200 (60%), ETA 12 s, loss 0.532 (smoothed)`` from what is known so far."""
    from ..events.tags import ALIASES
    from .smoothing import ema

    parts = []
    if scalars is not None and len(scalars):
        present = set(scalars.tags())
        tag = tag or next((t for t in ALIASES["loss"] if t in present), None)
        if step is None:
            step = int(np.max(scalars.step))
        if tag:
            _, values = scalars.series(tag)
            finite = values[np.isfinite(values)]
            if values.size and not np.isfinite(values[-1]):
                parts.append(f"{tag} {values[-1]}")
            elif finite.size:
                parts.append(f"{tag} {ema(finite, smooth)[-1]:.4g} (smoothed)")
    head = ""
    if step is not None:
        head = f"step {step}" + (f"/{total} ({100 * step / total:.0f}%)" if total else "")
        if total and started is not None and step > 0:
            elapsed = time.monotonic() - started
            eta = elapsed / step * max(total - step, 0)
            head += f", ETA {eta:.0f} s"
    return ", ".join(p for p in [head, *parts] if p) or "waiting for the first data"


class LiveView:
    """Throttled in-place display of a scalar table while it grows.

    ``update()`` returns True when it drew; calls closer together than
    ``min_interval`` seconds are skipped (``force=True`` draws anyway, as
    :meth:`close` does).  ``updates`` counts what was drawn.
    """

    def __init__(self, *, title: str = "", tags=None, smooth: float = 0.6, min_interval: float = 0.25, text=None, stream=None, total=None, ranks: bool = True):
        self.title = title
        self.tags = tags
        self.smooth = smooth
        self.min_interval = float(min_interval)
        self.text_mode = (not in_notebook()) if text is None else bool(text)
        self.stream = stream or sys.stdout
        self.total = total
        self.ranks = ranks
        self.started = time.monotonic()
        self.updates = 0
        self._last = -float("inf")
        self._handle = None
        self.last_status = ""

    def update(self, scalars=None, *, status: str | None = None, step=None, force: bool = False) -> bool:
        now = time.monotonic()
        if not force and now - self._last < self.min_interval:
            return False
        self._last = now
        self.updates += 1
        line = status if status is not None else status_line(scalars, step=step, total=self.total, started=self.started, smooth=self.smooth)
        self.last_status = line
        if self.text_mode:
            prefix = f"[{self.title}] " if self.title else ""
            print(prefix + line, file=self.stream, flush=True)
            return True
        self._show(self._html(scalars, line))
        return True

    def close(self, scalars=None, *, status: str | None = None) -> None:
        """Draw the final state, whatever the throttle says."""
        self.update(scalars, status=status, force=True)

    # -------------------------------------------------------------- rendering
    def _png(self, scalars) -> bytes | None:
        if scalars is None or not len(scalars):
            return None
        from matplotlib.figure import Figure

        from .render import figure_png
        from .scalars import plot_scalars, resolve_tags

        try:
            tags = resolve_tags(scalars.tags(), self.tags)[:4]
        except UsageError:
            return None
        fig = Figure(figsize=(6.4 if len(tags) == 1 else 10, 2.8 if len(tags) <= 2 else 5), layout="constrained", dpi=80)
        plot_scalars(scalars, tags=tags, smooth=self.smooth, ranks=self.ranks, figure=fig, max_points=800)
        return figure_png(fig, dpi=80)

    def _html(self, scalars, line: str):
        from IPython.display import HTML

        title = f"<b>{html.escape(self.title)}</b> " if self.title else ""
        png = self._png(scalars)
        img = f'<br><img src="data:image/png;base64,{base64.b64encode(png).decode()}"/>' if png else ""
        return HTML(f'<div class="msnb-live">{title}<code>{html.escape(line)}</code>{img}</div>')

    def _show(self, obj) -> None:
        from IPython.display import display

        if self._handle is None:
            self._handle = display(obj, display_id=True)
        else:
            self._handle.update(obj)
