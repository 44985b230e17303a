"""Widget messages handled while an async cell runs get their busy and idle status, so the widget stays live.

ipywidgets' front end sends a widget's next change only once the kernel has said "idle" for the one before (the
status message whose parent is that change).  ipykernel 7 handles a comm message that arrives while a cell awaits
(``await asyncio.sleep(...)`` at the top level) beside the cell, and for those it publishes no status at all: the
front end waits for ever, and the widget goes dead (its number moves, nothing reaches the kernel, the figure never
changes).  It happens without anyone touching the widget: a value set from Python that the front end rounds is sent
back, and when that echo lands during an awaiting cell the slider is lost.  Loading msnb's extension wraps the
kernel's dispatch so such a message gets the busy and idle status every other shell message gets, with itself as
parent.
"""

from __future__ import annotations

import functools
import inspect

COMM_TYPES = frozenset({"comm_open", "comm_msg", "comm_close"})
MARK = "_msnb_comm_status"


def _parent(kernel, frames):
    """The message's header as the status's parent (content left unparsed), or None when it cannot be read."""
    try:
        _idents, rest = kernel.session.feed_identities(frames, copy=False)
        return kernel.session.deserialize(rest, content=False, copy=False)
    except Exception:  # a malformed message: ipykernel's own dispatch reports it
        return None


def answer_comms_during_async_cells(kernel) -> bool:
    """Make *kernel* publish busy/idle for comm messages it handles beside an awaiting cell.

    Args:
        kernel: an ipykernel ``Kernel`` (``get_ipython().kernel``), or anything else (then nothing is done).

    Returns:
        True when the kernel's dispatch was wrapped (now or before); False when this kernel has no concurrent dispatch
        (ipykernel before 7 handles every message in turn and publishes its status itself).
    """
    dispatch = getattr(kernel, "dispatch_shell", None)
    if dispatch is None or not hasattr(kernel, "_publish_status") or not hasattr(kernel, "session"):
        return False
    if getattr(dispatch, MARK, False):
        return True
    try:
        concurrent = "concurrent" in inspect.signature(dispatch).parameters
    except (TypeError, ValueError):
        concurrent = False
    if not concurrent:
        return False

    @functools.wraps(dispatch)
    async def dispatch_shell(msg, /, subshell_id=None, *, concurrent=False):
        parent = _parent(kernel, msg) if concurrent else None
        if parent is None or parent.get("header", {}).get("msg_type") not in COMM_TYPES:
            return await dispatch(msg, subshell_id=subshell_id, concurrent=concurrent)
        kernel._publish_status("busy", "shell", parent=parent)
        try:
            return await dispatch(msg, subshell_id=subshell_id, concurrent=concurrent)
        finally:
            kernel._publish_status("idle", "shell", parent=parent)

    setattr(dispatch_shell, MARK, True)
    kernel.dispatch_shell = dispatch_shell
    return True
