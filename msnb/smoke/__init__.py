"""Smoke runs: a few minutes of proof that monitoring works, before a long training.

``run_smoke()`` trains a short, small-batch, monitored run in a child process
against a temporary summary directory, shows a live curve, then judges what
was written: loss falling, no NaN, summaries present and CRC-clean, expected
tags, stable step time, monitoring overhead, disk per day, config lint.

Its subpackages, one job each, lowest first (the ``smoke-jobs`` contract in
pyproject.toml checks that none imports one above it):

- :mod:`msnb.smoke.shared`: what both kinds of smoke share: the checks and
  their verdict, the judge's common checks, the workers' step callbacks;
- :mod:`msnb.smoke.builtin`: the built-in smoke: msnb's own small model, its
  worker and its judge;
- :mod:`msnb.smoke.mindformers`: the mindformers rehearsal: the plan (every
  change made to the user's run YAML), its worker, the CPU rehearsal, the
  tested releases and its judge;
- :mod:`msnb.smoke.run`: the runner that drives either: options, preparing,
  launching (under the guard), watching, finishing, the result.

The names below are imported on first use, so that the magics can read the
smoke option list (:mod:`msnb.smoke.run.options`) without importing the runner.
"""

from __future__ import annotations

from importlib import import_module

_EXPORTS = {
    "run_smoke": ".run.runner",
    "SmokeOptions": ".run.options",
    "SmokeResult": ".run.result",
    "Check": ".shared.verdict",
    "choose_device": ".run.device",
}

__all__ = list(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        value = getattr(import_module(_EXPORTS[name], __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
