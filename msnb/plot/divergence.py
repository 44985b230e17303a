"""Rank divergence lives in the judge (:mod:`msnb.analysis.divergence`); re-exported for old imports."""

from ..analysis.divergence import rank_divergence
from ..analysis.rules import RankFlag

__all__ = ["rank_divergence", "RankFlag"]
