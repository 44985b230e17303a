"""The options of every command that has a magic twin, declared once so ``msnb X --help`` and ``%mfmon_X?`` cannot drift apart.

Each command's options are a tuple of :class:`Option`; :func:`add_arguments`
declares them on the CLI's subparser and :func:`magic_arguments_from` on the
magic, each taking the options meant for it (``where``).  Help texts and
defaults are written here only.  ``msnb compare`` and ``msnb smoke`` keep
their own lists (:mod:`msnb.compare_options`, :mod:`msnb.smoke.run.options`).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

DEFAULT_TAG = "loss"  # the loss by meaning: loss/auto, lm-loss...


@dataclass(frozen=True)
class Option:
    """One option of both parsers; ``where`` is "both", "cli" or "magic"."""

    flags: tuple
    help: str = ""
    type: object = None
    default: object = None
    action: object = None
    metavar: str | None = None
    dest: str | None = None
    where: str = "both"
    required: bool = False
    choices: tuple | None = None
    nargs: object = None
    const: object = None

    @property
    def key(self) -> str:
        """The attribute the parsed value lands in: ``dest``, else argparse's rule (the first long flag, ``-`` as ``_``)."""
        if self.dest:
            return self.dest
        name = next((f for f in self.flags if f.startswith("--")), self.flags[0])
        return name.lstrip("-").replace("-", "_")

    def kwargs(self) -> dict:
        """The keyword arguments of ``add_argument`` (argparse's and IPython's alike)."""
        kw = {"help": self.help} if self.help else {}
        if self.action:
            kw["action"] = self.action
        if self.action != "store_true":
            kw["default"] = self.default
        if self.required:
            kw["required"] = True
        for name in ("type", "metavar", "dest", "choices", "nargs", "const"):
            if getattr(self, name) is not None:
                kw[name] = getattr(self, name)
        return kw


def add_arguments(parser: argparse.ArgumentParser, options) -> argparse.ArgumentParser:
    """Declare the CLI's share of *options* on *parser* (a subparser); returns it."""
    for opt in options:
        if opt.where in ("both", "cli"):
            parser.add_argument(*opt.flags, **opt.kwargs())
    return parser


def magic_arguments_from(options):
    """A decorator giving a magic IPython ``magic_arguments`` built from the magic's share of *options*."""

    def decorate(func):
        from IPython.core.magic_arguments import argument, magic_arguments  # IPython only when a magic is defined, never for the CLI

        for opt in reversed(options):  # decorators apply bottom-up; this keeps the list's order in the help
            if opt.where in ("both", "magic"):
                func = argument(*opt.flags, **opt.kwargs())(func)
        return magic_arguments()(func)

    return decorate


TAG = Option(("--tag",), f"the loss tag to judge, or its meaning (default: {DEFAULT_TAG}, which finds loss/auto, lm-loss...)", default=DEFAULT_TAG)
NO_VERIFY = Option(("--no-verify",), "skip CRC checks (faster; damage may go unnoticed)", action="store_true", where="cli")
RUN_PATHS = Option(("paths",), "a run directory (rank_N folders), a file, a log, or a directory of runs", nargs="+", metavar="PATH")

# the number is msnb.analysis.bands.BANDS_ABOVE (a test checks), spelled out so the parser needs no numpy
BANDS_HELP = "draw each run's ranks as bands (min-max, 10-90 %%, median) with the flagged ranks as lines; default: on for runs of more than 16 ranks"

PLOT_OPTIONS: tuple[Option, ...] = (
    Option(("paths",), "summary directories, TensorBoard directories, event files or logs", nargs="+", metavar="PATH"),
    Option(("--out",), "FILE.png or FILE.svg", required=True, where="cli"),
    Option(("--tags",), "comma-separated tags or panel names (loss, lr, grad_norm, step_time, throughput)"),
    Option(("--smooth",), "TensorBoard-style smoothing weight in [0, 1)", type=float, default=0.6),
    Option(("--x",), "x axis", default="step", choices=("step", "wall", "relative")),
    Option(("--ranks",), "one line per rank instead of the mean over ranks", action="store_true"),
    Option(("--bands",), BANDS_HELP, action=argparse.BooleanOptionalAction, default=None),
    Option(("--log",), "logarithmic y axis", action="store_true"),
    Option(("--dpi",), "dots per inch of a PNG", type=int, default=100, where="cli"),
    Option(("--json",), "print the report as JSON (runs, tags, points, flags)", action="store_true", where="cli"),
    NO_VERIFY,
)

CHECK_OPTIONS: tuple[Option, ...] = (
    RUN_PATHS,
    Option(("--json",), 'print {"passed", "runs": [...], "flags": [...]} as one JSON document', action="store_true", where="cli"),
    TAG,
    NO_VERIFY,
)

RUNS_OPTIONS: tuple[Option, ...] = (
    Option(("base",), "the directory holding the runs (run directories of event files or rank_N folders, nested folders allowed)", metavar="BASE"),
    Option(
        ("--json",),
        'print {"runs": [{"run", "status", "ranks", "missing_ranks", "last_step", "last_loss", "passed", "flags", "bytes", "last_write"}]}',
        action="store_true",
        where="cli",
    ),
    Option(("--every",), "keep the table up to date, polling every S seconds (default: show it once)", type=float, where="magic"),
    Option(("--for",), "with --every: seconds to watch before stopping", type=float, default=600.0, dest="duration", where="magic"),
    Option(("--active-within",), "a run written to within this many seconds is active (default 300)", type=float, default=300.0, metavar="SECONDS"),
    TAG,
    NO_VERIFY,
)

HEALTH_OPTIONS: tuple[Option, ...] = (
    Option(("path",), "a run directory (TensorBoard rank_N folders, logs), a tree of runs or a file"),
    Option(
        ("--json",),
        'print {"first": {"run", "step", "rank", "tag", "value", "reason"}, "cascade": [...], "ranks": [...], "tags_scanned": N}',
        action="store_true",
        where="cli",
    ),
    Option(("--tag-prefix",), "only tags starting with PREFIX, e.g. local_norm (repeatable)", action="append", metavar="PREFIX"),
    Option(("--window",), "trailing points each point is compared with (default 64)", type=int, default=64),
    Option(("--threshold",), "robust z-score that counts as a departure (default 10)", type=float, default=10.0),
    Option(
        ("--min-history",),
        "points a series needs before a departure counts (default: a third of its points, 6 to 32, with the bar raised "
        "as much for short series; given: this many, at the --threshold given)",
        type=int,
        default=None,
        metavar="N",
    ),
    NO_VERIFY,
)

REPORT_OPTIONS: tuple[Option, ...] = (
    RUN_PATHS,
    Option(("--out",), "the HTML file to write (replaced if it exists)", required=True, metavar="FILE"),
    Option(("--config",), "the run's config: shown resolved, with its lint findings", metavar="YAML"),
    Option(("--title",), "the page's title (default: msnb report: PATH...)"),
    TAG,
    Option(
        ("--json",),
        'print {"out", "bytes", "runs", "passed", "verdicts", "flags"}: verdicts and flags as msnb check --json gives them',
        action="store_true",
        where="cli",
    ),
    NO_VERIFY,
    Option(("--baseline",), "add a precision-alignment section: each PATH judged against this baseline run (see msnb compare)", metavar="PATH", where="cli"),
)


KIND_NAMES = ("scalars", "histograms", "tensors", "images", "texts", "lineage", "markers")
"""The data kinds' names (``msnb.events.tables.TABLE_KINDS`` gives each its table, in this order), known here so
that the CLI offers ``--kind`` without loading the readers and numpy at every start."""

KIND_SPELLINGS = {"scalar": "scalars", "histogram": "histograms", "tensor": "tensors", "image": "images", "text": "texts", "marker": "markers"}
"""Other spellings accepted wherever a kind is named (``msnb export --kind text``)."""

KIND_CHOICES = KIND_NAMES + tuple(KIND_SPELLINGS)
"""Every spelling ``--kind`` accepts (``text`` as well as ``texts``, ``histogram`` as well as ``histograms``)."""
