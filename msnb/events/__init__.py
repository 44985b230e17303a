"""Reading what a MindSpore job leaves on disk, without importing MindSpore.

Layers, each small: :mod:`records` (framing and checksums) ->
:mod:`mindspore_proto` / :mod:`tensorboard_proto` (payload decoding, with
:mod:`fastscalars` for the common all-scalar events) -> :mod:`reader`
(files, runs, ranks, incremental state) -> :mod:`tables`.  :mod:`logs` turns
text logs into the same scalar table.
"""

from .reader import Follower, ReadResult, read
from .records import Problem
from .tables import NO_RANK, HistogramTable, ImageTable, LineageTable, MarkerTable, ScalarTable, TensorTable, TextTable

__all__ = [
    "read",
    "Follower",
    "ReadResult",
    "Problem",
    "NO_RANK",
    "ScalarTable",
    "HistogramTable",
    "TensorTable",
    "ImageTable",
    "TextTable",
    "LineageTable",
    "MarkerTable",
]
