"""The board's controls: an ipywidgets shell over :mod:`.model` (the data) and :mod:`.render` (the figure).

Figures are PNG images in an ``Image`` widget, so JupyterLab, Notebook 7 and
VS Code show the same thing and no server or port is involved.  A control
change redraws from the data in memory: inside a running event loop (the
kernel, while widgets talk to the front end) the redraw waits
:data:`DEBOUNCE_S` and the last of a burst of changes wins; outside one (a
script, a test, a terminal) it happens before the assignment returns.

Following (``every=S``) polls the readers on the kernel's event loop, so the
cell returns at once and the controls stay live, and the Stop button is
heard; with no running loop a daemon thread polls instead.
"""

from __future__ import annotations

import asyncio
import base64
import html
import io
import threading
import weakref

import ipywidgets as widgets
import traitlets

from ..analysis.rules import FAIL, PASS, WARN
from ..errors import NothingReadable, UsageError
from ..kernel_comms import answer_comms_during_async_cells
from ..plot.histograms import plot_histograms
from ..plot.render import current_cell, in_notebook, plain_text
from ..status import COLORS
from ..words import count
from .model import BoardData, light
from .render import RANK_MODES, View, render

DEBOUNCE_S = 0.15
STOP_WAIT_S = 1.0  # Stop waits at most this long for the step in progress; the thread ends after it and never polls again
LIGHTS = {PASS: (COLORS[PASS], "passed"), WARN: (COLORS[WARN], "passed with warnings"), FAIL: (COLORS[FAIL], "failed")}
HOW_TO = "interactive controls need a notebook front end with ipywidgets (JupyterLab, Notebook 7, VS Code); shown here: the figure as drawn"
DPI = 90


def png(figure, dpi: int = DPI) -> bytes:
    """The figure as PNG, compressed lightly: a redraw is paid at every control change, the bytes only once over the wire.

    The board's figures make their texts plain (no TeX) where they are written (:func:`msnb.dashboard.render.render`);
    the histogram figure comes from :func:`msnb.plot.histograms.plot_histograms` and is made plain by the caller.
    """
    # deferred: matplotlib, until the first draw
    import matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    if figure.canvas is None or type(figure.canvas).__name__ == "FigureCanvasBase":
        FigureCanvasAgg(figure)
    buf = io.BytesIO()
    # segments that bend the line by less than a pixel are merged (matplotlib's default keeps a ninth of one): the
    # figure looks the same, spikes stay (they bend it by far more), and drawing a long noisy line costs a third less
    with matplotlib.rc_context({"path.simplify": True, "path.simplify_threshold": 1.0}):
        figure.savefig(buf, format="png", dpi=dpi, pil_kwargs={"compress_level": 1})
    return buf.getvalue()


MAX_EVERY = 86400.0  # a day between polls at most (a timer past that is no follow, and the thread's wait overflows)


def check_every(every) -> float:
    """*every* as seconds, or a UsageError naming ``--every`` when it is not a number in (0, a day]."""
    try:
        value = float(every)
    except (TypeError, ValueError):
        raise UsageError(f"--every must be a number of seconds, not {every!r}") from None
    if not 0 < value <= MAX_EVERY:  # NaN fails too
        raise UsageError(f"--every must be a positive number of seconds up to {MAX_EVERY:g}, not {every}")
    return value


_FOLLOWING: weakref.WeakSet = weakref.WeakSet()  # boards following now, so a new board on the same paths ends the old one's follow


def _running_loop():
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


class RunList(widgets.VBox):
    """Checkbox, colour swatch and the judge's light per run; ``value`` is the tuple of checked run keys."""

    value = traitlets.Tuple()

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self._boxes: dict = {}
        self._badges: dict = {}
        self._syncing = False

    def update(self, data: BoardData) -> None:
        """Add rows for new runs (checked) and refresh every run's light."""
        rows = list(self.children)
        added = []
        for key in data.order:
            if key not in data.runs:
                continue
            badge = _badge(data, key)
            if key in self._boxes:
                self._badges[key].value = badge
                self._boxes[key].description = data.label(key)
                continue
            box = widgets.Checkbox(value=True, description=data.label(key), indent=False, layout=widgets.Layout(width="auto"))
            box.observe(self._ticked, names="value")
            self._boxes[key] = box
            self._badges[key] = widgets.HTML(badge, layout=widgets.Layout(width="40px"))
            rows.append(widgets.HBox([self._badges[key], box]))
            added.append(key)
        self.children = tuple(rows)
        if added:
            self.value = tuple(k for k in self._boxes if self._boxes[k].value)

    def _ticked(self, _change) -> None:
        if not self._syncing:
            self.value = tuple(k for k, b in self._boxes.items() if b.value)

    @traitlets.validate("value")
    def _known(self, proposal):
        value = tuple(proposal["value"])
        unknown = [k for k in value if k not in self._boxes]
        if unknown:
            raise traitlets.TraitError(f"no run {unknown[0]!r} on this board; runs: {', '.join(self._boxes)}")
        return value

    @traitlets.observe("value")
    def _mirror(self, change) -> None:
        self._syncing = True
        try:
            for key, box in self._boxes.items():
                box.value = key in change["new"]
        finally:
            self._syncing = False

    def checkbox(self, key: str):
        """The checkbox of run *key* (for tests and power users: ``.value = False`` unticks it)."""
        return self._boxes[key]


FLAG_ROW_CHARS = 110  # a flag's row in the list at most (about the list's width at 1,400 px); the whole reason shows below it


def _whole_reason(data, flag) -> str:
    """A chosen flag said whole, wrapped to the cell's width: its run, rank, step and tag, then its reason uncut."""
    where = f"rank {flag.rank}" if flag.rank >= 0 else "run"
    said = f"{data.label(flag.run)} | {where} | step {flag.step} | {flag.tag}"
    return f"<div style='white-space:normal;overflow-wrap:anywhere;line-height:1.4'><b>chosen flag</b>: {html.escape(said)}: {html.escape(flag.reason)}</div>"


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


def _badge(data: BoardData, key: str) -> str:
    """The judge's light (its checks and the files it judged in the tooltip) and the run's colour swatch, as HTML."""
    verdict = data.runs[key].verdict
    color, word = LIGHTS[light(verdict)]
    checks = "" if verdict is None else "; ".join(f"{c.name}: {c.status}" for c in verdict.checks)
    source = f"; judged from {verdict.judged_from}" if verdict is not None and verdict.judged_from else ""
    tip = html.escape(word + (": " + checks if checks else "") + source, quote=True)
    return (
        f'<span title="{tip}" style="display:inline-block;width:10px;height:10px;border-radius:50%;background:{color};margin-right:4px"></span>'
        f'<span style="display:inline-block;width:18px;height:4px;background:{data.color(key)};vertical-align:middle;margin-right:2px"></span>'
    )


class Board:
    """TensorBoard's controls over msnb's readers and judge, in one ipywidgets display.

    Attributes:
        data: the :class:`~msnb.dashboard.model.BoardData` (runs in memory, verdicts).
        widget: the ipywidgets container to display.
        controls: ``runs``, ``tags``, ``smoothing``, ``x``, ``log``, ``ranks``, ``steps``, ``outliers``,
            ``flags``, ``histogram``, ``histogram_run``, ``histogram_mode``, ``stop``: the widgets; setting
            one's ``.value`` redraws (at once outside an event loop, debounced inside one).
        figure: the scalar figure as last drawn (a matplotlib Figure).
        histogram_figure: the histogram figure as last drawn, or None.
        following: True while new data is being followed.
        renders: how many times the scalar figure was drawn.
    """

    def __init__(self, data: BoardData, *, every: float | None = None):
        w = widgets
        self.data = data
        self.every = every
        self._shown_in = None  # the cell that displayed the board (a following board shows itself)
        self.following = False
        self.error = None  # what ended a follow, when something went wrong while polling
        self.renders = 0
        self.figure = None
        self.histogram_figure = None
        self._focus = None
        self._pending: dict = {}  # drawing method's name -> its debounced call
        self._timer = None
        self._thread = None
        self._stop = threading.Event()
        self._lock = threading.RLock()
        self._quiet = 0

        steps = data.step_range() or (0, 1)
        many = any(len(r.ranks) > 16 for r in data.runs.values())
        narrow = {"button_width": "auto"}  # each button as wide as its word: 78 px cut "heatmap" to "heatm..."
        c = {
            "runs": RunList(),
            "tags": w.SelectMultiple(options=data.tag_names(), value=tuple(data.default_tags()), rows=4, description="tags"),
            "smoothing": w.FloatSlider(value=0.6, min=0.0, max=0.99, step=0.01, description="smoothing", continuous_update=True),
            "x": w.ToggleButtons(options=[("step", "step"), ("relative", "relative"), ("wall", "wall")], value="step", description="x axis", style=narrow),
            "log": w.Checkbox(value=False, description="log scale y", indent=False),
            "outliers": w.Checkbox(value=False, description="ignore outliers", indent=False),
            "ranks": w.ToggleButtons(options=list(RANK_MODES), value="bands" if many else "mean", description="ranks", style=narrow),
            "steps": w.IntRangeSlider(value=steps, min=steps[0], max=max(steps[1], steps[0] + 1), description="steps", continuous_update=False),
            "flags": w.Select(options=[], rows=8, layout=w.Layout(width="100%", margin="0")),  # no margin: 100% and 2 px each side scrolled
            "histogram": w.Dropdown(options=data.histogram_tags(), description="histogram"),
            "histogram_run": w.Dropdown(options=[], description="run"),
            "histogram_mode": w.ToggleButtons(options=["ridge", "heatmap"], value="ridge", description="draw as", style=narrow),
            "stop": w.Button(description="Stop", button_style="warning", icon="stop", layout=w.Layout(display="" if every else "none")),
        }
        self.controls = c
        c["runs"].update(data)
        self._histogram_runs()
        # the figure shrinks to the cell, no scroll bar (ipywidgets' 2 px margins beside a width of 100% made one)
        fit = {"width": "100%", "height": "auto", "object_fit": "contain", "min_width": "0", "margin": "0"}
        self.image = w.Image(format="png", layout=w.Layout(max_width="1100px", **fit))
        self.histogram_image = w.Image(format="png", layout=w.Layout(max_width="900px", **fit))
        self.status = w.HTML()
        self.flags_note = w.HTML()
        self.flag_detail = w.HTML()  # the chosen flag's whole reason, wrapped (its row in the list is cut to fit)
        self.focus_note = w.HTML(layout=w.Layout(width="100%", margin="0"))  # the same above the figure (no margin: 100% and 2 px each side scrolled)
        show_all = w.Button(description="show all steps", layout=w.Layout(width="auto"))
        show_all.on_click(lambda _b: self.show_all())
        self._flag_options()

        # the controls in a row above the figure, which then gets the cell's whole width (beside them it was too small to read)
        runs = w.VBox([w.HTML("<b>runs</b>"), c["runs"]], layout=w.Layout(min_width="200px", max_height="220px", overflow="auto", margin="0 12px 0 0"))
        view = w.VBox([c["tags"], c["ranks"], c["x"]], layout=w.Layout(margin="0 12px 0 0"))
        shape = w.VBox([c["smoothing"], w.HBox([c["log"], c["outliers"]]), c["steps"]])
        scalars = w.VBox([w.HBox([runs, view, shape], layout=w.Layout(flex_flow="row wrap")), self.focus_note, self.image])
        histograms = w.VBox([w.HBox([c["histogram"], c["histogram_run"]]), c["histogram_mode"], self.histogram_image])
        flags = w.VBox([self.flags_note, c["flags"], self.flag_detail, show_all])
        self.tabs = w.Tab(children=[scalars, histograms, flags], titles=("Scalars", "Histograms", "Flags"))
        self.widget = w.VBox([w.HBox([self.status, c["stop"]]), self.tabs])

        for name in ("runs", "tags", "smoothing", "x", "log", "outliers", "ranks", "steps"):
            c[name].observe(self._changed, names="value")
        for name in ("histogram", "histogram_run", "histogram_mode"):
            c[name].observe(self._histogram_changed, names="value")
        c["flags"].observe(self._flag_chosen, names="value")
        self.tabs.observe(self._tab_changed, names="selected_index")
        c["stop"].on_click(lambda _b: self.stop())
        self.redraw()
        self._status()
        if every:
            self.follow(every)

    # ------------------------------------------------------------------ state
    def view(self) -> View:
        """What the controls say now."""
        c = self.controls
        lo, hi = c["steps"].value
        full = self.data.step_range()
        steps = None if full is None or (lo <= full[0] and hi >= full[1]) else (lo, hi)
        return View(
            runs=tuple(c["runs"].value),
            tags=tuple(c["tags"].value),
            smoothing=float(c["smoothing"].value),
            x=c["x"].value,
            log=bool(c["log"].value),
            ranks=c["ranks"].value,
            steps=steps,
            ignore_outliers=bool(c["outliers"].value),
            focus=self._focus,
        )

    # ---------------------------------------------------------------- drawing
    def redraw(self) -> None:
        """Draw the scalar figure from the data in memory now (and the histograms when their tab is open)."""
        with self._lock:
            self._cancel("redraw")
            self.figure = render(self.data, self.view())  # a new figure each time: one held elsewhere (or being read) never changes under it
            self.image.value = png(self.figure)
            self.renders += 1
            if self.tabs.selected_index == 1:
                self.redraw_histograms()

    def redraw_histograms(self) -> None:
        """Draw the chosen histogram tag of the chosen run (ridge lines or a heatmap over steps), cut to the step range."""
        from matplotlib.figure import Figure  # deferred: matplotlib, until the first draw

        with self._lock:
            self._cancel("redraw_histograms")
            c = self.controls
            tag, key = c["histogram"].value, c["histogram_run"].value
            fig = Figure(figsize=(8, 4.2), layout="constrained")
            run = self.data.runs.get(key) if key else None
            table = run.histograms if run is not None else None
            if table is not None and len(table):
                view = self.view()
                mask = table.tag == tag
                if view.steps is not None:
                    mask &= (table.step >= view.steps[0]) & (table.step <= view.steps[1])
                table = table.take(mask)
            if table is None or not len(table):
                ax = fig.subplots()
                ax.set_axis_off()
                ax.text(
                    0.5, 0.5, "no histograms in the checked runs" if not tag else f"no {tag} histograms in this run and step range", ha="center", va="center"
                )
            else:
                plot_histograms(table, tag, mode=c["histogram_mode"].value, figure=fig)
                fig.suptitle(self.data.label(key), fontsize="small")
            plain_text(fig)  # tag and run names from files, drawn as written
            self.histogram_figure = fig
            self.histogram_image.value = png(fig)

    def _cancel(self, name: str) -> None:
        """Drop a debounced call of *name*: the drawing is being done now."""
        handle = self._pending.pop(name, None)
        if handle is not None:
            handle.cancel()

    def _changed(self, _change=None) -> None:
        if self._quiet:
            return
        self._schedule(self.redraw)

    def _histogram_changed(self, _change=None) -> None:
        if self._quiet:
            return
        self._schedule(self.redraw_histograms)

    def _tab_changed(self, change) -> None:
        if change["new"] == 1:
            self._schedule(self.redraw_histograms)

    def _schedule(self, draw) -> None:
        """Draw now outside an event loop; inside one, once the changes stop coming for :data:`DEBOUNCE_S`."""
        loop = _running_loop()
        if loop is None:
            draw()
            return
        earlier = self._pending.pop(draw.__name__, None)
        if earlier is not None:
            earlier.cancel()
        self._pending[draw.__name__] = loop.call_later(DEBOUNCE_S, draw)

    # ------------------------------------------------------------------ flags
    def _flag_options(self) -> None:
        flags = self.data.flags()
        self._flags = flags
        options = []
        for i, f in enumerate(flags):
            where = f"rank {f.rank}" if f.rank >= 0 else "run"
            options.append((_cut(f"{self.data.label(f.run)} | {where} | step {f.step} | {f.tag} | {f.reason}", FLAG_ROW_CHARS), i))
        with self._hold():
            self.controls["flags"].options = options
            self.controls["flags"].value = None
        n = len(flags)
        self.flags_note.value = (
            f"<b>{n} flag{'s' if n != 1 else ''}</b> (run | rank | step | tag | reason): choose one to zoom to its step and rank"
            if n
            else "<b>no flags</b>: the judge found nothing wrong at any step of any rank"
        )

    def _flag_chosen(self, change) -> None:
        chosen = change["new"]
        self.flag_detail.value = "" if chosen is None else _whole_reason(self.data, self._flags[chosen])
        self.focus_note.value = self.flag_detail.value
        if self._quiet or chosen is None:
            return
        self.zoom(self._flags[chosen])

    def zoom(self, flag, *, around: int | None = None) -> None:
        """Show the scalar view around a flag: its run checked, its tag shown, its step in the middle, its rank drawn out.

        Args:
            flag: a :class:`~msnb.analysis.rules.RankFlag` of this board.
            around: steps shown either side (default: a tenth of the run's steps, at least 10).
        """
        c = self.controls
        run = self.data.runs[flag.run]
        lo, hi = run.step_range or (flag.step, flag.step)
        half = around if around is not None else max(10, (hi - lo) // 10)
        self._focus = (flag.run, flag.rank, flag.step)
        with self._hold():
            if flag.run not in c["runs"].value:
                c["runs"].value = tuple(c["runs"].value) + (flag.run,)
            name = next((n for n in self.data.tag_names() if run.real_tag(n) == flag.tag), flag.tag)
            if name not in c["tags"].value and name in c["tags"].options:
                c["tags"].value = (name,) + tuple(c["tags"].value)
            c["steps"].value = (max(c["steps"].min, flag.step - half), min(c["steps"].max, flag.step + half))
            self.tabs.selected_index = 0
        self.redraw()

    def show_all(self) -> None:
        """Back from a flag's zoom: every step, no rank drawn out."""
        c = self.controls
        self._focus = None
        with self._hold():
            c["steps"].value = (c["steps"].min, c["steps"].max)
            c["flags"].value = None
        self.redraw()

    class _Hold:
        def __init__(self, board):
            self.board = board

        def __enter__(self):
            self.board._quiet += 1

        def __exit__(self, *exc):
            self.board._quiet -= 1

    def _hold(self):
        """Change several controls as one: no redraw per change."""
        return Board._Hold(self)

    # -------------------------------------------------------------- following
    def poll(self) -> list[str]:
        """Read what the writers added; when a run is new or changed, update the controls and redraw.

        Returns:
            The keys of the runs that changed.
        """
        with self._lock:
            changed = self.data.poll(bounded=True)  # one step reads a bounded slice of each file
            if changed:
                self._data_changed()
            self._status()
            return changed

    def _data_changed(self) -> None:
        c = self.controls
        full = self.data.step_range()
        with self._hold():
            c["runs"].update(self.data)
            names = self.data.tag_names()
            if list(c["tags"].options) != names:
                chosen = tuple(c["tags"].value) or tuple(self.data.default_tags())
                c["tags"].options = names
                c["tags"].value = tuple(n for n in chosen if n in names) or tuple(self.data.default_tags())
            if full is not None:
                lo, hi = c["steps"].value
                at_end = hi >= c["steps"].max
                at_start = lo <= c["steps"].min
                c["steps"].max = max(full[1], full[0] + 1, c["steps"].max)
                c["steps"].min = min(full[0], c["steps"].min)
                c["steps"].value = (c["steps"].min if at_start else lo, c["steps"].max if at_end else hi)  # a full range follows the run
            tags = self.data.histogram_tags()
            if list(c["histogram"].options) != tags:
                c["histogram"].options = tags
            if tags and c["histogram"].value not in tags:
                c["histogram"].value = tags[0]
            self._histogram_runs()
            self._flag_options()
        self.redraw()

    def _histogram_runs(self) -> None:
        c = self.controls
        keys = [k for k in self.data.order if k in self.data.runs and len(self.data.runs[k].histograms)]
        options = [(self.data.label(k), k) for k in keys]
        if list(c["histogram_run"].options) != options:
            c["histogram_run"].options = options
        if keys and c["histogram_run"].value not in keys:
            c["histogram_run"].value = keys[0]

    def follow(self, every: float) -> None:
        """Poll every *every* seconds until :meth:`stop` (or the Stop button): on the kernel's loop, else in a thread."""
        self.every = check_every(every)
        for other in list(_FOLLOWING):  # a cell run again: its earlier board would poll the same files for ever, unseen
            if other is not self and other.following and other.data.paths == self.data.paths:
                other.stop()
        _FOLLOWING.add(self)
        self._stop.clear()
        self.following = True
        self.controls["stop"].layout.display = ""
        self.controls["stop"].disabled = False
        loop = _running_loop()
        if loop is not None:
            self._timer = loop.call_later(self.every, self._tick, loop)
        else:
            self._thread = threading.Thread(target=self._follow_thread, name="msnb-board-follow", daemon=True)
            self._thread.start()
        self._status()

    def _tick(self, loop) -> None:
        if self._stop.is_set():
            return
        self._guarded_poll()
        if not self._stop.is_set():
            self._timer = loop.call_later(self.every, self._tick, loop)

    def _follow_thread(self) -> None:
        while not self._stop.wait(self.every):
            self._guarded_poll()

    def _guarded_poll(self) -> None:
        """One poll of the follow; an error ends the follow, says so on the board, and is raised (its traceback logged)."""
        try:
            self.poll()
        except Exception as exc:
            self._stop.set()
            self.following = False
            self.error = exc
            self.controls["stop"].disabled = True
            self._status()
            raise

    def stop(self) -> None:
        """End the follow (what the Stop button does); reads what is left once more, with partial records reported."""
        self._stop.set()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        thread, self._thread = self._thread, None
        busy = False
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=STOP_WAIT_S)
            busy = thread.is_alive()  # in a step still: it ends after it (its read is bounded), and never polls again
        if self.following:
            self.following = False
            # the last read, partial records reported: only when it is short (a file still growing past the follow's
            # bounded step would be read and judged whole again, which took 23 s at 60 MB/s)
            if not busy and not self.data.behind() and self._lock.acquire(timeout=STOP_WAIT_S):
                try:
                    if self.data.poll(final=True, bounded=True):
                        self._data_changed()
                finally:
                    self._lock.release()
        self.controls["stop"].disabled = True
        self._status()

    # ---------------------------------------------------------------- display
    def _status(self) -> None:
        d = self.data
        runs = [k for k in d.order if k in d.runs]
        failed = sum(light(d.runs[k].verdict) == FAIL for k in runs)
        text = f"<b>msnb board</b>: {count(len(runs), 'run')}, {d.points():,} points, {failed} failed, {count(len(d.flags()), 'flag')}"
        if self.error is not None:
            text += f"; <b>follow stopped by an error</b>: {html.escape(f'{type(self.error).__name__}: {self.error}')}"
        elif self.following:
            text += f"; following every {self.every:g} s (poll {d.polls})"
        elif self.every:
            text += f"; follow stopped after {count(d.polls, 'poll')}"
        if d.problems:
            text += f"; {count(len([p for p in d.problems if getattr(p, 'severity', '') != 'info']), 'problem')} while reading"
        self.status.value = text

    def summary(self) -> str:
        """One line on what the board shows (the text a front end without widgets prints)."""
        d = self.data
        runs = [k for k in d.order if k in d.runs]
        view = self.view()
        lights = ", ".join(f"{d.label(k)} {light(d.runs[k].verdict)}" for k in runs)
        return f"msnb board: {count(len(runs), 'run')} ({lights}); tags {', '.join(view.tags) or 'none'}; {count(len(d.flags()), 'flag')}"

    def _ipython_display_(self) -> None:
        # a following board shows itself where it is made: shown there, the cell's value adds no second board
        if getattr(self, "_shown_in", None) is not None and self._shown_in == current_cell():
            return
        from IPython.display import display  # deferred: IPython, only to display

        display(self._repr_mimebundle_(), raw=True)
        self._shown_in = current_cell()

    def _repr_mimebundle_(self, include=None, exclude=None):
        """The widget where the front end draws widgets; elsewhere the figure as drawn and a line on how to get the controls."""
        bundle = self.widget._repr_mimebundle_() or {}
        bundle["image/png"] = base64.b64encode(self.image.value).decode("ascii")
        bundle["text/plain"] = f"{self.summary()}\n({HOW_TO})"
        return bundle

    def __repr__(self) -> str:
        return f"<Board: {self.summary()}>"


def _keep_widgets_live() -> None:
    """In a kernel without msnb's extension loaded (``import msnb; msnb.board(...)`` on a plain Python kernel), the same
    repair the extension makes: a slider moved while a cell awaits would otherwise stay dead (see :mod:`msnb.kernel_comms`)."""
    try:
        from IPython import get_ipython  # deferred: IPython, only to find the kernel
    except ImportError:
        return
    answer_comms_during_async_cells(getattr(get_ipython(), "kernel", None))


def board(*paths, every: float | None = None, tag: str = "loss", verify: bool = True) -> Board:
    """TensorBoard's controls in the notebook, without a server: runs, tags, smoothing, x axis, log scale, steps, histograms, flags.

    Args:
        *paths: run directories, trees of runs, event files or logs (each must exist).
        every: follow the runs, polling every *every* seconds (new runs join the list) until the Stop button.
        tag: the loss tag the judge looks at, or its meaning.
        verify: check record checksums while reading.

    Returns:
        A :class:`Board` (displayed as the widget; ``.controls``, ``.figure``, ``.widget``).  Following (*every*), in a
        notebook it displays itself at once: assigned to a name, or in a cell that goes on, it is still seen.

    Raises:
        UsageError: no path, a missing path, or *every* not positive.
        NothingReadable: nothing readable under the paths (and not following, which may wait for runs).
    """
    if every is not None:
        every = check_every(every)
    _keep_widgets_live()
    data = BoardData(paths, verify=verify, tag=tag)
    data.poll(final=every is None)
    if not data.runs and every is None:
        notes = f" ({data.problems[0]})" if data.problems else ""
        raise NothingReadable(f"nothing to draw under {', '.join(data.paths)}: no scalars or histograms{notes}")
    made = Board(data, every=every)
    if every is not None and in_notebook():
        # a board that follows is there to be watched, while the cell that made it goes on (writing, awaiting): shown
        # now, not as the cell's value (``live = msnb.board(..., every=2)`` never showed the figure nor the Stop button)
        made._ipython_display_()
    return made
