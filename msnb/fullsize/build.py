"""What mindformers' Trainer builds before step 1, built at full size in the pre-flight's child: the network, the optimizer
and its learning-rate schedule, the training wrapper and the callbacks.

Each part is built by the Trainer's own method (``BaseTrainer.create_network_without_param_init``,
``wrap_network_with_tool_cells``, ``create_optimizer_scheduler_without_param_init``, ``create_model_wrapper``) or the
registry call ``base_trainer.training_process`` makes (``build_callback`` with the same default arguments), so every
constructor check of every layer kind the model has (dense, MoE, MTP, embedding, head) runs at the config's own
parallel degrees.  Parameters are created without data (MindSpore's ``no_init_parameters``, as the Trainer does when it
loads a checkpoint), so DeepSeek-V3 at 671 B takes about a gigabyte here.  The dataset is never opened: where the
Trainer asks its size (the learning-rate schedule's step count), a stand-in answers, declared in the result, and a
refusal that could come from that stand-in is a rule about the data, listed apart, never a finding.
"""

from __future__ import annotations

import functools
import os

from .datasets import dataset_exists, dataset_paths

RUNNER_RULES = "dataset and runner rules (check_runner_config)"
DATASET = "the training dataset (create_train_dataset, as the Trainer builds it)"
NETWORK = "the full-size network (build_network, parameters without data: every layer's constructor checks)"
OPTIMIZER = "optimizer and learning-rate schedule (create_optimizer_scheduler)"
STANDIN_DATASET_SIZE = 1_000_000  # steps an epoch, where the Trainer asks the dataset's size: far above any warmup


class _DatasetSize:
    """Where the Trainer asks the training dataset's size (``get_train_data_size``): the stand-in's answer, and whether it was asked."""

    asked = False

    def get_dataset_size(self) -> int:
        self.asked = True
        return STANDIN_DATASET_SIZE


def _trainer(config):
    """A ``BaseTrainer`` holding the run's config, so its own methods build each part as ``training_process`` does."""
    from mindformers.trainer.base_trainer import BaseTrainer  # deferred: mindformers, in the pre-flight's child only

    trainer = BaseTrainer(task="text_generation", model_name="pre-flight")
    trainer.config = config
    trainer.train_dataset = _DatasetSize()
    return trainer


def network(checks, config, out: dict):
    """The model as ``training_process`` builds it (its default arguments), parameters without data; None when refused."""
    from mindformers.dataset import check_dataset_config  # deferred: mindformers, in the pre-flight's child only

    trainer = _trainer(config)
    if (
        checks.run("dataset batch sizes (check_dataset_config: runner_config.batch_size at the parallel layout)", lambda: check_dataset_config(config) or True)
        is None
    ):
        checks.not_checked(NETWORK, "the batch sizes were refused")
        return None
    dataset(checks, config, trainer, out)
    default_args = {
        "parallel_config": config.parallel_config,
        "moe_config": config.moe_config,
        "dataset_config": config.train_dataset,
        "calculate_per_token_loss": getattr(config, "calculate_per_token_loss", False),
    }
    built = checks.run(NETWORK, lambda: _built_network(trainer, default_args))
    if built is not None:
        out["stood_in"].append("parameters: created without data (MindSpore's no_init_parameters, as the Trainer does when it loads a checkpoint)")
        out["network"] = {"class": type(built).__name__, "parameters": _count_parameters(built)}
        out["_trainer"] = trainer
    return built


def dataset(checks, config, trainer, out: dict) -> None:
    """The training dataset as the Trainer builds it, and the rules that need it (``check_runner_config``), when the
    files the config names are on this machine; else both are listed apart as rules about the data.

    A dataset that is here but cannot be built here is not checked, never a finding: building it runs under the
    communication stand-in, whose limits are msnb's.  The runner rules on a dataset built are mindformers' findings.
    """
    from mindformers.trainer.utils import check_runner_config  # deferred: mindformers, in the pre-flight's child only

    paths = dataset_paths(config.get("train_dataset") or {})
    absent = [path for _, path in paths if not dataset_exists(path)]
    if not paths or absent:
        why = f"{absent[0]} is not on this machine" if absent else "the config's train_dataset names no data files"
        checks.not_checked(RUNNER_RULES, f"they need the dataset itself: {why}", kind="data")
        return
    _workers_here(config, out)
    before, standin = len(checks.results), trainer.train_dataset
    trainer.train_dataset = None  # create_dataset returns the Trainer's own dataset when it holds one
    built = checks.run(DATASET, trainer.create_train_dataset, kind="data")
    trainer.train_dataset = standin
    if built is None:
        if checks.results[before]["outcome"] == "failed":  # built under msnb's stand-ins: not the config's finding
            refused = checks.results.pop(before)
            checks.not_checked(DATASET, f"it could not be built here: {refused['message']}", kind="data")
        checks.not_checked(RUNNER_RULES, "the dataset could not be built here", kind="data")
        return
    trainer.train_dataset = built  # the learning-rate schedule asks the real size: no stand-in
    out["dataset_size"] = int(built.get_dataset_size())
    checks.run(RUNNER_RULES, lambda: check_runner_config(config, built) or True)


def _workers_here(config, out: dict) -> None:
    """The dataset's ``num_parallel_workers`` capped at this machine's cores (MindSpore refuses more): declared as a stand-in."""
    cores = os.cpu_count() or 1
    for section in (config.get("train_dataset"), (config.get("train_dataset_task") or {}).get("dataset_config")):
        workers = section.get("num_parallel_workers") if hasattr(section, "get") else None
        if isinstance(workers, int) and not isinstance(workers, bool) and workers > cores:
            section["num_parallel_workers"] = cores
            said = f"the dataset's num_parallel_workers: {cores} (this machine's cores) stands in for {workers} (MindSpore refuses more workers than cores)"
            if said not in out["stood_in"]:
                out["stood_in"].append(said)


def _built_network(trainer, default_args: dict):
    network = trainer.create_network_without_param_init(default_args=default_args)  # check_pipeline_stage included
    return network


def _count_parameters(network) -> int:
    return int(sum(p.size for p in network.get_parameters()))


def trainer_parts(checks, config, network, out: dict):
    """The training wrapper cells, the optimizer with its learning-rate schedule and the run's wrapper, as the Trainer builds them."""
    trainer = out.pop("_trainer", None) or _trainer(config)
    wrapped = checks.run(
        "training wrapper cells (wrap_network_with_tool_cells: pipeline, gradient accumulation)", lambda: trainer.wrap_network_with_tool_cells(network)
    )
    if wrapped is None:
        checks.not_checked(OPTIMIZER, "the training wrapper was refused")
        return trainer
    before = len(checks.results)
    optimizer = checks.run(OPTIMIZER, lambda: trainer.create_optimizer_scheduler_without_param_init(wrapped, _model_params(config, network)))
    if getattr(trainer.train_dataset, "asked", False):
        out["stood_in"].append(
            f"the dataset's size: {STANDIN_DATASET_SIZE:,} steps an epoch where the learning-rate schedule asks it (the dataset is not opened)"
        )
        if optimizer is None and checks.results[before]["outcome"] == "failed":  # possibly the stand-in's doing: a rule about the data
            refused = checks.results.pop(before)
            checks.not_checked(OPTIMIZER, f"refused with the dataset's size stood in, so it may be the stand-in's doing: {refused['message']}", kind="data")
    if optimizer is not None:
        checks.run("the run's wrapper (create_model_wrapper: runner_wrapper, loss scale)", lambda: trainer.create_model_wrapper(wrapped, optimizer))
    return trainer


def _model_params(config, network) -> set:
    """What ``training_process`` passes as model_params: the model's own parameters for the optimizers that ask them."""
    if config.optimizer.type in ("PmaAdamW", "FusedPmaAdamW", "Muon") and hasattr(network, "get_model_parameters"):
        return set(network.get_model_parameters())
    return set()


def callbacks(checks, config, trainer, out: dict) -> None:
    """Every callback the Trainer builds from ``callbacks`` (monitor_config's TrainingStateMonitor included, added by
    ``Trainer._reassign_monitor_config``), with the default arguments ``training_process`` gives them, under the run's
    pipeline stages."""
    from mindformers.core import build_callback  # deferred: mindformers, in the pre-flight's child only

    for callback in config.get("callbacks") or []:
        kind = callback.get("type") if hasattr(callback, "get") else None
        if kind is None:
            continue
        default_args = _callback_defaults(config, trainer, kind)
        checks.run(
            f"callback {kind} (build_callback, as training_process builds it)", functools.partial(_build_callback, build_callback, callback, default_args)
        )


def _build_callback(build_callback, callback, default_args):
    return build_callback(callback, default_args=default_args) or True


def _callback_defaults(config, trainer, kind: str):
    """The default arguments ``training_process`` gives a callback of *kind* (the ones its constructor checks read)."""
    pc = config.parallel_config
    runner = config.runner_config
    global_batch = getattr(trainer, "global_batch_size", None) or runner.get("global_batch_size")
    if kind == "MFLossMonitor":
        return {
            "origin_epochs": runner.get("origin_epochs", runner.get("epochs")),
            "dataset_size": STANDIN_DATASET_SIZE,
            "micro_batch_interleave_num": config.get("micro_batch_interleave_num", 1),
            "micro_batch_num": pc.micro_batch_num,
            "initial_epoch": runner.get("initial_epoch", 0),
            "initial_step": runner.get("initial_step", 0),
            "global_batch_size": global_batch,
            "gradient_accumulation_steps": runner.get("gradient_accumulation_steps", 1),
        }
    if kind == "TrainingStateMonitor":
        return {
            "origin_epochs": runner.get("origin_epochs", runner.get("epochs")),
            "dataset_size": STANDIN_DATASET_SIZE,
            "initial_epoch": runner.get("initial_epoch", 0),
            "initial_step": runner.get("initial_step", 0),
            "micro_batch_num": pc.micro_batch_num,
            "global_batch_size": global_batch,
            "tensor_model_parallel_size": pc.model_parallel,
            "check_for_nan_in_loss_and_grad": getattr(config, "check_for_nan_in_loss_and_grad", False),
            "use_skip_data_by_global_norm": getattr(config, "use_skip_data_by_global_norm", False),
            "use_local_norm": getattr(config.runner_wrapper, "local_norm", False) if config.get("runner_wrapper") else False,
        }
    return None


__all__ = ["DATASET", "NETWORK", "OPTIMIZER", "RUNNER_RULES", "callbacks", "dataset", "network", "trainer_parts"]
