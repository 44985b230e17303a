"""Where msnb writes a file the user named (``--out``): one rule for every command that writes one.

- never through a symbolic link (a link planted where the figure goes would
  have its target replaced);
- never over a file the same command reads (the config being trained, the
  baseline compared against);
- never into ``/dev``, ``/proc``, ``/sys`` or another kernel filesystem;
- the path said is the path written (``.png`` added to a name without a
  format is checked, written and reported as such);
- written to a temporary name in the same folder and renamed over the
  destination, so a reader never sees half a file and a link planted after the
  check is replaced, never followed.

Every refusal is one :class:`~msnb.errors.UsageError` naming the path, raised
before any work, so a mistake costs nothing.
"""

from __future__ import annotations

import contextlib
import os
import signal
import stat
import tempfile
import threading

from .errors import UsageError
from .safe_files import pseudo_filesystem

# matplotlib's own list (FigureCanvasBase.get_supported_filetypes), spelled out so that checking needs no matplotlib import
FIGURE_FORMATS = ("avif", "eps", "gif", "jpeg", "jpg", "pdf", "pgf", "png", "ps", "raw", "rgba", "svg", "svgz", "tif", "tiff", "webp")
MAX_DPI = 1200  # a 16 x 9 inch figure at 1,200 dpi is 200 megapixels already
_KERNEL_FOLDERS = ("/dev", "/proc", "/sys")


def _refuse_kind(out: str, given) -> None:
    """Refuse *out* when it is a link, a folder or anything but a regular file."""
    try:
        st = os.lstat(out)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise UsageError(f"--out {given}: cannot be looked at: {exc.strerror or exc}") from None
    if stat.S_ISLNK(st.st_mode):
        raise UsageError(f"--out {given} is a symbolic link (to {os.readlink(out)}); msnb never writes through one: remove it or name another file")
    if stat.S_ISDIR(st.st_mode):
        raise UsageError(f"--out {given} is a directory; name the file to write in it")
    if not stat.S_ISREG(st.st_mode):
        raise UsageError(f"--out {given} exists and is not a regular file")


def _refuse_place(out: str, given) -> None:
    """Refuse a folder that is missing, not writable, or on a kernel filesystem."""
    parent = os.path.realpath(os.path.dirname(out))
    if any(parent == top or parent.startswith(top + "/") for top in _KERNEL_FOLDERS) or pseudo_filesystem(parent):
        raise UsageError(f"--out {given} lies under {parent}, a kernel folder of devices and processes; name a file elsewhere")
    if not os.path.isdir(parent):
        raise UsageError(f"--out {given}: the directory {parent} does not exist")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise UsageError(f"--out {given}: the directory {parent} is not writable")


def _refuse_inputs(out: str, given, inputs) -> None:
    """Refuse *out* when it is one of *inputs* (same file, or the same path when it does not exist yet)."""
    for path in inputs or ():
        if path is None or not isinstance(path, (str, os.PathLike)):
            continue
        try:
            same = os.path.realpath(path) == os.path.realpath(out) or (os.path.exists(out) and os.path.samefile(path, out))
        except (OSError, ValueError):
            same = False
        if same:
            raise UsageError(f"--out {given} is {os.fspath(path)}, which this command reads; name another file")


def check_out(out, *, what: str, hint: str, inputs=()) -> str:
    """The absolute path a file will be written to, after the one rule above.

    Args:
        out: the path given.
        what: what the file is, for messages (``the HTML file``).
        hint: how to name one, for the message when none was given.
        inputs: the paths the same command reads; *out* may be none of them.

    Returns:
        The absolute path (its last component not resolved: it is replaced, never followed).

    Raises:
        UsageError: see the module's rule.
    """
    if not isinstance(out, (str, os.PathLike)) or not str(out) or "\0" in str(out):
        raise UsageError(f"give {what}: {hint}")
    given = os.fspath(out)
    path = os.path.abspath(given)
    _refuse_kind(path, given)
    _refuse_place(path, given)
    _refuse_inputs(path, given, inputs)
    return path


def check_out_dir(out, *, what: str, inputs=()) -> str:
    """The absolute path of a folder msnb writes into (``convert``'s destination, a Parquet dataset), by the same rule.

    Refused: a folder under ``/dev``, ``/proc``, ``/sys`` or on a kernel
    filesystem; one that is, holds or lies inside a folder the same command
    reads (its output would land among the files it reads); a path that exists
    and is not a folder.  A folder given as a link is the user's choice and is
    written into; links planted inside it are the writer's to refuse.

    Raises:
        UsageError: as above.
    """
    given = os.fspath(out)
    path = os.path.abspath(given)
    real = os.path.realpath(path)
    fs = pseudo_filesystem(real)
    if any(real == top or real.startswith(top + "/") for top in _KERNEL_FOLDERS) or fs is not None:
        raise UsageError(f"{what} {given} is on the kernel's {fs or 'device'} filesystem; give a directory on disk")
    for src in inputs or ():
        if src is None:
            continue
        src_real = os.path.realpath(src)
        if real == src_real:
            raise UsageError(f"{what} {given} is the source directory; give another directory")
        if src_real.startswith(real.rstrip("/") + "/"):
            raise UsageError(
                f"{what} {given} holds the source {os.fspath(src)}: the output would land among the files it reads; give a directory outside {real}"
            )
        if real.startswith(src_real.rstrip("/") + "/") and os.path.isdir(src_real):
            raise UsageError(f"{what} {given} lies inside the source {os.fspath(src)}: the output would be read back as input; give a directory outside it")
    if os.path.lexists(path) and not os.path.isdir(path):
        raise UsageError(f"{what} {given} exists and is not a directory")
    return path


def figure_out(out, dpi: int = 100, *, inputs=()) -> str:
    """The file a figure will be saved to (``.png`` added when *out* names no format, as matplotlib does), checked.

    Args:
        out: the path given.
        dpi: the resolution asked for.
        inputs: the paths the same command reads.

    Returns:
        The absolute path the figure is written to, and that every message names.

    Raises:
        UsageError: *out* breaks the rule (see :func:`check_out`), names a format matplotlib cannot write, or *dpi* is out of range.
    """
    if not (isinstance(dpi, int) and not isinstance(dpi, bool) and 1 <= dpi <= MAX_DPI):
        raise UsageError(f"--dpi must be a whole number from 1 to {MAX_DPI}, not {dpi}")
    path = check_out(out, what="the figure file", hint="--out FILE.png", inputs=inputs)
    ext = os.path.splitext(path)[1][1:].lower()
    if not ext:
        path, ext = check_out(path + ".png", what="the figure file", hint="--out FILE.png", inputs=inputs), "png"
    if ext not in FIGURE_FORMATS:
        raise UsageError(f"--out {out}: matplotlib cannot write '.{ext}' figures (use .png, .svg or .pdf)")
    return path


def write_file(path: str, write) -> None:
    """Write *path* through a temporary file in its folder renamed over it, so no reader sees half a file.

    A file replaced keeps its mode (a 0600 report stays private); a new one
    gets what the umask allows, as a file made by ``>`` would.  The rename
    replaces whatever is at *path* (a link planted since the check included)
    and never writes through it.

    Args:
        path: a path from :func:`check_out` or :func:`figure_out`.
        write: called with the open binary file.

    Raises:
        UsageError: the folder or the file cannot be written (read-only, full, ...).
    """
    try:
        st = os.lstat(path)
        mode = stat.S_IMODE(st.st_mode) if stat.S_ISREG(st.st_mode) else 0o666 & ~_umask()
    except OSError:
        mode = 0o666 & ~_umask()
    folder, name = os.path.split(path)
    with _stop_signals_raise(path):
        try:
            fd, tmp = tempfile.mkstemp(prefix=f".{name[:64]}.", suffix=".msnb-tmp", dir=folder)
        except OSError as exc:
            raise UsageError(f"--out {path}: cannot write in {folder}: {exc.strerror or exc}") from None
        try:
            with os.fdopen(fd, "wb") as f:
                write(f)
            os.chmod(tmp, mode)
            os.replace(tmp, path)
        except OSError as exc:
            _unlink(tmp)
            raise UsageError(f"--out {path}: cannot write it: {exc.strerror or exc}") from None
        except BaseException:  # Ctrl-C, and SIGTERM or SIGHUP raised as _Stopped: no temporary file is left
            _unlink(tmp)
            raise


_STOP_SIGNALS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name))


class _Stopped(BaseException):
    """SIGTERM or SIGHUP arrived during a save: raised so that the temporary file is removed first."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


def _raise_stopped(signum, frame):
    raise _Stopped(signum)


@contextlib.contextmanager
def _stop_signals_raise(path: str):
    """While *path* is saved, SIGTERM and SIGHUP raise (so the temporary file is removed), then are sent again.

    Their default action ends the process at once, which would leave the hidden temporary file behind.  Only the
    main thread may set handlers; elsewhere, and for a signal set to be ignored, nothing changes.  A caught signal
    is sent again once the process's own handlers are back, so the process ends (or its handler runs) as it would
    have; if it goes on, the save is said not to have happened.

    Raises:
        UsageError: a signal stopped the save and the process went on.
    """
    old: dict = {}
    if threading.current_thread() is threading.main_thread():
        for signum in _STOP_SIGNALS:
            try:
                if signal.getsignal(signum) is not signal.SIG_IGN:
                    old[signum] = signal.signal(signum, _raise_stopped)
            except (ValueError, OSError):  # no handler can be set here: nothing changes
                pass
    stopped = None
    try:
        yield
    except _Stopped as stop:
        stopped = stop.signum
    finally:
        for signum, handler in old.items():
            signal.signal(signum, handler if handler is not None else signal.SIG_DFL)
    if stopped is not None:
        os.kill(os.getpid(), stopped)  # the process's own disposition: by default it ends here
        raise UsageError(f"--out {path}: not written: {signal.Signals(stopped).name} arrived while it was saved")


def save_figure(figure, path: str, dpi: int = 100) -> None:
    """Save a matplotlib figure to *path* (from :func:`figure_out`) by :func:`write_file`, in the format its name says."""
    ext = os.path.splitext(path)[1][1:].lower() or "png"
    write_file(path, lambda f: figure.savefig(f, format=ext, dpi=dpi))


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def _umask() -> int:
    """The process's umask (read by setting it and putting it back at once)."""
    mask = os.umask(0o077)
    os.umask(mask)
    return mask
