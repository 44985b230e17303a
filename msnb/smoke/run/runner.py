"""The smoke runner: a short, monitored training in a child process, watched live, then judged.

``run_smoke()`` is what ``%mfmon_smoke`` and ``msnb smoke`` call.  It goes in
four steps, each its own function:

- :func:`prepare` (:mod:`msnb.smoke.run.preparing`) checks the options, the device, the config and the paths
  before anything is created, so a mistake is one line (a ``SmokeError``) and
  leaves nothing behind;
- :func:`launch` (:mod:`msnb.smoke.run.launching`) makes the private scratch directory and starts the guard
  (:mod:`msnb.smoke.run.guard`), which starts the worker or msrun;
- :func:`watch` (:mod:`msnb.smoke.run.watching`) follows the scratch directory with msnb's incremental reader
  and draws the live view; Ctrl-C, SIGTERM, SIGHUP or ``timeout`` stop the
  child and all its workers;
- :func:`judge` (:mod:`msnb.smoke.run.finishing`) reads the files from disk, judges them and draws the figures
  (a figure that cannot be drawn is a warning, never a lost verdict).

A crash, a hang or a NaN stays in the child.  Every process of a run carries
``MSNB_SMOKE_ID`` in its environment, so none escapes the final sweep, and the
guard ends the training even when this process is killed with SIGKILL.
"""

from __future__ import annotations

from ...errors import SmokeError
from ...plot.live import LiveView
from ...words import count
from .finishing import MindformersRun, check_sink, judge, save_figure
from .launching import launch
from .options import SmokeOptions
from .preparing import find_msrun, prepare, smoke_inputs
from .result import SmokeResult
from .watching import StopSignals, kill_run, mindformers_label, watch


def run_smoke(config=None, *, view=None, poll_interval: float = 0.25, options: SmokeOptions | None = None, **fields) -> SmokeResult:
    """Train a few small-batch steps under monitoring and judge what was written.

    Args:
        config: a YAML whose ``monitor_config`` to test (its collection settings
            are used; the summary goes to the smoke directory), or None.
        view: a live view to draw into; by default one is made when ``live``.
        poll_interval: seconds between reads of the run's files.
        options: a :class:`~msnb.smoke.run.options.SmokeOptions`; or give its fields
            as keywords: ``steps``, ``batch_size``, ``lr``, ``collect_freq``,
            ``device``, ``workers`` (> 1 starts data-parallel CPU workers with
            msrun), ``summary_dir``, ``keep``, ``live``, ``code`` (source
            defining ``net``, ``loss_fn``, ``optimizer``, ``dataset`` or a
            ``build()``), ``module`` (a file, relative to the current
            directory, or a module doing the same), ``mode`` ("pynative" or
            "graph"), ``timeout`` (seconds), ``sink_size``.

    Returns:
        The :class:`~msnb.smoke.run.result.SmokeResult`.  The scratch directory is
        removed after a pass (unless ``keep``) and after a stop signal; it is
        kept after a failure.

    Raises:
        SmokeError: options that no run could honour (before anything starts).
        ConfigError: a config that cannot be loaded (before anything starts).
    """
    if options is None:
        options = SmokeOptions(config=config, **fields)
    elif config is not None or fields:
        raise SmokeError("give either options=SmokeOptions(...) or keyword options, not both")
    prepared = prepare(options)
    if options.live and view is None:
        view = LiveView(title=f"msnb smoke on {prepared.device}", total=prepared.options.steps, tags=["loss"], min_interval=0.3, status=None)
    if view is not None:
        if view.total is None:  # the steps left to the default (200, or 40 for mindformers): the percentage and the ETA need them
            view.total = prepared.options.steps
        if prepared.plan is not None:
            view.label_for_run = mindformers_label
        view.update(status=f"starting MindSpore on {prepared.device}...", force=True)
    with StopSignals() as signals:
        launched = launch(prepared)
        try:
            watched = watch(launched, view, poll_interval=poll_interval, signals=signals)
            result = judge(launched, watched)
            result.inputs = smoke_inputs(options)
        except BaseException:
            if launched.proc.poll() is None:
                kill_run(launched.proc, launched.marker)
            raise
    if view is not None:
        # the verdict below shows the curves and says PASSED/FAILED: the live view ends on one line, without either
        view.close(None, status=f"training ended after {count(result.steps_trained, 'step')}; the verdict follows")
    return result


__all__ = ["SmokeOptions", "prepare", "launch", "watch", "judge", "run_smoke", "save_figure", "find_msrun", "check_sink", "MindformersRun"]
