"""The child's config: the plan's, with every output redirected into the smoke's scratch folder."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from .changes import ISOLATE, SHRINK, Edits, unshared

if TYPE_CHECKING:  # for the annotations only: the plan does not import this module, and neither imports the other at run time
    from .plan import ModelPlan


def child_config(plan: ModelPlan, workdir: Path, summary: Path) -> tuple[dict, list]:
    """The plan's config with every output inside the smoke's directory, and the isolate changes that put them there.

    Args:
        plan: what :func:`~msnb.smoke.mindformers.plan.plan_mindformers` returned.
        workdir: the scratch directory (the child's working directory: mindformers writes ``./output/log`` there).
        summary: where SummaryMonitor writes with one worker (the scratch ``summary`` folder or the user's
            ``--summary-dir``); with several, each rank writes ``output/summary/rank_N`` (see :func:`summary_root`).

    Returns:
        ``(config, changes)``: a new config dict (``output_dir``, TensorBoard, SummaryMonitor, CheckpointMonitor, the
        dump path and the strategy file redirected), and the isolate changes made, to be applied by the child after
        the plan's own.
    """
    ed = Edits(unshared(plan.config))
    cfg = ed.data
    out = workdir / "output"
    here = "isolated: written into the smoke's scratch folder"
    ed.set(ISOLATE, ("output_dir",), str(out), here)
    if isinstance(cfg.get("tensorboard"), dict):
        ed.set(ISOLATE, ("tensorboard", "tensorboard_dir"), str(out / "tensorboard"), here)
    for i, cb in enumerate(cfg.get("callbacks") or []):
        if not isinstance(cb, dict):
            continue
        if cb.get("type") == "SummaryMonitor":
            # one worker: the smoke's summary folder; several: mindformers' own output_dir/summary/rank_N (one folder a rank)
            ed.set(ISOLATE, ("callbacks", i, "summary_dir"), str(summary) if plan.workers == 1 else None, here)
        elif cb.get("type") == "CheckpointMonitor":
            if "directory" in cb:
                ed.delete(ISOLATE, ("callbacks", i, "directory"), here + " (under output_dir/checkpoint)")
            every = cb.get("save_checkpoint_steps")
            small = max(1, min(every if isinstance(every, int) and not isinstance(every, bool) else 1, 10))
            if every != small and (isinstance(every, int) and not isinstance(every, bool)):
                ed.set(SHRINK, ("callbacks", i, "save_checkpoint_steps"), small, "a checkpoint within the smoke's steps")
        elif cb.get("type") == "ProfileMonitor":
            ed.set(ISOLATE, ("callbacks", i, "output_path"), str(out / "profile"), here)
    monitor = cfg.get("monitor_config")
    if isinstance(monitor, dict) and monitor.get("dump_path"):
        ed.set(ISOLATE, ("monitor_config", "dump_path"), str(out / "dump"), here)
    par = cfg.get("parallel")
    if isinstance(par, dict) and isinstance(par.get("strategy_ckpt_config"), dict):
        ed.set(ISOLATE, ("parallel", "strategy_ckpt_config", "save_file"), str(out / "strategy" / "ckpt_strategy.ckpt"), here)
    if isinstance(cfg.get("checkpoint"), dict) and "save_path" in cfg["checkpoint"]:
        ed.set(ISOLATE, ("checkpoint", "save_path"), str(out / "checkpoint"), here)
    return cfg, ed.changes


def summary_root(plan: ModelPlan, workdir: Path, summary: Path) -> Path:
    """Where the run's SummaryMonitor files are: the smoke's summary folder, or ``output/summary`` with several workers."""
    return summary if plan.workers == 1 else workdir / "output" / "summary"
