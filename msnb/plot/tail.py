"""Following a running job from a notebook: the incremental reader feeding the live view."""

from __future__ import annotations

import os

from ..events import Follower
from ..words import count
from .live import LiveView, check_polling, poll_for


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
    check_polling(every, duration)
    follower = Follower(path, verify=verify)
    view = view or LiveView(title=str(path), tags=tags, smooth=smooth, min_interval=min(every, 1.0))

    def poll():
        if not follower.poll().empty:
            view.update(follower.result.scalars, force=True)

    view.update(None, status=f"following {path}", force=True)
    reason = poll_for(poll, every=every, duration=duration)
    result = follower.result
    view.close(result.scalars, status=f"{reason}; read {len(result.scalars):,} points from {count(len(result.files), 'file')}")
    return result
