"""A complete model for ``msnb smoke --module examples/my_model.py``: copy it, then put your own network in.

A smoke run imports this file in its child process and trains what it
defines, under the monitoring settings being tested.  It needs four names (or a
``build()`` function returning them as a tuple or a dict):

- ``net``: the network (a ``mindspore.nn.Cell``) that maps a batch's inputs to predictions;
- ``loss_fn``: the loss, called as ``loss_fn(net(x), y)``;
- ``optimizer``: over ``net.trainable_params()``;
- ``dataset``: a ``mindspore.dataset`` pipeline yielding ``(x, y)`` batches.  The
  smoke run repeats it as often as ``--steps`` needs, so a few dozen batches do.

Here: a small two-layer network fitting a noisy linear function of 8 features;
its loss falls clearly within the default 200 steps on a CPU.
"""

import mindspore as ms
import numpy as np
from mindspore import nn

FEATURES = 8
BATCH = 32

rng = np.random.default_rng(0)
x = rng.standard_normal((64 * BATCH, FEATURES)).astype(np.float32)
true_w = rng.standard_normal((FEATURES, 1)).astype(np.float32)
y = (x @ true_w + 0.1 * rng.standard_normal((x.shape[0], 1))).astype(np.float32)


class Regressor(nn.Cell):
    """Dense -> ReLU -> Dense."""

    def __init__(self):
        super().__init__()
        self.hidden = nn.Dense(FEATURES, 32)
        self.act = nn.ReLU()
        self.out = nn.Dense(32, 1)

    def construct(self, x):
        return self.out(self.act(self.hidden(x)))


ms.set_seed(0)
net = Regressor()
loss_fn = nn.MSELoss()
optimizer = nn.Adam(net.trainable_params(), learning_rate=0.01)
dataset = ms.dataset.NumpySlicesDataset({"x": x, "y": y}, shuffle=True).batch(BATCH, drop_remainder=True)
