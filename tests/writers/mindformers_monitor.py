"""Train a small MindSpore network on CPU with mindformers' MFLossMonitor and its
TensorBoard writer, as a mindformers Trainer would set them up.

Usage: python mindformers_monitor.py OUT_DIR   (run with OUT_DIR as the working
directory: importing mindformers creates ./output/log there)
Writes: OUT/tensorboard/rank_0/events.out.tfevents.* (mindformers' tensorboardX writer),
        OUT/output/log/rank_0/info.log (mindformers' logger), OUT/expected.json
"""

import json
import os
import sys
from types import SimpleNamespace

import numpy as np

out = os.path.abspath(sys.argv[1])
os.makedirs(out, exist_ok=True)
os.chdir(out)

from msnb.fullsize.import_guards import guard_deepseek_v4_import  # noqa: E402

guard_deepseek_v4_import()  # mindformers 2.0 without hyper_parallel: imported as the smoke's child imports it

import mindspore as ms  # noqa: E402
from mindformers.core.callback import MFLossMonitor  # noqa: E402
from mindformers.utils.tensorboard import _set_tensorboard_writer, _unset_tensorboard_writer  # noqa: E402
from mindspore import nn  # noqa: E402
from mindspore.train import Model  # noqa: E402
from mindspore.train.callback import Callback  # noqa: E402

ms.set_context(mode=ms.PYNATIVE_MODE)
ms.set_device("CPU")
ms.set_seed(0)
rng = np.random.default_rng(0)
EPOCHS, STEPS, BATCH, LR = 2, 10, 8, 0.01

_set_tensorboard_writer(SimpleNamespace(tensorboard_dir=os.path.join(out, "tensorboard", "rank_0"), tensorboard_queue_size=10))

x = rng.standard_normal((STEPS * BATCH, 4)).astype(np.float32)
y = (x @ np.array([[1.0], [-2.0], [0.5], [3.0]], dtype=np.float32)).astype(np.float32)
dataset = ms.dataset.NumpySlicesDataset({"x": x, "y": y}, shuffle=False).batch(BATCH)
net = nn.Dense(4, 1)
opt = nn.Momentum(net.trainable_params(), learning_rate=LR, momentum=0.9)


class FiveOutputStep(nn.Cell):
    """One training step returning what mindformers' MFTrainOneStepCell returns:
    (loss, overflow, loss scale, learning rate, global norm).  mindformers' own
    wrapper checks overflow with an NPU-only operator, so it cannot run on CPU."""

    def __init__(self, net_with_loss, optimizer):
        super().__init__(auto_prefix=False)
        self.optimizer = optimizer
        self.grad_fn = ms.value_and_grad(net_with_loss, None, optimizer.parameters)

    def construct(self, x, y):
        loss, grads = self.grad_fn(x, y)
        norm = ms.ops.sqrt(ms.ops.addn([ms.ops.sum(g * g) for g in grads]))
        self.optimizer(grads)
        return loss, ms.Tensor(False), ms.Tensor(1.0, ms.float32), ms.Tensor(LR, ms.float32), norm


model = Model(FiveOutputStep(nn.WithLossCell(net, nn.MSELoss()), opt))


class RecordLoss(Callback):
    def __init__(self):
        self.losses = []

    def on_train_step_end(self, run_context):
        cb = run_context.original_args()
        out = cb.net_outputs
        loss = out[0] if isinstance(out, (tuple, list)) else out
        self.losses.append((cb.cur_step_num, float(loss.asnumpy()), float(out[4].asnumpy())))


seen = RecordLoss()
monitor = MFLossMonitor(learning_rate=LR, per_print_times=1, origin_epochs=EPOCHS, dataset_size=STEPS, global_batch_size=BATCH)
model.train(EPOCHS, dataset, callbacks=[monitor, seen], dataset_sink_mode=False)
_unset_tensorboard_writer()

with open(os.path.join(out, "expected.json"), "w") as f:
    json.dump({"train_losses": seen.losses, "epochs": EPOCHS, "steps_per_epoch": STEPS, "lr": LR}, f)
print("wrote", out)
