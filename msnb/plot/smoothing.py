"""Smoothing lives in the analysis layer (:mod:`msnb.analysis.smoothing`); re-exported for old imports."""

from ..analysis.smoothing import ema

__all__ = ["ema"]
