"""Write a base directory of runs for the team panel with the real writers, in a child process.

Usage: python team_runs.py OUT_DIR tbx   tensorboardX, mindformers' layout (RUN/rank_N/events.out.tfevents.*, tags loss,
                                         learning-rate, grad-norm), with the noise and the failures the panel must tell apart
       python team_runs.py OUT_DIR ms    MindSpore SummaryRecord: one folder holding one file per rank, the rank in the
                                         file name (the device id MindSpore puts there: DEVICE_ID)
       python team_runs.py OUT_DIR big RUNS RANKS STEPS   the benchmark's tree: RUNS healthy runs of RANKS ranks x STEPS steps

OUT/expected.json lists what the panel must say about each run (the scenario's design, fixed before any reading).
"""

import json
import math
import os
import sys

import numpy as np

NAN_RANK, NAN_STEP = 2, 150


def loss_curve(rng, steps, noise=0.08):
    """A falling loss with log-normal noise (a batch mean's spread)."""
    return (0.1 + 3.0 / np.sqrt(steps)) * np.exp(noise * rng.standard_normal(steps.shape))


def write_tbx_run(path, ranks, steps, *, seed=0, nan_rank=None, nan_step=None, suffix=""):
    """One run of tensorboardX files, one ``rank_N`` folder per rank, three tags a step."""
    from tensorboardX import SummaryWriter

    rng = np.random.default_rng(seed)
    s = np.arange(1, steps + 1)
    for rank in ranks:
        loss = loss_curve(rng, s)
        grad = 1.5 + 0.2 * rng.standard_normal(s.shape)
        if rank == nan_rank:
            loss[s >= nan_step] = np.nan
            grad[s >= nan_step] = np.nan
        w = SummaryWriter(os.path.join(path, f"rank_{rank}"), filename_suffix=suffix)
        for step, lv, gv in zip(s.tolist(), loss.tolist(), grad.tolist()):
            w.add_scalar("loss", lv, step)
            w.add_scalar("learning-rate", 1e-4 * min(1.0, step / 20), step)
            w.add_scalar("grad-norm", gv, step)
        w.close()


def write_tbx(out):
    write_tbx_run(os.path.join(out, "healthy"), range(4), 300, seed=1)
    write_tbx_run(os.path.join(out, "nan_rank"), range(4), 300, seed=2, nan_rank=NAN_RANK, nan_step=NAN_STEP)
    write_tbx_run(os.path.join(out, "missing_rank"), (0, 1, 3), 300, seed=3)
    write_tbx_run(os.path.join(out, "exp", "a", "run"), range(2), 300, seed=4)
    # a run whose only file is damaged throughout: a real file, every byte after its first record inverted
    write_tbx_run(os.path.join(out, "damaged"), (0,), 50, seed=5)
    (name,) = os.listdir(os.path.join(out, "damaged", "rank_0"))
    path = os.path.join(out, "damaged", "rank_0", name)
    data = bytearray(open(path, "rb").read())
    for i in range(64, len(data)):
        data[i] ^= 0xFF
    open(path, "wb").write(bytes(data))
    return {
        "healthy": {"passed": True, "ranks": [0, 1, 2, 3], "missing_ranks": [], "last_step": 300, "flags": []},
        "nan_rank": {"passed": False, "ranks": [0, 1, 2, 3], "missing_ranks": [], "last_step": 300, "flags": [[NAN_RANK, "loss", NAN_STEP]]},
        "missing_rank": {"passed": True, "ranks": [0, 1, 3], "missing_ranks": [2], "last_step": 300, "flags": []},
        "exp/a/run": {"passed": True, "ranks": [0, 1], "missing_ranks": [], "last_step": 300, "flags": []},
        "damaged": {"passed": True, "ranks": [0], "missing_ranks": [], "last_step": None, "flags": []},
    }


def write_ms(out):
    """Two ranks' summaries in one folder, each written by its own MindSpore process, as msrun starts them."""
    import subprocess

    for rank in (0, 1):
        env = dict(os.environ, DEVICE_ID=str(rank))  # MindSpore names the file after it: events.out.events.summary.<ts>.<rank>.<host>_MS
        subprocess.run([sys.executable, os.path.abspath(__file__), out, "ms-rank", str(rank)], env=env, check=True, timeout=300)
    return {"ms_run": {"passed": True, "ranks": [0, 1], "missing_ranks": [], "last_step": 200, "flags": []}}


def write_ms_rank(out, rank):
    import mindspore as ms
    from mindspore import Tensor
    from mindspore.train.summary import SummaryRecord

    ms.set_context(mode=ms.PYNATIVE_MODE)
    ms.set_device("CPU")
    rng = np.random.default_rng(6 + rank)
    s = np.arange(1, 201)
    with SummaryRecord(os.path.join(out, "ms_run")) as rec:
        for step, v in zip(s.tolist(), loss_curve(rng, s).tolist()):
            rec.add_value("scalar", "loss", Tensor(np.float32(v)))
            rec.record(step)


def main():
    out, which = os.path.abspath(sys.argv[1]), sys.argv[2]
    os.makedirs(out, exist_ok=True)
    if which == "ms-rank":
        return write_ms_rank(out, int(sys.argv[3]))
    if which == "big":
        runs, ranks, steps = map(int, sys.argv[3:6])
        for i in range(runs):
            write_tbx_run(os.path.join(out, f"exp{i % 4}", f"run{i}"), range(ranks), steps, seed=100 + i)
        return
    expected_path = os.path.join(out, "expected.json")
    expected = json.load(open(expected_path)) if os.path.exists(expected_path) else {}
    expected.update(write_tbx(out) if which == "tbx" else write_ms(out))
    with open(expected_path, "w") as f:
        json.dump(expected, f, indent=1, allow_nan=False)
    assert not any(isinstance(v, float) and math.isnan(v) for v in expected.values())


if __name__ == "__main__":
    main()
