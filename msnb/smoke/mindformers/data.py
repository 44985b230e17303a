"""A mindformers smoke's data: the config's own dataset files when they are here, else synthetic token ids."""

from __future__ import annotations

import copy
import os

from ...errors import SmokeError
from ...fullsize.datasets import dataset_exists, is_mindrecord
from .changes import DELETE, REHEARSE, SHRINK, Edits
from .sizes import SHRUNK


def dataset_columns(data: dict, legacy: bool) -> list:
    train = data.get("train_dataset") if isinstance(data.get("train_dataset"), dict) else {}
    cols = train.get("input_columns")
    if isinstance(cols, list) and cols and all(isinstance(c, str) for c in cols):
        return list(cols)
    # what BaseTrainer gives a new-architecture model without input_columns (the Megatron loader's columns)
    return ["input_ids"] if legacy else ["input_ids", "labels", "loss_mask", "position_ids"]


def mirror_dataset_task(ed: Edits, loaded) -> None:
    """``train_dataset_task.dataset_config`` is usually the YAML anchor of ``train_dataset``: mindformers reads it as a copy, so change both."""
    literal = loaded.literal if loaded.literal is not None else loaded.data
    task = literal.get("train_dataset_task")
    if not (isinstance(task, dict) and isinstance(task.get("dataset_config"), dict) and task["dataset_config"] == literal.get("train_dataset")):
        return
    for c in list(ed.changes):
        if c.path[:1] == ("train_dataset",):
            target = ("train_dataset_task", "dataset_config") + c.path[1:]
            if c.after is DELETE:
                ed.delete(c.kind, target, c.why)
            else:
                ed.set(c.kind, target, copy.deepcopy(c.after), c.why)


def use_config_data(loaded, data: str, paths: list) -> bool:
    """Whether the child trains on the config's own dataset: ``config`` (its files must be here), ``synthetic``, or ``auto``.

    Raises:
        SmokeError: ``data="config"`` and the loader names no file, or one that is not here (naming the key).
    """
    if data == "config":
        missing = [(k, p) for k, p in paths if not dataset_exists(p)]
        if not paths:
            raise SmokeError(f"{loaded.where('train_dataset')}: --data config, but train_dataset.data_loader names no data files")
        if missing:
            raise SmokeError(
                f"{loaded.where('train_dataset')}: --data config, but train_dataset.data_loader.{missing[0][0]} {missing[0][1]} does not exist here"
            )
        return True
    if data == "synthetic":
        return False
    return bool(paths) and all(dataset_exists(p) for _, p in paths)


def data_note(data: str, config_data: bool, paths: list, train: dict, columns: list, before: dict, after: dict) -> str:
    """The verdict's ``data`` line: which data the child trains on, and why."""
    if config_data:
        note = "the config's own dataset (" + ", ".join(p for _, p in paths) + ")"
        if any(is_mindrecord(train, p) for _, p in paths) and before.get("seq") != after.get("seq"):
            note += f", every column cut to the shrunk sequence ({before.get('seq')} -> {after.get('seq')} tokens, offsets kept)"
            marker = next((c for c in ("loss_mask", "labels") if c in columns), None)
            if marker:  # a finetune row's first tokens are its prompt, trained on nothing: the window holds its trained tokens
                note += f", a row's window from half a window before its first trained token ({marker})"
        return note
    why = "--data synthetic" if data == "synthetic" else ("its dataset is not on this machine" if paths else "the config names no dataset files")
    return f"synthetic token ids ({why}): columns {', '.join(columns)}, a counting pattern a model can learn"


def fit_dataset(ed: Edits, train: dict, after: dict) -> None:
    """The loader's workers at most this machine's cores, its sequence the model's (shrunk) one."""
    cores = os.cpu_count() or 1
    workers_key = train.get("num_parallel_workers")
    if isinstance(workers_key, int) and not isinstance(workers_key, bool) and workers_key > cores:
        ed.set(REHEARSE, ("train_dataset", "num_parallel_workers"), cores, "this machine's cores; MindSpore refuses more")
    loader_cfg = ed.node(("train_dataset", "data_loader", "config"))
    if loader_cfg is not None and "seq_length" in loader_cfg and "seq" in after:
        ed.set(SHRINK, ("train_dataset", "data_loader", "config", "seq_length"), after["seq"], SHRUNK + " (the dataset's sequence with the model's)")
