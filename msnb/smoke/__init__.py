"""Smoke runs: a few minutes of proof that monitoring works, before a long training.

``run_smoke()`` trains a short, small-batch, monitored run in a child process
against a temporary summary directory, shows a live curve, then judges what
was written: loss falling, no NaN, summaries present and CRC-clean, expected
tags, stable step time, monitoring overhead, disk per day, config lint.

The names below are imported on first use, so that the magics can read the
smoke option list (:mod:`msnb.smoke.options`) without importing the runner.
"""

from __future__ import annotations

from importlib import import_module

_EXPORTS = {
    "run_smoke": ".runner",
    "SmokeOptions": ".options",
    "SmokeResult": ".result",
    "Check": ".verdict",
    "choose_device": ".device",
}

__all__ = list(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        value = getattr(import_module(_EXPORTS[name], __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
