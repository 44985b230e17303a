"""A live view: one display handle updated in place, a few times a second at most.

Works the same in JupyterLab, VS Code and nbclient: the first update displays
an HTML block (a status line and the curve as a PNG, with the status line as
``text/plain`` too) with ``display_id=True``; later ones replace it through that
handle.  A status alone ("starting MindSpore...") draws before any data.  No clear-and-redraw (it flashes in
VS Code), no server, no port.  Outside a notebook it prints a status line
instead, at the same throttled rate.
"""

from __future__ import annotations

import base64
import html
import sys
import time

import numpy as np

from ..analysis.smoothing import ema
from ..errors import UsageError
from ..events.tags import ALIASES
from .render import figure_png, in_notebook
from .scalars import plot_scalars, resolve_tags, smoothing_for


def check_polling(every: float, duration: float) -> None:
    """A UsageError naming ``--every`` or ``--for`` when either is not a positive number of seconds (NaN included)."""
    if not every > 0:
        raise UsageError(f"--every must be a positive number of seconds, not {every}")
    if not duration > 0:
        raise UsageError(f"--for must be a positive number of seconds, not {duration}")


def poll_for(poll, *, every: float, duration: float) -> str:
    """Call *poll* now and every *every* seconds until *duration* seconds have passed or the user interrupts.

    The loop of ``%mfmon_tail`` and ``%mfmon_runs --every``: the notebook's stop
    button (KeyboardInterrupt) ends it quietly.

    Args:
        poll: called with no arguments once per poll.
        every: seconds between polls (> 0).
        duration: seconds to keep polling (> 0).

    Returns:
        Why it stopped (``stopped after 60 s``, ``interrupted after 12 s``).

    Raises:
        UsageError: *every* or *duration* is not positive.
    """
    check_polling(every, duration)
    started = time.monotonic()
    try:
        while True:
            poll()
            remaining = duration - (time.monotonic() - started)
            if remaining <= 0:
                return f"stopped after {duration:.0f} s"
            time.sleep(min(every, remaining))
    except KeyboardInterrupt:
        return f"interrupted after {time.monotonic() - started:.0f} s"


STARTUP_INTERVALS = 1  # the first step-to-step interval still carries compilation and warm-up
MIN_STEADY_INTERVALS = 2  # intervals needed after it before an ETA is worth showing
RECENT_INTERVALS = 20  # the ETA follows the recent pace


def steady_step_seconds(steps, times) -> float | None:
    """Seconds per step in the steady state, or None while there is not enough to say.

    Start-up and compilation happen before and during the first steps, so the
    time up to the first step seen and the first interval after it are left
    out; the median of the recent intervals is robust to one slow step.

    Args:
        steps: step numbers (any order, repeats allowed: several ranks).
        times: when each step was seen, in seconds (NaN where unknown).

    Returns:
        Seconds per step, or None.
    """
    steps = np.asarray(steps, dtype=np.float64)
    times = np.asarray(times, dtype=np.float64)
    ok = np.isfinite(steps) & np.isfinite(times)
    if ok.sum() < 2:
        return None
    uniq, inv = np.unique(steps[ok], return_inverse=True)
    first_seen = np.full(uniq.size, np.inf)
    np.minimum.at(first_seen, inv, times[ok])
    per_step = np.diff(first_seen) / np.diff(uniq)
    per_step = per_step[STARTUP_INTERVALS:][-RECENT_INTERVALS:]
    per_step = per_step[np.isfinite(per_step) & (per_step >= 0)]
    if per_step.size < MIN_STEADY_INTERVALS:
        return None
    return float(np.median(per_step))


def status_line(scalars, *, step=None, total=None, seconds_per_step=None, tag=None, smooth: float = 0.6) -> str:
    """``step 120/200 (60%), ETA 12 s, loss 0.532 (smoothed)`` from what is known so far.

    Args:
        scalars: the table so far (None or empty before the first data).
        step: the latest step (default: the table's largest).
        total: the steps the run will take, for the percentage and the ETA.
        seconds_per_step: the steady-state pace (:func:`steady_step_seconds`);
            None says "ETA estimating".
        tag: the tag whose latest value to show (default: the loss).
        smooth: smoothing weight for that value.

    Returns:
        One line of text.
    """
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
                parts.append(f"{tag} {ema(finite, smooth)[-1]:.4g}" + (" (smoothed)" if smooth > 0 else ""))
    head = ""
    if step is not None:
        head = f"step {step}" + (f"/{total} ({100 * step / total:.0f}%)" if total else "")
        if total and step < total:
            head += ", ETA estimating" if seconds_per_step is None else f", ETA {_duration(seconds_per_step * (total - step))}"
    return ", ".join(p for p in [head, *parts] if p) or "waiting for the first data"


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def one_loss_source(scalars):
    """The rows of the one run that logs the loss most often (None and tables without a loss pass unchanged).

    A smoke's training writes its loss twice (msnb's step callback every step, MindSpore's summary every few steps):
    a live curve of both draws one loss twice, differently.  Ties go to the first run in sorted order.
    """
    if scalars is None or not len(scalars):
        return scalars
    present = set(scalars.tags())
    tags = [t for t in ALIASES["loss"] if t in present]
    if not tags:
        return scalars
    runs, counts = np.unique(scalars.run[np.isin(scalars.tag, tags)].astype(str), return_counts=True)
    if len(runs) < 2:
        return scalars
    return scalars.where(run=str(runs[int(np.argmax(counts))]))


def _this_run(run: str) -> str:
    """The legend name of a run: "." (the path followed is the run itself) reads "this run", not a dot."""
    return "this run" if run == "." else run


class LiveView:
    """Throttled in-place display of a scalar table while it grows.

    It shows *status* ("starting...") as soon as it is made, so a person sees
    the job begin before the first step arrives (None: nothing until the first
    update).  ``update()`` returns True when it drew; calls closer together
    than ``min_interval`` seconds are skipped (``force=True`` draws anyway, as
    :meth:`close` does).  ``updates`` counts what was drawn, that first status
    line included.  *smooth* and *label_for_run* are passed to
    :func:`~msnb.plot.plot_scalars`.
    """

    def __init__(
        self,
        *,
        title: str = "",
        tags=None,
        smooth=0.6,
        min_interval: float = 0.25,
        text=None,
        stream=None,
        total=None,
        ranks: bool = True,
        label_for_run=None,
        status: str | None = "starting...",
    ):
        self.title = title
        self.tags = tags
        self.smooth = smooth
        self.min_interval = float(min_interval)
        self.text_mode = (not in_notebook()) if text is None else bool(text)
        self.stream = stream or sys.stdout
        self.total = total
        self.ranks = ranks
        self.label_for_run = label_for_run or _this_run
        self.started = time.monotonic()
        self._seen: dict[int, float] = {}  # step -> when this view first saw it (the pace when the data has no wall time)
        self.updates = 0
        self._last = -float("inf")
        self._handle = None
        self.last_status = ""
        if status is not None:
            self.update(status=status, force=True)  # something on screen at once: start-up and compilation take seconds to minutes

    def update(self, scalars=None, *, status: str | None = None, step=None, force: bool = False) -> bool:
        """Redraw with *scalars* (the table so far) or a *status* line alone (before any data: "starting MindSpore...").

        Returns True when it drew (calls closer than ``min_interval`` are skipped unless *force*)."""
        now = time.monotonic()
        latest = step if step is not None else (int(np.max(scalars.step)) if scalars is not None and len(scalars) else None)
        if latest is not None:
            self._seen.setdefault(int(latest), now)
        if not force and now - self._last < self.min_interval:
            return False
        self.updates += 1
        if status is not None:
            line = status
        else:
            weight = smoothing_for("loss", self.smooth)
            line = status_line(scalars, step=step, total=self.total, seconds_per_step=self.seconds_per_step(scalars), smooth=weight)
        self.last_status = line
        if self.text_mode:
            prefix = f"[{self.title}] " if self.title else ""
            print(prefix + line, file=self.stream, flush=True)
        else:
            self._show(self._bundle(scalars, line))
        self._last = time.monotonic()  # the interval counts from the end of a draw: a slow draw is not followed by another at once
        return True

    def seconds_per_step(self, scalars=None) -> float | None:
        """The steady-state pace: from the data's wall times when it has them, else from when this view saw each step."""
        if scalars is not None and len(scalars) and np.isfinite(scalars.wall_time).any():
            pace = steady_step_seconds(scalars.step, scalars.wall_time)
            if pace is not None:
                return pace
        if self._seen:
            return steady_step_seconds(list(self._seen), list(self._seen.values()))
        return None

    def close(self, scalars=None, *, status: str | None = None) -> None:
        """Draw the final state, whatever the throttle says."""
        self.update(scalars, status=status, force=True)

    # -------------------------------------------------------------- rendering
    def _png(self, scalars) -> bytes | None:
        if scalars is None or not len(scalars):
            return None
        from matplotlib.figure import Figure  # deferred: matplotlib, until a figure is drawn

        try:
            tags = resolve_tags(scalars.tags(), self.tags)[:4]
        except UsageError:
            return None
        fig = Figure(figsize=(6.4 if len(tags) == 1 else 10, 2.8 if len(tags) <= 2 else 5), layout="constrained", dpi=80)
        plot_scalars(scalars, tags=tags, smooth=self.smooth, ranks=self.ranks, figure=fig, max_points=800, label_for_run=self.label_for_run)
        return figure_png(fig, dpi=80)

    def _bundle(self, scalars, line: str) -> dict:
        """HTML (the status line and the curve) and the status line as plain text, for front ends without HTML."""
        title = f"<b>{html.escape(self.title)}</b> " if self.title else ""
        png = self._png(scalars)
        img = f'<br><img src="data:image/png;base64,{base64.b64encode(png).decode()}"/>' if png else ""
        text = (f"[{self.title}] " if self.title else "") + line
        return {"text/html": f'<div class="msnb-live">{title}<code class="msnb-status">{html.escape(line)}</code>{img}</div>', "text/plain": text}

    def _show(self, obj) -> None:
        from IPython.display import display  # deferred: IPython, only in a notebook

        if self._handle is None:
            self._handle = display(obj, raw=True, display_id=True)
        else:
            self._handle.update(obj, raw=True)
