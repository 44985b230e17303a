"""Where msnb writes a file the user named (``--out``): refused before any work when it cannot be written as a file.

One rule for the report, the plot and the smoke's figure, so a mistake gets the
same one-line error whichever command made it.
"""

from __future__ import annotations

import os

from .errors import UsageError

# matplotlib's own list (FigureCanvasBase.get_supported_filetypes), spelled out so that checking needs no matplotlib import
FIGURE_FORMATS = ("avif", "eps", "gif", "jpeg", "jpg", "pdf", "pgf", "png", "ps", "raw", "rgba", "svg", "svgz", "tif", "tiff", "webp")
MAX_DPI = 1200  # a 16 x 9 inch figure at 1,200 dpi is 200 megapixels already


def check_out(out, *, what: str, hint: str) -> tuple[str, str]:
    """The output path and the file it will replace.

    A symlink is written through (its target is replaced, the link stays), as
    ``>`` does: replacing the link itself would turn ``/dev/stdout`` into a file.

    Args:
        out: the path given.
        what: what the file is, for messages (``the HTML file``).
        hint: how to name one, for the message when none was given.

    Returns:
        ``(out, target)``: the path as given, and the real file behind it.

    Raises:
        UsageError: *out* is empty, a directory, an existing non-regular file, under /dev or /proc, or in a missing directory.
    """
    if not isinstance(out, (str, os.PathLike)) or not str(out):
        raise UsageError(f"give {what}: {hint}")
    out = os.fspath(out)
    if os.path.isdir(out):
        raise UsageError(f"--out {out} is a directory; name {what} to write")
    if os.path.exists(out) and not os.path.isfile(out):
        raise UsageError(f"--out {out} exists and is not a regular file")
    if os.path.abspath(out).startswith(("/dev/", "/proc/")):
        raise UsageError(f"--out {out} names a device or a process's open file; name {what} to write")
    target = os.path.realpath(out)
    parent = os.path.dirname(target)
    if not os.path.isdir(parent):
        raise UsageError(f"--out {out}: the directory {parent} does not exist")
    return out, target


def figure_out(out, dpi: int = 100) -> str:
    """The file a figure will be saved to (``.png`` added when *out* names no format, as matplotlib does).

    Args:
        out: the path given.
        dpi: the resolution asked for.

    Returns:
        The path the figure is written to.

    Raises:
        UsageError: *out* cannot be written (see :func:`check_out`), names a format matplotlib cannot write, or *dpi* is out of range.
    """
    if not (isinstance(dpi, int) and 1 <= dpi <= MAX_DPI):
        raise UsageError(f"--dpi must be a whole number from 1 to {MAX_DPI}, not {dpi}")
    out, _target = check_out(out, what="the figure file", hint="--out FILE.png")
    ext = os.path.splitext(out)[1][1:].lower()
    if not ext:
        out, ext = out + ".png", "png"
        check_out(out, what="the figure file", hint="--out FILE.png")
    if ext not in FIGURE_FORMATS:
        raise UsageError(f"--out {out}: matplotlib cannot write '.{ext}' figures (use .png, .svg or .pdf)")
    return out
