"""What a smoke run of a mindformers run YAML trains: the config's own model, shrunk, its outputs in the scratch directory.

A mindformers run YAML describes a model for a cluster: 64 layers x 5120
hidden, 4096 tokens, model and pipeline parallel over 16 cards.  The smoke
trains *that architecture class* through mindformers' own ``Trainer`` with the
config's own callbacks, at a size that steps in milliseconds, so that the
monitoring chain (MFLossMonitor, TrainingStateMonitor, SummaryMonitor,
CheckpointMonitor, TensorBoard) is proven in a minute instead of discovered
broken after hours in a queue.

This module is plain Python over the YAML *as mindformers reads it* (base
configs merged, ``${}`` left literal). Every change it makes is one of three
kinds, recorded as a :class:`Change` with its reason, and nothing else is ever
changed:

- ``shrink``: sizes, batch, steps, parallel degrees to 1, the learning rate a
  small model learns at;
- ``rehearse``: what the CPU (or GPU) cannot run as Ascend does, replaced by an
  equivalent (float32, the unfused norm, the MoE layers dense);
- ``isolate``: every output and input outside the run redirected into the
  scratch folder (or cleared: no production checkpoint is loaded).

A change that would make a crashing config run (a missing key added, a
conflicting switch flipped) is not one of them: such a config fails, and
:mod:`msnb.config.mindformers_rules` names why. The child
(:mod:`msnb.smoke.mindformers.worker`) loads the user's own file with
mindformers' ``MindFormerConfig`` and applies exactly these changes, as
overrides, on that object. This module imports neither MindSpore nor
mindformers.

The plan's parts, one job each: :mod:`~msnb.smoke.mindformers.changes` (the
changes and the editor that records them), :mod:`~msnb.smoke.mindformers.family`
(which model), :mod:`~msnb.smoke.mindformers.sizes` (sizes, from the YAML and
``pretrained_model_dir``'s config.json, and shrinking), :mod:`~msnb.smoke.mindformers.data`
(the dataset), :mod:`~msnb.smoke.mindformers.device` (what this device needs) and
:mod:`~msnb.smoke.mindformers.child` (the child's config, outputs isolated).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

from ...config.run_config import is_mindformers_run, uses_legacy
from ...fullsize.datasets import dataset_paths, is_mindrecord
from .changes import DELETE, ISOLATE, KINDS, REHEARSE, SHRINK, Change, Edits, change_lines, describe_changes, unshared
from .data import data_note, dataset_columns, fit_dataset, mirror_dataset_task, use_config_data
from .device import CPU_WRAPPER, moe_dense, monitoring_on_device, on_this_device, parallel_off
from .family import MC, MCORE_MODEL_TYPES, check_trainable, model_family, registered_model_type
from .sizes import SMALL, plan_sizes, set_learning_rate, should_shrink

# The mindformers release msnb's CPU rehearsal and shrinking were written against (the pin msnb installs).
PINNED_MINDFORMERS = "1.9"


# callbacks that write what a smoke reads, and the name each is known by in the verdict
KNOWN_CALLBACKS = ("MFLossMonitor", "SummaryMonitor", "CheckpointMonitor", "TrainingStateMonitor")


def installed_mindformers() -> str | None:
    """The installed mindformers' version, from its metadata (mindformers is not imported: it writes ``./output``)."""
    try:
        return metadata.version("mindformers")
    except metadata.PackageNotFoundError:
        return None


@dataclass
class ModelPlan:
    """What the smoke's child trains, and every change made to the user's config, in words for the verdict."""

    family: str  # "Qwen3", "LlamaForCausalLM", ...
    legacy: bool
    source: str  # the YAML's file name
    shrunk: bool
    before: dict  # dimension -> the config's value
    after: dict  # dimension -> the value trained
    config: dict  # the config as mindformers reads it, with the changes applied (paths are filled in by child_config)
    changes: list = field(default_factory=list)  # every Change, each one of the three kinds with its reason
    tensordump_off: list = field(default_factory=list)  # monitor_config keys turned off (no TensorDump kernel on CPU)
    callbacks: list = field(default_factory=list)  # the callbacks that will run, by type
    monitor_formats: dict = field(default_factory=dict)  # TrainingStateMonitor's *_format keys that are on, with their targets
    data: str = "synthetic"  # "synthetic" or "config"
    data_note: str = ""
    columns: list = field(default_factory=list)
    mindrecord: list = field(default_factory=list)  # the config's own MindRecord files or folders, when trained on
    tensorboard: bool = False
    lr: float | None = None  # the learning rate trained with, when the smoke set it
    workers: int = 1

    def describe(self) -> str:
        """One line: which model, from which file, at what size, through what."""
        kind = "legacy" if self.legacy else "mcore"
        size = ""
        if self.shrunk and self.before.get("layers") is not None:
            b_l, b_h = self.before.get("layers"), self.before.get("hidden")
            a_l, a_h = self.after.get("layers"), self.after.get("hidden")
            size = f", shrunk from {b_l} layers x {b_h} hidden to {a_l} x {a_h}"
        elif not self.shrunk:
            size = ", at its own size"
        return f"{self.family} ({kind}) from {self.source}{size}, through mindformers' Trainer"

    def change_lines(self) -> list[str]:
        """``shrink: ...``, ``rehearse: ...``, ``isolate: ...``: every change, by kind, for the verdict."""
        return change_lines(self.changes)


def plan_mindformers(
    loaded,
    *,
    device: str,
    shrink: str = "auto",
    steps: int,
    batch_size: int | None = None,
    lr: float | None = None,
    mode: str | None = None,
    data: str = "auto",
    sink_size: int | None = None,
    workers: int = 1,
) -> ModelPlan:
    """Turn a user's mindformers run YAML into the changes a smoke child applies on mindformers' own reading of it.

    Args:
        loaded: the :class:`~msnb.config.LoadedConfig` of the run YAML (its ``literal`` tree, ``${}`` unresolved, is what
            mindformers reads and what is planned on).
        device: "Ascend", "GPU" or "CPU": where it will train.
        shrink: "auto" (always on CPU and GPU, on Ascend when the model would not fit one card), "always" or "never".
        steps: how many steps to train.
        batch_size: the batch size (default: 2 when shrunk, else the config's).
        lr: the learning rate (default: 5e-3 when shrunk, so a small model learns within a smoke run; else the config's).
        mode: "graph" or "pynative" when asked for (default: the config's ``context.mode``, unchanged).
        data: "auto" (the config's dataset when its files exist here, else synthetic), "config" or "synthetic".
        sink_size: rehearse sink mode with this sink size (default: sink mode off).
        workers: data-parallel workers (more than 1: mindformers' own data parallelism, started by msrun).

    Returns:
        The plan: every change (shrink, rehearse, isolate) with its reason; outputs are isolated by :func:`~msnb.smoke.mindformers.child.child_config`.

    Raises:
        SmokeError: a config that no smoke run can train (not a training config, a missing dataset with
            ``data="config"``), naming the key and the file.
        NotRehearsed: a config msnb cannot rehearse on this device (an MoE model with no dense form on CPU).
    """
    source = Path(loaded.path).name
    ed = Edits(unshared(loaded.literal if loaded.literal is not None else loaded.data))
    cfg = ed.data
    check_trainable(loaded, cfg)
    legacy = uses_legacy(cfg)
    family = model_family(cfg)
    mc = ed.node(MC)
    do_shrink = should_shrink(cfg, shrink, device)
    train = ed.node(("train_dataset",)) or {}
    paths = dataset_paths(train)
    config_data = use_config_data(loaded, data, paths)
    before, after = plan_sizes(ed, loaded, mc, legacy=legacy, shrinking=do_shrink, keep_vocab=config_data)
    _run_length(ed, mc, train, steps=steps, batch_size=batch_size, shrunk=do_shrink, sink_size=sink_size)
    parallel_off(ed, workers, legacy, dataset_columns(cfg, legacy), device)
    _from_scratch(ed, cfg)
    on_this_device(ed, device, legacy, family, mode, loaded)
    if device == "CPU":
        moe_dense(ed, loaded)
    use_lr = lr if lr is not None else (5e-3 if do_shrink else None)
    if use_lr is not None:
        set_learning_rate(ed, use_lr, lr is not None, steps)
    # the overflow check: MFTrainOneStepCell's falls into the Ascend branch on CPU (the template's default wrapper is that class too)
    wrapper = ed.node(("runner_wrapper",))
    if device == "CPU" and (wrapper is None or wrapper.get("type", "MFTrainOneStepCell") == "MFTrainOneStepCell"):
        ed.set(REHEARSE, ("runner_wrapper", "type"), CPU_WRAPPER, "MFTrainOneStepCell with the IsFinite overflow check (NPUGetFloatStatusV2 is Ascend's)")
    tensordump_off, formats = monitoring_on_device(ed, device)
    columns = dataset_columns(cfg, legacy)
    note = data_note(data, config_data, paths, train, columns, before, after)
    fit_dataset(ed, train, after)
    mirror_dataset_task(ed, loaded)
    return ModelPlan(
        family=family,
        legacy=legacy,
        source=source,
        shrunk=do_shrink,
        before=before,
        after=after,
        config=cfg,
        changes=ed.changes,
        tensordump_off=tensordump_off,
        callbacks=_callbacks(cfg, ed),
        monitor_formats=formats,
        data="config" if config_data else "synthetic",
        mindrecord=[p for _, p in paths if config_data and is_mindrecord(train, p)],
        data_note=note,
        columns=columns,
        tensorboard=isinstance(cfg.get("tensorboard"), dict),
        lr=use_lr,
        workers=workers,
    )


def _run_length(ed: Edits, mc: dict, train: dict, *, steps: int, batch_size: int | None, shrunk: bool, sink_size: int | None) -> None:
    """The smoke's batch everywhere the config states one, one epoch, sink mode only when rehearsed, no accumulation."""
    runner = ed.node(("runner_config",)) or {}
    bs = batch_size or (SMALL["batch"] if shrunk else runner.get("batch_size") or SMALL["batch"])
    for path in (
        (("runner_config", "batch_size"),)
        + ((("train_dataset", "batch_size"),) if "batch_size" in train else ())
        + ((MC + ("batch_size",),) if "batch_size" in mc else ())
    ):
        ed.set(SHRINK, path, bs, "--batch-size" if batch_size else "the smoke's batch")
    ed.set(SHRINK, ("runner_config", "epochs"), 1, f"{steps} steps of one pass over the smoke's data")
    if sink_size:
        ed.set(SHRINK, ("runner_config", "sink_mode"), True, "--sink-size")
        ed.set(SHRINK, ("runner_config", "sink_size"), int(sink_size), "--sink-size")
    else:  # mindformers' template defaults to sink mode on when the YAML does not say
        ed.set(SHRINK, ("runner_config", "sink_mode"), False, "callbacks every step (--sink-size N rehearses sink mode)")
    if (runner.get("gradient_accumulation_steps") or 1) != 1:
        ed.set(SHRINK, ("runner_config", "gradient_accumulation_steps"), 1, "one step per batch")


def _from_scratch(ed: Edits, cfg: dict) -> None:
    """A smoke trains from scratch: no production checkpoint is loaded or resumed, no evaluation."""
    for key, value in (("load_checkpoint", ""), ("resume_training", False), ("auto_trans_ckpt", False), ("src_strategy_path_or_dir", ""), ("profile", False)):
        if cfg.get(key) not in (None, value, "", False):
            ed.set(ISOLATE, (key,), value, "a smoke trains from scratch and reads nothing outside its folder")
    if cfg.get("do_eval"):
        ed.set(SHRINK, ("do_eval",), False, "no evaluation in a smoke")


def _callbacks(cfg: dict, ed: Edits) -> list:
    """The callbacks that will run, by type (TrainingStateMonitor too when monitor_config turns it on)."""
    callbacks = [c.get("type") for c in cfg.get("callbacks") or [] if isinstance(c, dict) and c.get("type")]
    monitor = ed.node(("monitor_config",))
    if monitor is not None and monitor.get("monitor_on") and "TrainingStateMonitor" not in callbacks:
        callbacks.append("TrainingStateMonitor")
    return callbacks


__all__ = [
    "PINNED_MINDFORMERS", "ModelPlan", "Change", "KINDS", "SHRINK", "REHEARSE", "ISOLATE", "DELETE", "describe_changes",
    "change_lines", "is_mindformers_run", "installed_mindformers", "plan_mindformers", "CPU_WRAPPER", "MCORE_MODEL_TYPES",
    "registered_model_type",
]  # fmt: skip
