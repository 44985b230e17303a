"""Write a many-rank run with tensorboardX in mindformers' layout, and the values it wrote.

Usage: python rank_bands.py OUT_DIR RANKS STEPS
  OUT/tensorboard/rank_N/events.out.tfevents.*  loss (and a constant learning rate) for each rank
  OUT/values.npy                                 ranks x steps: the loss values as float32, as written
  OUT/roles.json                                 {"bad": rank drifting away, "noisy": a healthy rank with 3x the noise,
                                                  "nan": rank with one NaN, "nan_step": its step}
The loss of every rank is one trend times log-normal batch noise; the bad rank's rises 0.3 % a step
from 60 % of the run on; the noisy rank is healthy, only noisier.
"""

import json
import os
import sys

import numpy as np
from tensorboardX import SummaryWriter

out, ranks, steps = os.path.abspath(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
rng = np.random.default_rng(ranks * 1000 + steps)
step = np.arange(1, steps + 1)
trend = 3.0 / np.sqrt(step) + 0.5
loss = trend[None, :] * np.exp(rng.normal(0.0, 0.05, (ranks, steps)))
roles = {"bad": ranks - 2, "noisy": 1, "nan": 2, "nan_step": steps // 4}
loss[roles["noisy"]] = trend * np.exp(rng.normal(0.0, 0.15, steps))
onset = int(0.6 * steps)
loss[roles["bad"], onset:] *= np.exp(0.003 * np.arange(steps - onset))
loss[roles["nan"], roles["nan_step"] - 1] = np.nan
loss = loss.astype(np.float32)
for r in range(ranks):
    w = SummaryWriter(os.path.join(out, "tensorboard", f"rank_{r}"), max_queue=steps * 2, flush_secs=600)
    for s, v in zip(step.tolist(), loss[r].tolist()):
        w.add_scalar("loss", v, s)
        w.add_scalar("learning-rate", 1e-4, s)
    w.close()
np.save(os.path.join(out, "values.npy"), loss)
with open(os.path.join(out, "roles.json"), "w") as f:
    json.dump(roles, f)
