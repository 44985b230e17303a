"""A small data-parallel training for the notebooks, started by msrun (one process per rank).

    msrun --worker_num=2 --local_worker_num=2 --master_port=P --log_dir=LOGS --join=True \
        data_parallel_train.py CONFIG.yaml [--steps 120] [--bad-rank 1 --bad-from 40]

Each rank builds its monitoring callbacks from CONFIG.yaml (so it writes
summary_dir/rank_<id>) and trains on its own shard of a synthetic regression.
``--bad-rank`` corrupts that rank's labels from step ``--bad-from`` on, as a
broken data shard would: its loss leaves the others'.
"""

import argparse

import numpy as np

parser = argparse.ArgumentParser()
parser.add_argument("config")
parser.add_argument("--steps", type=int, default=120)
parser.add_argument("--batch", type=int, default=16)
parser.add_argument("--bad-rank", type=int, default=None)
parser.add_argument("--bad-from", type=int, default=40)
args = parser.parse_args()

import mindspore as ms  # noqa: E402
from mindspore import nn  # noqa: E402
from mindspore.communication import get_group_size, get_rank, init  # noqa: E402
from mindspore.train import Model  # noqa: E402

from msnb.monitor import build_monitor_callbacks  # noqa: E402

ms.set_context(mode=ms.PYNATIVE_MODE)
ms.set_device("CPU")
init()
ms.set_auto_parallel_context(parallel_mode=ms.ParallelMode.DATA_PARALLEL, gradients_mean=True)
ms.set_seed(1)
rank, world = get_rank(), get_group_size()

rng = np.random.default_rng(100 + rank)
n = args.steps * args.batch
x = rng.standard_normal((n, 8)).astype(np.float32)
w = np.linspace(-1, 1, 8, dtype=np.float32).reshape(8, 1)
y = x @ w + 0.05 * rng.standard_normal((n, 1)).astype(np.float32)
if rank == args.bad_rank:
    start = (args.bad_from - 1) * args.batch
    y[start:] = y[start:] * 4 + 3  # a shard whose labels went wrong
dataset = ms.dataset.NumpySlicesDataset({"x": x, "y": y.astype(np.float32)}, shuffle=False).batch(args.batch)

net = nn.Dense(8, 1)
model = Model(net, nn.MSELoss(), nn.SGD(net.trainable_params(), learning_rate=0.05))
model.train(1, dataset, callbacks=build_monitor_callbacks(args.config), dataset_sink_mode=False)
