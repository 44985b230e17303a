"""Following a running job from a notebook: the incremental reader feeding the live view."""

from __future__ import annotations

import os
import time

from ..errors import UsageError
from .live import LiveView


def tail(
    path: str | os.PathLike, *, every: float = 2.0, duration: float = 600.0, tags=None, smooth: float = 0.6, view: LiveView | None = None, verify: bool = True
):
    """Follow *path* (a summary directory, a TensorBoard directory or a log) for *duration* seconds.

    Polls every *every* seconds, reading only what was added, and redraws the
    live view when something new arrived.  Stops when the time is up or on
    KeyboardInterrupt (the notebook's stop button), and returns everything read
    (a :class:`~msnb.events.ReadResult`).

    Args:
        path: what to follow; it may not exist yet (a job about to start).
        every: seconds between polls (> 0).
        duration: seconds to follow before stopping (> 0).
        tags: tags or meanings to draw (default: the usual panels).
        smooth: smoothing weight of the drawn curves, in [0, 1).
        view: a :class:`LiveView` to draw into (default: a new one).
        verify: check CRCs while reading.

    Returns:
        The :class:`~msnb.events.ReadResult` of everything read.

    Raises:
        UsageError: *every* or *duration* is not positive.
    """
    from ..events import Follower

    if not every > 0:
        raise UsageError(f"--every must be a positive number of seconds, not {every}")
    if not duration > 0:
        raise UsageError(f"--for must be a positive number of seconds, not {duration}")
    follower = Follower(path, verify=verify)
    view = view or LiveView(title=str(path), tags=tags, smooth=smooth, min_interval=min(every, 1.0))
    started = time.monotonic()
    reason = f"stopped after {duration:.0f} s"
    try:
        view.update(None, status=f"following {path}", force=True)
        while True:
            new = follower.poll()
            if not new.empty:
                view.update(follower.result.scalars, force=True)
            remaining = duration - (time.monotonic() - started)
            if remaining <= 0:
                break
            time.sleep(min(every, remaining))
    except KeyboardInterrupt:
        reason = f"interrupted after {time.monotonic() - started:.0f} s"
    result = follower.result
    view.close(result.scalars, status=f"{reason}; read {len(result.scalars):,} points from {len(result.files)} file(s)")
    return result
