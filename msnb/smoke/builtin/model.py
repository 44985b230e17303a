"""The smoke run's built-in network: small, synthetic data, loss falls clearly within 200 steps on 2 CPU cores.

A two-layer MLP regressing a fixed nonlinear function of its input, trained
with Momentum under a warm-up then cosine learning-rate schedule.  The train
step reports the learning rate through ``ScalarSummary``, so the summary holds
``lr`` beside SummaryCollector's ``loss`` (SummaryCollector itself writes no
learning-rate scalar).
"""

from __future__ import annotations

import numpy as np

FEATURES = 16
MAX_BATCHES = 1024  # the data repeats after this many batches, so a long run costs no more memory than a short one


def synthetic_dataset(steps: int, batch_size: int, seed: int = 0, shard: tuple[int, int] = (0, 1)):
    import mindspore as ms  # deferred: MindSpore (the mindspore extra)

    rng = np.random.default_rng(seed + 1000 * shard[0])
    n = min(steps, MAX_BATCHES) * batch_size
    x = rng.standard_normal((n, FEATURES)).astype(np.float32)
    w = np.random.default_rng(seed).standard_normal((FEATURES, 1)).astype(np.float32)
    y = (np.tanh(x @ w) + 0.5 * (x[:, :1] ** 2) + 0.05 * rng.standard_normal((n, 1))).astype(np.float32)
    return ms.dataset.NumpySlicesDataset({"x": x, "y": y}, shuffle=False).batch(batch_size, drop_remainder=True)


def learning_rates(steps: int, lr: float) -> list[float]:
    warm = max(1, steps // 10)
    out = []
    for s in range(steps + 1):  # the optimizer reads the rate of the step after the last too
        if s < warm:
            out.append(lr * (s + 1) / warm)
        else:
            t = min(1.0, (s - warm) / max(1, steps - warm))
            out.append(lr * (0.1 + 0.9 * 0.5 * (1 + np.cos(np.pi * t))))
    return out


def build(steps: int, batch_size: int, lr: float, seed: int = 0, shard: tuple[int, int] = (0, 1)):
    """(train_network, dataset): a TrainOneStep cell that also records ``lr``, and its data."""
    # deferred: MindSpore (the mindspore extra)
    import mindspore as ms
    from mindspore import nn, ops

    class MLP(nn.Cell):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Dense(FEATURES, 64)
            self.act = nn.ReLU()
            self.fc2 = nn.Dense(64, 1)

        def construct(self, x):
            return self.fc2(self.act(self.fc1(x)))

    class StepWithLR(nn.TrainOneStepCell):
        """TrainOneStepCell that writes the current learning rate as a summary scalar."""

        def __init__(self, network, optimizer):
            super().__init__(network, optimizer)
            self.lr_summary = ops.ScalarSummary()

        def construct(self, *inputs):
            loss = super().construct(*inputs)
            self.lr_summary("lr", self.optimizer.get_lr())
            return loss

    ms.set_seed(seed)
    net = MLP()
    optimizer = nn.Momentum(net.trainable_params(), learning_rate=learning_rates(steps, lr), momentum=0.9)
    train_net = StepWithLR(nn.WithLossCell(net, nn.MSELoss()), optimizer)
    return train_net, synthetic_dataset(steps, batch_size, seed, shard)
