"""The smoke run's child process: one training, monitored, then exit.

    python -m msnb.smoke.builtin.worker SPEC.json

Runs apart from the notebook's kernel so that a crash, a hang or a NaN never
takes the kernel down; under msrun one of these runs per rank.  The model is
msnb's built-in one, or the user's code (a file defining ``net``, ``loss_fn``,
``optimizer`` and ``dataset``, or a ``build()`` returning them).  Per-step
times go to ``step_times[_rank<N>].csv`` beside the summary directory.
"""

from __future__ import annotations

import importlib
import json
import math
import os
import runpy
import signal
import sys

from ...processes import set_parent_death_signal


def _user_model(spec: dict):
    """(net, loss_fn, optimizer, dataset) from the user's code file or module."""
    if spec.get("code"):
        ns = runpy.run_path(spec["code"], run_name="__msnb_smoke__")
        where = "the cell's code"
    else:
        module = spec["module"]
        if spec.get("module_path"):  # a module name is imported from the caller's directory, not the scratch one
            sys.path.insert(0, spec["module_path"])
        ns = runpy.run_path(module, run_name="__msnb_smoke__") if module.endswith(".py") else vars(importlib.import_module(module))
        where = module
    if callable(ns.get("build")):
        built = ns["build"]()
        if isinstance(built, dict):
            ns = {**ns, **built}
        else:
            try:
                net, loss_fn, optimizer, dataset = built
            except (TypeError, ValueError):
                raise TypeError(f"build() in {where} must return (net, loss_fn, optimizer, dataset) or a dict of them") from None
            ns = {**ns, "net": net, "loss_fn": loss_fn, "optimizer": optimizer, "dataset": dataset}
    missing = [k for k in ("net", "dataset") if ns.get(k) is None]
    if missing:
        raise NameError(f"{where} must define {', '.join(missing)} (and loss_fn, optimizer), or a build() returning them")
    return ns["net"], ns.get("loss_fn"), ns.get("optimizer"), ns["dataset"]


def main(spec_path: str) -> int:
    set_parent_death_signal(signal.SIGKILL)  # the guard, or msrun, gone: so is this rank
    with open(spec_path) as f:
        spec = json.load(f)
    # deferred until the death signal is armed: MindSpore (seconds), msnb.monitor (numpy, PyYAML, the readers)
    import mindspore as ms
    from mindspore.train import Model

    from ...monitor import build_monitor_callbacks, current_rank
    from ..shared.step_callbacks import StepTimer, StopAt
    from .model import build

    ms.set_context(mode=ms.GRAPH_MODE if spec.get("mode") == "graph" else ms.PYNATIVE_MODE)
    ms.set_device(spec["device"])
    world = 1
    if spec.get("distributed"):
        from mindspore.communication import get_group_size, init  # deferred: MindSpore, as above

        init()
        world = get_group_size()
        ms.set_auto_parallel_context(parallel_mode=ms.ParallelMode.DATA_PARALLEL, gradients_mean=True)
    rank, _ = current_rank()
    rank = rank or 0
    steps = int(spec["steps"])
    collect_freq = int(spec.get("collect_freq") or 1)

    if spec.get("code") or spec.get("module"):
        net, loss_fn, optimizer, dataset = _user_model(spec)
        model = Model(net, loss_fn, optimizer) if loss_fn is not None or optimizer is not None else Model(net)
    else:
        train_net, dataset = build(steps, int(spec["batch_size"]), float(spec["lr"]), seed=int(spec.get("seed", 0)), shard=(rank, world))
        model = Model(train_net)

    times_path = os.path.join(spec["workdir"], "step_times.csv" if world == 1 else f"step_times_rank{rank}.csv")

    sink_size = spec.get("sink_size")
    size = dataset.get_dataset_size()
    per_epoch = sink_size or size
    epochs = max(1, math.ceil(steps / per_epoch)) if per_epoch else 1
    callbacks = [StepTimer(times_path, collect_freq)] + build_monitor_callbacks(spec["config"]) + [StopAt(steps)]
    if sink_size:
        # MindSpore trains without sink mode on CPU and in PyNative mode (it says so at INFO level); the verdict reports it
        model.train(epochs, dataset, callbacks=callbacks, dataset_sink_mode=True, sink_size=int(sink_size))
    else:
        model.train(epochs, dataset, callbacks=callbacks, dataset_sink_mode=False)
    print(f"msnb smoke worker: rank {rank} finished", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
