"""msnb's IPython magics: thin shells over the library.

Loading this module must stay cheap: the kernel imports it at start-up, so each
magic imports what it runs (numpy, the readers, the judge, PyYAML, matplotlib,
ipywidgets; MindSpore in the smoke's child only) inside itself, and says so.
"""

from __future__ import annotations

import argparse
import functools
import os
import shlex
import sys

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, line_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments
from IPython.utils.process import arg_split

from .compare_options import compare_kwargs, compare_magic_arguments
from .errors import MsnbError
from .options import CHECK_OPTIONS, HEALTH_OPTIONS, PLOT_OPTIONS, REPORT_OPTIONS, RUNS_OPTIONS, magic_arguments_from
from .outputs import figure_out
from .outputs import save_figure as write_figure
from .smoke.run.options import MEMORY_OPTIONS, PREFLIGHT_OPTIONS, SmokeOptions, smoke_magic_arguments


def user_errors(func):
    """A user's mistake (any :class:`~msnb.errors.MsnbError`) fails the cell with one line, as IPython's own magics do.

    ``UsageError`` is what IPython shows without a traceback; the cell is marked
    failed, so "Run All" stops and nbval notices.  Anything else is a bug and
    keeps its traceback.
    """

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except MsnbError as exc:
            raise UsageError(f"msnb: {exc}") from None

    return wrapper


def split_line(line: str) -> list[str]:
    """A magic's line split as a shell splits it: quotes group words and are removed (``--title "job 4711"`` is ``job 4711``).

    IPython's own ``parse_argstring`` splits with ``shlex`` in non-POSIX mode, which keeps the quotes in the
    values; on Windows (backslashes in paths) that mode is kept and one pair of surrounding quotes is taken off.
    """
    try:
        if os.name != "nt":
            return shlex.split(line)
        return [w[1:-1] if len(w) >= 2 and w[0] == w[-1] and w[0] in "\"'" else w for w in arg_split(line, posix=False)]
    except ValueError as exc:  # an unclosed quote
        raise UsageError(f"msnb: {exc}: {line}") from None


def parse_line(magic, line: str) -> argparse.Namespace:
    """The arguments of *magic* (a method decorated with ``magic_arguments``) from its *line*; a bad line is a ``UsageError``."""
    return magic.parser.parse_args(split_line(line))


@magics_class
class MsnbMagics(Magics):
    """The ``%mfmon_*`` magics."""

    @magic_arguments()
    @argument("--json", action="store_true", help="return the report as a JSON-ready dict instead of printing it")
    @argument("--probe", action="store_true", help="also start MindSpore in a child process to confirm the device")
    @argument("--kernel", nargs="?", const="mindspore", default=None, metavar="NAME", help="check kernel NAME (default: mindspore), started as an editor does")
    @line_magic
    @user_errors
    def mfmon_doctor(self, line):
        """Check this environment for MindSpore monitoring: versions, known-bad
        combinations with their fixes, usable devices and installed kernels.
        With ``--kernel [NAME]``, start that kernel the way an editor does and
        check it is ready (``msnb doctor --kernel``).

        Returns the report (a ``msnb.doctor.Report``, or with ``--kernel`` a
        ``msnb.kernel_check.KernelReadiness``), so ``r = %mfmon_doctor`` keeps
        it for later cells.
        """
        from . import doctor  # deferred: the doctor (importlib.metadata, subprocess, jupyter_core)

        args = parse_line(self.mfmon_doctor, line)
        if args.kernel is not None:
            from .kernel_check import check_kernel  # deferred: the kernel check (importlib.metadata, subprocess, jupyter_core)

            report = check_kernel(args.kernel)
        else:
            report = doctor.run(probe=args.probe)
        if args.json:
            return report.as_dict()
        print(report.format_text())
        return report

    @magic_arguments()
    @argument("file", help="a mindformers-style YAML file")
    @argument("--steps", type=int, default=None, help="how many steps the run will take")
    @line_magic
    @user_errors
    def mfmon_config(self, line):
        """Show a YAML config resolved (base_config inheritance and ${a.b}
        references applied) with the lint findings for its monitoring settings.

        Returns a ``msnb.config.ConfigReport``; a broken file shows the error
        (file and key) instead of a traceback.
        """
        # deferred: PyYAML and importlib.metadata
        from .config import check_config
        from .environment import installed_major

        args = parse_line(self.mfmon_config, line)
        return check_config(args.file, steps=args.steps, protobuf_major=installed_major("protobuf"))

    @magic_arguments_from(MEMORY_OPTIONS)
    @line_magic
    @user_errors
    def mfmon_memory(self, line):
        """Per-card memory of a mindformers config at full size under its parallel layout: a row per pipeline stage
        (weights, gradients, optimizer state, activations), the largest first, judged against ``--card-gb`` / ``--card``.

        Shows the verdict, what to change when a stage does not fit or mindformers refuses the launch, and the stages
        drawn, the table folded (``--out FILE.png`` writes the picture too; ``--against DIR`` adds each stage's measured
        peak); returns the ``CardMemory``, shown once (with ``--against`` a ``MemoryAgainst``; a dict with ``--json``).
        """
        from .fullsize.memory import estimate_card_memory  # deferred: PyYAML and the config reader

        args = parse_line(self.mfmon_memory, line)
        est = estimate_card_memory(args.config, devices=args.devices, card_gb=args.card_gb, card=args.card)
        if args.against:
            from .fullsize.against import against  # deferred: the readers

            est = against(est, args.against)
        if args.out:
            from .fullsize.figure import save_memory_figure  # deferred: matplotlib

            save_memory_figure(est, args.out)
        if args.json:
            return est.as_dict()
        if args.against:  # the estimate beside the measured peaks: its text, then its picture
            print(est.format_text())
            from .fullsize.figure import show_memory_figure  # deferred: matplotlib and IPython's display

            show_memory_figure(est)
            return est
        est.show()  # the verdict, what to change, the picture; the table folded
        return est

    @magic_arguments_from(PREFLIGHT_OPTIONS)
    @line_magic
    @user_errors
    def mfmon_preflight(self, line):
        """mindformers' own startup checks on a run YAML at full size (parallel layout against the device count,
        TransformerConfig, check_rules), in a child process: the kernel stays clean.

        Shows the verdict (the findings with what to change first, every check and the memory folded) and returns the
        ``msnb.fullsize.preflight.PreflightResult``, so ``r = %mfmon_preflight ...`` shows it and keeps it; as the
        cell's last line it adds nothing more.
        """
        from .fullsize.preflight import run_preflight  # deferred: PyYAML and the config reader

        args = parse_line(self.mfmon_preflight, line)
        result = run_preflight(
            args.file, devices=args.devices, launch=args.launch, devices_per_node=args.devices_per_node, card_gb=args.card_gb, card=args.card
        )
        result.show()
        return result

    @magic_arguments_from(PLOT_OPTIONS)
    @line_magic
    @user_errors
    def mfmon_plot(self, line):
        """Draw the scalar curves under the PATHs inline: raw faint, smoothed solid,
        NaN/Inf marked, ranks that left the others flagged (over 16 ranks: bands, flagged ranks as lines).

        Shows the figure with a short text under it (points read and drawn; NaN/Inf as step
        ranges and the flags, when there are any).  Returns a ``msnb.plot.PlotReport`` (runs, tags,
        points, flags and the figure), so ``report = %mfmon_plot ...`` keeps what was drawn; as the
        cell's last line it adds nothing more to what was shown.
        """
        # deferred: numpy, the readers and the judge
        from .events.runs import read_runs
        from .plot.scalars import plot_read

        args = parse_line(self.mfmon_plot, line)
        paths = args.paths
        result = read_runs(paths)
        for problem in result.problems:
            print(f"msnb: {problem.severity}: {problem}")
        report = plot_read(result, paths, tags=args.tags, smooth=args.smooth, x=args.x, ranks=args.ranks, log=args.log, bands=args.bands)
        report.show()
        for line in report.notes():  # a run listed but with no curve in a panel says so
            print(f"note: {line}")
        return report

    @magic_arguments_from(CHECK_OPTIONS)
    @line_magic
    @user_errors
    def mfmon_check(self, line):
        """Judge existing runs with the smoke verdict's rules: NaN/Inf per rank, loss
        trend and stall, unrecovered spikes, rank divergence, step time.

        Returns a ``msnb.analysis.check.CheckResult`` (shown as a table; ``.passed``,
        ``.flags``, ``.as_dict()``); nothing readable fails the cell.
        """
        from .analysis.check import check  # deferred: numpy, the readers and the judge

        args = parse_line(self.mfmon_check, line)
        return check(args.paths, tag=args.tag)

    @magic_arguments()
    @argument("path", help="the summary directory, TensorBoard directory or log of a running job")
    @argument("--every", type=float, default=2.0, help="seconds between polls")
    @argument("--for", dest="duration", type=float, default=600.0, help="seconds to follow before stopping")
    @argument("--tags", default=None, help="comma-separated tags to draw (default: the usual panels)")
    @line_magic
    @user_errors
    def mfmon_tail(self, line):
        """Follow a running job: read only what it adds, redraw one live view in place.

        Stops when the time is up or when the cell is interrupted, and returns
        everything read (a ``msnb.events.ReadResult``).
        """
        from .plot import tail  # deferred: numpy, the readers and the judge

        args = parse_line(self.mfmon_tail, line)
        tags = [t.strip() for t in args.tags.split(",")] if args.tags else None
        return tail(args.path, every=args.every, duration=args.duration, tags=tags)

    @magic_arguments_from(RUNS_OPTIONS)
    @line_magic
    @user_errors
    def mfmon_runs(self, line):
        """The team panel: one row per run under BASE with a status light, a sparkline of
        the smoothed loss, ranks present and missing, last step and loss, trend, the
        verdict of ``msnb check`` and its flags, size and age of the last write.

        With ``--every S``, one display is updated in place (reading only what the jobs
        added) until ``--for`` seconds pass or the cell is interrupted.  Returns the
        (last) ``msnb.panel.RunsTable``; nothing under BASE fails the cell.
        """
        from .panel import runs, watch_runs  # deferred: numpy, the readers and the judge

        args = parse_line(self.mfmon_runs, line)
        base = args.base
        options = {"tag": args.tag, "active_within": args.active_within}
        if args.every is None:
            return runs(base, **options)
        return watch_runs(base, every=args.every, duration=args.duration, **options)

    @magic_arguments()
    @argument("paths", nargs="+", help="run directories (rank_N folders), trees of runs, event files or logs")
    @argument("--every", type=float, default=None, help="follow the runs, polling every S seconds, until the Stop button (default: read once)")
    @line_magic
    @user_errors
    def mfmon_board(self, line):
        """TensorBoard's controls in the notebook, no server: a run list with colour and the
        judge's light, tags, smoothing, x axis, log scale, step range, ignore outliers,
        rank mean/lines/bands, a histograms tab and the flags (choose one to zoom to it).

        Returns a ``msnb.dashboard.Board`` (``.widget``, ``.controls``, ``.figure``); without a
        widget front end the figure is shown with a line on how to get the controls.
        """
        from .dashboard import board  # deferred: ipywidgets, numpy and the judge

        args = parse_line(self.mfmon_board, line)
        return board(*args.paths, every=args.every)

    @smoke_magic_arguments
    @line_cell_magic
    @user_errors
    def mfmon_smoke(self, line, cell=None):
        """Run a short monitored training in a child process, watch it live, then judge it.

        Line form: msnb's built-in network.  Cell form (``%%mfmon_smoke``): the
        cell's code runs in the child and defines ``net``, ``loss_fn``,
        ``optimizer`` and ``dataset`` (or a ``build()`` returning them).  The
        verdict (loss falling, no NaN, summaries written and CRC-clean, tags,
        step time, overhead, disk per day, config lint) and the plots are shown
        inline; ``result = %mfmon_smoke`` keeps the ``msnb.smoke.SmokeResult``.
        """
        from .smoke.run.runner import run_smoke, save_figure  # deferred: numpy, PyYAML and the judge

        args = parse_line(self.mfmon_smoke, line)
        options = SmokeOptions.from_namespace(args, **({"code": cell} if cell is not None else {}))
        result = run_smoke(options=options)
        if options.out:
            save_figure(result, options.out)
        result.show()
        return result

    @magic_arguments_from(HEALTH_OPTIONS)
    @line_magic
    @user_errors
    def mfmon_health(self, line):
        """Which rank, which parameter, which step went bad first, and which series followed.

        Returns a ``msnb.analysis.health.HealthReport`` (shown as a table;
        ``report.as_dict()`` is the JSON of ``msnb health --json``).
        """
        from .analysis.health import Settings, health  # deferred: numpy, the readers and the judge

        args = parse_line(self.mfmon_health, line)
        return health(args.path, tag_prefix=args.tag_prefix, settings=Settings(window=args.window, threshold=args.threshold, min_history=args.min_history))

    @magic_arguments_from(REPORT_OPTIONS)
    @line_magic
    @user_errors
    def mfmon_report(self, line):
        """Write one self-contained HTML report (verdict, curves, step time, histograms,
        config lint, lineage, problems, versions) and show it inline.

        Returns a ``msnb.html_report.ReportResult`` (``path``, ``bytes``, ``runs``,
        ``passed``), shown as the page in a sandboxed frame.
        """
        from .html_report import report  # deferred: numpy, PyYAML, the judge and the figures' code

        args = parse_line(self.mfmon_report, line)
        config = args.config if args.config else None
        return report(args.paths, out=args.out, config=config, title=args.title, tag=args.tag)

    @compare_magic_arguments
    @line_magic
    @user_errors
    def mfmon_compare(self, line):
        """Judge a candidate run against a baseline by MindSpore's migration accuracy standard:
        lr schedule, first loss, mean error (whole run and last steps), global norm, NaN/Inf,
        steps covered, and the step where it left the baseline; the figure is shown inline.

        Returns a ``msnb.analysis.compare_result.CompareResult`` (shown as a table; ``.passed``,
        ``.first_divergence``, ``.as_dict()``); nothing comparable fails the cell.
        """
        # deferred: numpy, the readers and the judge
        from .analysis.compare import compare
        from .plot.compare import plot_compare
        from .plot.render import show_figure

        args = parse_line(self.mfmon_compare, line)
        kwargs = compare_kwargs(args)
        out = figure_out(args.out, inputs=[kwargs["baseline"], kwargs["candidate"], *kwargs["reruns"]]) if args.out else None
        result = compare(**kwargs)
        try:
            figure = plot_compare(result)
            show_figure(figure)
            if out:
                write_figure(figure, out)
        except MsnbError:  # a file that cannot be written: the user's to fix, one line
            raise
        except Exception as exc:  # noqa: BLE001 - matplotlib on extreme values: the verdict (the cell's result) stands
            print(f"msnb compare: warning: the figure could not be drawn ({type(exc).__name__}: {' '.join(str(exc).split())[:200]})", file=sys.stderr)
        return result


def magic_names() -> list[str]:
    """The line and cell magics msnb registers, as ``%name`` / ``%%name``."""
    names = [f"%{n}" for n in MsnbMagics.magics.get("line", {})]
    names += [f"%%{n}" for n in MsnbMagics.magics.get("cell", {})]
    return sorted(names)
