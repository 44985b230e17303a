"""Train a small MindSpore network on CPU with the callbacks msnb builds from a monitor_config.

Usage: python monitored_training.py CONFIG.yaml OUT_DIR --steps N --data learn|stall|noisy [--distributed]
Writes OUT/result.json: steps trained, the early stop's verdict, the callbacks' types, per-step losses.
Run it under msrun with --distributed for data-parallel workers (each builds its own callbacks).
"""

import argparse
import json
import os

import numpy as np

parser = argparse.ArgumentParser()
parser.add_argument("config")
parser.add_argument("out")
parser.add_argument("--steps", type=int, default=100)
parser.add_argument("--data", default="learn", choices=["learn", "stall", "noisy"])
parser.add_argument("--batch", type=int, default=8)
parser.add_argument("--lr", type=float, default=0.01)
parser.add_argument("--distributed", action="store_true")
args = parser.parse_args()

import mindspore as ms  # noqa: E402
from mindspore import nn  # noqa: E402
from mindspore.train import Model  # noqa: E402
from mindspore.train.callback import Callback  # noqa: E402

from msnb.monitor import build_monitor_callbacks, current_rank  # noqa: E402
from msnb.monitor.callbacks import SmoothedEarlyStop  # noqa: E402

ms.set_context(mode=ms.PYNATIVE_MODE)
ms.set_device("CPU")
if args.distributed:
    from mindspore.communication import init

    init()
    ms.set_auto_parallel_context(parallel_mode=ms.ParallelMode.DATA_PARALLEL, gradients_mean=True)
ms.set_seed(0)
rank, world = current_rank()
rng = np.random.default_rng(0 if rank is None else rank)

n = args.steps * args.batch
x = rng.standard_normal((n, 8)).astype(np.float32)
w = rng.standard_normal((8, 1)).astype(np.float32)
if args.data == "learn":
    y = x @ w
elif args.data == "noisy":  # learnable, but every batch's loss jumps around
    y = 3 * (x @ w) + rng.standard_normal((n, 1)).astype(np.float32)
else:  # nothing to learn: the loss settles at the noise level and stays
    y = rng.standard_normal((n, 1)).astype(np.float32)
dataset = ms.dataset.NumpySlicesDataset({"x": x, "y": y.astype(np.float32)}, shuffle=False).batch(args.batch)
net = nn.Dense(8, 1)
model = Model(net, nn.MSELoss(), nn.SGD(net.trainable_params(), learning_rate=args.lr))


class Record(Callback):
    def __init__(self):
        self.losses = []

    def on_train_step_end(self, run_context):
        cb = run_context.original_args()
        self.losses.append(float(cb.net_outputs.asnumpy()))


record = Record()
callbacks = build_monitor_callbacks(args.config)
model.train(1, dataset, callbacks=callbacks + [record], dataset_sink_mode=False)

stop = next((c for c in callbacks if isinstance(c, SmoothedEarlyStop)), None)
os.makedirs(args.out, exist_ok=True)
name = "result.json" if world == 1 else f"result_rank{rank}.json"
with open(os.path.join(args.out, name), "w") as f:
    json.dump(
        {
            "steps": len(record.losses),
            "losses": record.losses,
            "rank": rank,
            "world": world,
            "callbacks": [type(c).__name__ for c in callbacks],
            "stopped_step": stop.stopped_step if stop else None,
            "reason": stop.reason if stop else None,
            "summary_dir": next(c._summary_dir for c in callbacks if type(c).__name__ == "SummaryCollector")
            if any(type(c).__name__ == "SummaryCollector" for c in callbacks)
            else None,
        },
        f,
    )
