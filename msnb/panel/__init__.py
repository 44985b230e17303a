"""The team panel: every run under a base directory, one row each, judged by the same judge as ``msnb check``.

:func:`runs` reads and judges once (``msnb runs``); :func:`watch_runs` keeps
one display up to date while the jobs write (``%mfmon_runs --every``), reading
only the bytes each poll adds.
"""

from .board import RunsBoard, runs
from .table import RunsTable
from .watch import watch_runs

__all__ = ["runs", "watch_runs", "RunsBoard", "RunsTable"]
