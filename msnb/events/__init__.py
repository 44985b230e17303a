"""Reading what a MindSpore job leaves on disk, without importing MindSpore.

Layers, each small: :mod:`records` (framing and checksums) ->
:mod:`mindspore_proto` / :mod:`tensorboard_proto` (payload decoding, with
:mod:`fastscalars` for the common all-scalar events, both returning the typed
records of :mod:`decoded`) -> :mod:`reader` (files, runs, ranks, incremental
state) -> :mod:`tables`.  :mod:`logs` turns text logs into the same scalar
table; :mod:`runs` reads several paths keyed by their full path.  What is
skipped is reported as :class:`Problem` s (:mod:`problems`), never raised.
"""

from .problems import Problem, ProblemKind
from .reader import Follower, ReadResult, read
from .tables import NO_RANK, TABLE_KINDS, HistogramTable, ImageTable, LineageTable, MarkerTable, ScalarTable, TensorTable, TextTable

__all__ = [
    "read",
    "Follower",
    "ReadResult",
    "Problem",
    "ProblemKind",
    "TABLE_KINDS",
    "NO_RANK",
    "ScalarTable",
    "HistogramTable",
    "TensorTable",
    "ImageTable",
    "TextTable",
    "LineageTable",
    "MarkerTable",
]
