"""msnb: MindSpore training, observable from Jupyter and VS Code notebooks.

``%load_ext msnb`` (or the "MindSpore Kernel", which loads it at start-up)
registers the ``%mfmon_*`` magics.  Importing msnb never imports MindSpore.
"""

from .version import __version__ as __version__  # written once, in msnb/version.py (bottom layer)


def read(path, *, verify=True, tags=None, workers=None, names=None, jobs=False):
    """Read MindSpore summaries, TensorBoard event files and training logs under *path*.

    See :func:`msnb.events.read` (*tags*: only these tags or meanings; *workers*: processes,
    None for the idle cores; *names*: each run's name from its discovered one; *jobs*: one run per job, as
    check, plot and report read, :mod:`msnb.events.identity`); imported lazily so ``import msnb`` stays cheap.
    """
    from .events import read as _read  # deferred: numpy and the readers (msnb.events)

    return _read(path, verify=verify, tags=tags, workers=workers, names=names, jobs=jobs)


def to_parquet(result, path, **options):
    """Write a ReadResult (``msnb.read``'s, a Follower poll's) as a Hive-partitioned Parquet dataset under *path*.

    Each call adds new files.  See :func:`msnb.bridges.parquet.to_parquet` for the layout and *options*
    (needs ``msnb[parquet]``); imported lazily so ``import msnb`` stays cheap.
    """
    from .bridges.parquet import to_parquet as _to_parquet  # deferred: numpy, the Parquet bridge (pyarrow, when it writes)

    return _to_parquet(result, path, **options)


def check(source, *, tag="loss", rules=None, verify=True):
    """Judge runs (a path, several paths or a ReadResult): checks and flags per run, as ``msnb check`` prints them.

    See :func:`msnb.analysis.check.check`; imported lazily so ``import msnb`` stays cheap.

    Args:
        source: a path, a list of paths, or a ``ReadResult``.
        tag: the loss tag or its meaning.
        rules: a :class:`msnb.analysis.Rules` (default: the judge's defaults).
        verify: check CRCs while reading.

    Returns:
        A ``CheckResult`` (``passed``, ``runs``, ``flags``, ``as_dict()``, ``format_text()``).
    """
    # deferred: numpy, the readers and the judge (msnb.analysis)
    from .analysis.check import check as _check
    from .analysis.rules import DEFAULT_RULES

    return _check(source, tag=tag, rules=rules or DEFAULT_RULES, verify=verify)


def runs(base, *, tag="loss", active_within=300.0, rules=None, verify=True):
    """The team panel: one row per run under *base* (status, ranks, last loss, trend, verdict, flags, size, age).

    See :func:`msnb.panel.runs`; imported lazily so ``import msnb`` stays cheap.

    Args:
        base: the directory holding the runs.
        tag: the loss tag or its meaning.
        active_within: seconds since a run's last write that still count as active.
        rules: a :class:`msnb.analysis.Rules` (default: the judge's defaults).
        verify: check CRCs while reading.

    Returns:
        A ``RunsTable`` (``passed``, ``rows``, ``as_dict()``, ``format_text()``, HTML in a notebook).
    """
    from .panel import runs as _runs  # deferred: numpy, the readers, the judge and the panel

    return _runs(base, tag=tag, active_within=active_within, rules=rules, verify=verify)


def board(*paths, every=None, tag="loss", verify=True):
    """TensorBoard's controls in the notebook with ipywidgets, no server (see :func:`msnb.dashboard.board`).

    Args:
        *paths: run directories, trees of runs, event files or logs.
        every: follow the runs, polling every *every* seconds, until the Stop button.
        tag: the loss tag the judge looks at, or its meaning.
        verify: check CRCs while reading.

    Returns:
        A ``Board`` (``.widget``, ``.controls``, ``.figure``), displayed as the widget.
    """
    from .dashboard import board as _board  # deferred: ipywidgets, numpy and the judge

    return _board(*paths, every=every, tag=tag, verify=verify)


def register_model(config_cls=None, model_cls=None, *, model_type=None, on_conflict="error"):
    """Guarded model registration (see :mod:`msnb.registry`): safe to run again in a re-run cell."""
    from .registry import register_model as _register_model  # deferred: importlib.metadata and PyYAML

    return _register_model(config_cls, model_cls, model_type=model_type, on_conflict=on_conflict)


def preflight(config, *, devices=None, launch=None, card_gb=None):
    """mindformers' own startup checks on a run YAML at full size for the launch's device count (see :func:`msnb.fullsize.preflight.run_preflight`)."""
    from .fullsize.preflight import run_preflight  # deferred: PyYAML and the config reader (mindformers runs in a child process)

    return run_preflight(config, devices=devices, launch=launch, card_gb=card_gb)


def load_ipython_extension(ipython):
    """Register msnb's magics with *ipython* (called by ``%load_ext msnb``), and keep widgets live during async cells.

    The second part: see :mod:`msnb.kernel_comms` (without it, a board's slider moved while a cell awaits is dead).
    """
    from .kernel_comms import answer_comms_during_async_cells  # deferred: inspect, only in a kernel
    from .magics import MsnbMagics  # deferred: IPython (a kernel loads the magics, a script never does)

    ipython.register_magics(MsnbMagics)
    answer_comms_during_async_cells(getattr(ipython, "kernel", None))


def unload_ipython_extension(ipython):
    """Nothing to undo: IPython keeps registered magics until the kernel ends."""


def health(source, *, tag_prefix=None, **kwargs):
    """Which rank, which tag, which step went bad first, and what followed (see :func:`msnb.analysis.health.health`)."""
    from .analysis.health import health as _health  # deferred: numpy, the readers and the judge

    return _health(source, tag_prefix=tag_prefix, **kwargs)


def report(source, *, out, config=None, title=None, tag="loss", verify=True):
    """Write one self-contained HTML report on the runs under *source* (see :func:`msnb.html_report.report`).

    Args:
        source: a path, a list of paths, or a ``ReadResult``.
        out: the HTML file to write.
        config: the run's YAML, resolved and linted in the report (optional).
        title: the page's title.
        tag: the loss tag the judge uses, or its meaning.
        verify: check CRCs while reading.

    Returns:
        A ``ReportResult`` (``path``, ``bytes``, ``runs``, ``passed``).
    """
    from .html_report import report as _report  # deferred: numpy, PyYAML, the judge and the figures' code

    return _report(source, out=out, config=config, title=title, tag=tag, verify=verify)


def compare(baseline, candidate, *, reruns=(), tag=None, steps=None, offset=0, rank="median", rules=None, verify=True):
    """Judge a candidate run against a baseline by MindSpore's migration accuracy standard (see :func:`msnb.analysis.compare.compare`).

    Args:
        baseline: a Megatron-LM log, a ``trainer_state.json``, a CSV/JSONL of step,tag,value, or anything msnb reads.
        candidate: the run to judge (a path msnb reads, or a ``ReadResult``).
        reruns: other runs of the baseline: their own spread relaxes the tolerance.
        tag: the loss tag (None: by meaning), or ``"BASELINE_TAG=CANDIDATE_TAG"``.
        steps: baseline steps to compare, ``"A:B"``.
        offset: added to the candidate's steps.
        rank: the candidate's ranks as their ``"median"`` per step, or one rank number.
        rules: a :class:`msnb.analysis.compare_rules.CompareRules` (default: the standard's limits).
        verify: check CRCs while reading.

    Returns:
        A ``CompareResult`` (``passed``, ``checks``, ``first_divergence``, ``as_dict()``, ``format_text()``, ``exit_code``).
    """
    # deferred: numpy, the readers and the judge
    from .analysis.compare import compare as _compare
    from .analysis.compare_rules import DEFAULT_COMPARE_RULES

    return _compare(baseline, candidate, reruns=reruns, tag=tag, steps=steps, offset=offset, rank=rank, rules=rules or DEFAULT_COMPARE_RULES, verify=verify)
