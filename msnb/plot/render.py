"""Turning a matplotlib Figure into bytes, without pyplot or an inline backend, and showing it.

msnb builds ``matplotlib.figure.Figure`` objects directly (no global pyplot
state), which IPython cannot show until a backend registers a formatter; so
msnb renders them itself and displays the PNG.  Whether there is a notebook
to show it in (:func:`in_notebook`), and which cell shows it (:func:`current_cell`),
are asked here too, for every result that displays itself.
"""

from __future__ import annotations

import base64
import io

MAX_TEXT_CHARS = 200  # a text drawn longer is cut: a tag name of 400 KB took 25 s and 380 MB to draw, glyph by glyph


def plain_text(figure) -> None:
    """Draw every text of *figure* as written: tag and run names come from files, and one holding ``$...$`` is no TeX to parse.

    (A name such as ``$\\x{$`` would otherwise make matplotlib raise while drawing.)  A text longer than
    :data:`MAX_TEXT_CHARS` is cut there, with an ellipsis: no one reads more in a figure, and its cost is per glyph.
    Lone surrogates (what Python makes of a folder name that is not UTF-8) are drawn as ``?``.
    """
    from matplotlib.text import Text  # deferred: matplotlib, until a figure is drawn

    for text in figure.findobj(Text):
        text.set_parse_math(False)
        s = text.get_text()
        if len(s) > MAX_TEXT_CHARS:
            s = s[: MAX_TEXT_CHARS - 1] + "\u2026"
        text.set_text(s.encode("utf-8", "replace").decode("utf-8"))  # a non-UTF-8 folder name's surrogates: '?' (FreeType refuses them)


def figure_png(figure, dpi: int = 100) -> bytes:
    """The figure as PNG bytes (an Agg canvas is attached when it has none; texts drawn as written, see :func:`plain_text`)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # deferred: matplotlib, until a figure is drawn

    if figure.canvas is None or type(figure.canvas).__name__ == "FigureCanvasBase":
        FigureCanvasAgg(figure)  # attach an Agg canvas to a Figure built without pyplot
    plain_text(figure)
    buf = io.BytesIO()
    figure.savefig(buf, format="png", dpi=dpi)
    return buf.getvalue()


def describe_figure(figure) -> str:
    """A plain-text stand-in for a figure: its title and its panels' titles."""
    title = figure._suptitle.get_text() if getattr(figure, "_suptitle", None) is not None else ""
    panels = [ax.get_title() for ax in figure.axes if ax.get_visible() and ax.get_title()]
    text = f"figure: {title}" if title else "figure"
    return text + (f" ({', '.join(panels)})" if panels else "")


def current_cell():
    """The execution count of the cell running now (None outside IPython): which cell already shows a result."""
    try:
        from IPython import get_ipython  # deferred: IPython, until something is displayed
    except ImportError:
        return None
    ip = get_ipython()
    return None if ip is None else ip.execution_count


def in_notebook() -> bool:
    """True inside a Jupyter kernel (a front end can show rich output)."""
    try:
        from IPython import get_ipython  # deferred: IPython, until something is displayed
    except ImportError:
        return False
    ip = get_ipython()
    return ip is not None and getattr(ip, "kernel", None) is not None


def show_figure(figure, dpi: int = 100, text: str | None = None) -> None:
    """Display *figure* as a PNG in the notebook (works in any kernel, VS Code included).

    Args:
        figure: a matplotlib Figure.
        dpi: resolution of the PNG.
        text: what plain-text front ends show instead (default: the figure's titles).
    """
    from IPython.display import display  # deferred: IPython, only in a notebook

    png = base64.b64encode(figure_png(figure, dpi=dpi)).decode("ascii")  # what the notebook format stores
    display({"image/png": png, "text/plain": text or describe_figure(figure)}, raw=True)
