"""Where a smoke run's files go when they are kept, and what each writer left there, in words.

``--keep`` keeps the scratch directory (a private temporary one); ``--keep DIR``
makes DIR the run's directory from the start, so the files are where the user
asked, with the same layout.  Either way the kept directory is one that
``msnb check``, ``msnb plot`` and ``msnb report`` read whole: every writer's
files sit under it.  :func:`kept_outputs` lists each writer's folder so the
verdict can say where the losses are (mindformers writes them to
``output/log/rank_0/info.log`` and its TensorBoard folder, not the summary).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from ...errors import SmokeError, UsageError
from ...outputs import check_out_dir

PREFIX = "msnb-smoke-"
# (relative glob, what wrote it): the folders a smoke's writers fill, in the order the verdict lists them
_WRITERS = (
    ("output/log", "mindformers' log: MFLossMonitor's loss, lr and global_norm lines"),
    ("output/tensorboard", "TensorBoard event files, one folder a rank"),
    ("output/summary", "SummaryMonitor's summaries, one folder a rank"),
    ("output/checkpoint", "CheckpointMonitor's checkpoints"),
    ("logs", "msrun's worker logs"),
    ("train.log", None),  # said per kind of run below
)
_TRAIN_LOG = {
    True: "the training process's output: mindformers' log lines again, as printed",
    False: "the training process's output: LossMonitor's and TimeMonitor's lines",
}


def keep_dir(keep) -> Path | None:
    """The folder named by ``--keep DIR`` (absolute), or None for ``--keep`` alone or no ``--keep``."""
    if keep is None or isinstance(keep, bool):
        return None
    return Path(os.path.abspath(Path(keep).expanduser()))


def check_place(option: str, folder) -> None:
    """Refuse a folder a run would write into under ``/dev``, ``/proc``, ``/sys`` or on a kernel filesystem, creating nothing.

    The one output rule (:func:`msnb.outputs.check_out_dir`), asked before any folder is made or anything starts.

    Raises:
        SmokeError: naming *option* and the folder.
    """
    path = Path(folder).expanduser()
    if os.path.lexists(path) and not os.path.isdir(path):
        return  # a file: its caller says so in its own words
    try:
        check_out_dir(path, what=option)
    except UsageError as exc:
        raise SmokeError(str(exc)) from None


def check_keep(keep) -> None:
    """Refuse a ``--keep DIR`` no run could write into, before anything starts.

    Raises:
        SmokeError: DIR is on a kernel filesystem, is a file, or a folder that already holds files (they would be
            judged as this run's).
    """
    target = keep_dir(keep)
    if target is None:
        return
    if target.exists() and not target.is_dir():
        # `msnb smoke --keep run.yaml` reads the config as the folder: say how to write what was meant
        raise SmokeError(f"--keep {keep}: is a file, not a directory (--keep takes an optional DIR: put the config before --keep)")
    check_place("--keep", target)
    if target.is_dir():
        try:
            first = next(iter(os.scandir(target)), None)
        except OSError as exc:
            raise SmokeError(f"--keep {keep}: cannot be listed ({exc.strerror or exc})") from None
        if first is not None:
            raise SmokeError(f"--keep {keep}: already holds {first.name}; give a new or empty directory (its files would be judged as this run's)")


def scratch_directory(keep) -> Path:
    """The run's directory: a fresh private temporary one, or the ``--keep DIR`` the user named (made, or empty).

    Raises:
        SmokeError: DIR cannot be made.
    """
    target = keep_dir(keep)
    if target is None:
        return Path(tempfile.mkdtemp(prefix=PREFIX))  # private: 0700
    check_keep(keep)
    try:
        target.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError as exc:
        raise SmokeError(f"--keep {keep}: cannot create it ({exc.strerror or exc})") from None
    return target


def _has_files(path: Path) -> bool:
    if path.is_file():
        return True
    try:
        return path.is_dir() and any(p.is_file() for p in path.rglob("*"))
    except OSError:
        return False


def kept_outputs(workdir: str | os.PathLike, summary_dir: str | os.PathLike | None) -> list[tuple[str, str]]:
    """Each writer's folder in a kept run directory that holds files, as (path, what wrote it).

    Args:
        workdir: the run's directory.
        summary_dir: where the summaries went (inside *workdir*, or a ``--summary-dir`` elsewhere).

    Returns:
        Paths relative to *workdir* where they lie inside it, else absolute; nothing for a directory that is gone.
    """
    root = Path(workdir)
    if not root.is_dir():
        return []
    found = []
    mindformers = (root / "run.yaml").is_file()  # the config a mindformers smoke's child loads
    if summary_dir is not None and _has_files(Path(summary_dir)):
        summary = Path(summary_dir)
        shown = str(summary.relative_to(root)) if summary.is_relative_to(root) else str(summary)
        found.append((shown, f"{'SummaryMonitor' if mindformers else 'SummaryCollector'}'s summaries"))
    for relative, what in _WRITERS:
        path = root / relative
        if not _has_files(path):
            continue
        if relative == "output/log":  # name the file that holds the losses
            infos = sorted(path.glob("rank_*/info.log"))
            relative = str(infos[0].relative_to(root)) if len(infos) == 1 else relative
        found.append((relative, what or _TRAIN_LOG[mindformers]))
    return found


__all__ = ["check_keep", "check_place", "keep_dir", "kept_outputs", "scratch_directory"]
