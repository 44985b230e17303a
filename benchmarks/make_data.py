"""Build the benchmark inputs with the real writers (run as a child process).

    python make_data.py ms_scalars OUT_DIR STEPS   # MindSpore SummaryRecord, 4 scalar tags per step
    python make_data.py tb_scalars OUT_DIR STEPS   # the same values through tensorboardX, as mindformers writes
    python make_data.py ms_hist OUT_DIR STEPS      # SummaryRecord, 8 histograms (4,096 values each) per step

The same seed gives the same values in the MindSpore and TensorBoard files.
"""

import sys

import numpy as np

TAGS = ("loss", "learning-rate", "grad-norm", "iteration-time")


def values(steps: int) -> np.ndarray:
    rng = np.random.default_rng(2024)
    return rng.random((steps, len(TAGS)), dtype=np.float32)


def ms_scalars(out: str, steps: int) -> None:
    from mindspore import Tensor
    from mindspore.train.summary import SummaryRecord

    v = values(steps)
    with SummaryRecord(out, max_file_size=None) as rec:
        for step in range(1, steps + 1):
            row = v[step - 1]
            for j, tag in enumerate(TAGS):
                rec.add_value("scalar", tag, Tensor(row[j]))
            rec.record(step)


def tb_scalars(out: str, steps: int) -> None:
    from tensorboardX import SummaryWriter

    v = values(steps)
    w = SummaryWriter(out, max_queue=10000, flush_secs=600)
    for step in range(1, steps + 1):
        row = v[step - 1]
        for j, tag in enumerate(TAGS):
            w.add_scalar(tag, float(row[j]), step)
    w.close()


def ms_hist(out: str, steps: int) -> None:
    from mindspore import Tensor
    from mindspore.train.summary import SummaryRecord

    rng = np.random.default_rng(7)
    with SummaryRecord(out, max_file_size=None) as rec:
        for step in range(1, steps + 1):
            for j in range(8):
                rec.add_value("histogram", f"layer{j}.weight", Tensor(rng.standard_normal(4096).astype(np.float32) * (1 + j)))
            rec.add_value("scalar", "loss", Tensor(np.float32(1.0 / step)))
            rec.record(step)


if __name__ == "__main__":
    kind, out, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
    {"ms_scalars": ms_scalars, "tb_scalars": tb_scalars, "ms_hist": ms_hist}[kind](out, steps)
