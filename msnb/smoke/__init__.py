"""Smoke runs: a few minutes of proof that monitoring works, before a long training.

``run_smoke()`` trains a short, small-batch, monitored run in a child process
against a temporary summary directory, shows a live curve, then judges what
was written: loss falling, no NaN, summaries present and CRC-clean, expected
tags, stable step time, monitoring overhead, disk per day, config lint.
"""

from .device import choose_device
from .result import SmokeResult
from .runner import run_smoke
from .verdict import Check

__all__ = ["run_smoke", "SmokeResult", "Check", "choose_device"]
