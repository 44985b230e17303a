"""Write histogram summaries with MindSpore's SummaryRecord, then decode them with MindSpore's own
summary_pb2 into expected.json (floats as hex strings, so the comparison is bit for bit).

Usage: python mindspore_histograms.py OUT_DIR
The tensors are chosen to reach every shape a histogram message takes: one bucket (a constant),
counts of one, two and three varint bytes, NaN and +-Inf values, huge and tiny magnitudes, float16.
"""

import json
import os
import sys

import numpy as np
from framing import payloads

out = os.path.abspath(sys.argv[1])
os.makedirs(out, exist_ok=True)

import mindspore as ms  # noqa: E402
from mindspore import Tensor  # noqa: E402
from mindspore.train import summary_pb2  # noqa: E402
from mindspore.train.summary import SummaryRecord  # noqa: E402

ms.set_context(mode=ms.PYNATIVE_MODE)
ms.set_device("CPU")
rng = np.random.default_rng(11)


def tensors(step: int) -> dict:
    weird = rng.standard_normal(300).astype(np.float32)
    weird[:5] = [np.nan, np.inf, -np.inf, np.nan, 0.0]
    return {
        "normal": rng.standard_normal(4096).astype(np.float32) * step,
        "constant": np.full(50_000, 0.5, dtype=np.float32),  # one bucket, a three-byte count
        "weird": weird,
        "huge": (rng.standard_normal(64) * 1e30).astype(np.float32),
        "tiny": (rng.standard_normal(64) * 1e-30).astype(np.float32),
        "half": rng.standard_normal(1000).astype(np.float16),
        "skewed": rng.exponential(1.0, 20_000).astype(np.float32),  # counts from one byte to two
    }


with SummaryRecord(os.path.join(out, "hist"), max_file_size=None) as rec:
    for step in range(1, 41):
        for tag, values in tensors(step).items():
            rec.add_value("histogram", tag, Tensor(values))
        rec.add_value("scalar", "loss", Tensor(np.float32(1.0 / step)))
        rec.record(step)

expected = []
(path,) = [os.path.join(out, "hist", f) for f in os.listdir(os.path.join(out, "hist"))]
for _pos, payload in payloads(path):
    ev = summary_pb2.Event()
    ev.ParseFromString(payload)
    for v in ev.summary.value:
        if v.WhichOneof("value") != "histogram":
            continue
        h = v.histogram
        expected.append(
            {
                "tag": v.tag,
                "step": ev.step,
                "min": float(h.min).hex(),
                "max": float(h.max).hex(),
                "sum": float(h.sum).hex(),
                "count": h.count,
                "nan_count": h.nan_count,
                "pos_inf_count": h.pos_inf_count,
                "neg_inf_count": h.neg_inf_count,
                "left": [float(b.left).hex() for b in h.buckets],
                "width": [float(b.width).hex() for b in h.buckets],
                "counts": [b.count for b in h.buckets],
            }
        )
with open(os.path.join(out, "expected.json"), "w") as f:
    json.dump({"path": path, "histograms": expected}, f)
