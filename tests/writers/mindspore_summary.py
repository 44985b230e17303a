"""Write MindSpore summaries with SummaryRecord and SummaryCollector, then decode
them with MindSpore's own summary_pb2 / lineage_pb2 into expected.json.

Usage: python mindspore_summary.py OUT_DIR
Layout written:
  OUT/record/            SummaryRecord: scalars (with a NaN and an Inf), histograms, tensors, images
  OUT/record_custom/     SummaryRecord with file_prefix/file_suffix set
  OUT/collector/         SummaryCollector on a small network: _MS (loss, histograms, graph) and _lineage
  OUT/collector/train.log  LossMonitor + TimeMonitor output of that training
  OUT/ranks/rank_{0,1}/  one SummaryRecord per rank directory
  OUT/evaluation/        SummaryCollector around model.eval: evaluation lineage
  OUT/legacy/            an old-style file ("Mindspore.Event:1", no device id) with a loss landscape
"""

import contextlib
import hashlib
import json
import math
import os
import sys

import numpy as np

out = os.path.abspath(sys.argv[1])
os.makedirs(out, exist_ok=True)

import mindspore as ms  # noqa: E402
from mindspore import Tensor, nn  # noqa: E402
from mindspore.train import LossMonitor, Model, TimeMonitor  # noqa: E402
from mindspore.train.callback import Callback, SummaryCollector  # noqa: E402
from mindspore.train.summary import SummaryRecord  # noqa: E402

ms.set_context(mode=ms.PYNATIVE_MODE)
ms.set_device("CPU")
ms.set_seed(0)
rng = np.random.default_rng(0)

# ---------------------------------------------------------------- SummaryRecord
with SummaryRecord(os.path.join(out, "record")) as rec:
    for step in range(1, 121):
        loss = 2.0 / step
        if step == 77:
            loss = float("nan")
        if step == 78:
            loss = float("inf")
        rec.add_value("scalar", "loss", Tensor(np.float32(loss)))
        rec.add_value("scalar", "lr", Tensor(np.float32(0.01 * 0.99**step)))
        if step % 40 == 0:
            rec.add_value("histogram", "fc.weight", Tensor(rng.standard_normal(200).astype(np.float32)))
            rec.add_value("tensor", "probe", Tensor(np.arange(6, dtype=np.float32).reshape(2, 3) * step))
            rec.add_value("image", "sample", Tensor(rng.random((1, 3, 6, 5)).astype(np.float32)))
        rec.record(step)

with SummaryRecord(os.path.join(out, "record_custom"), file_prefix="mine", file_suffix="_custom") as rec:
    for step in range(0, 30):
        rec.add_value("scalar", "metric", Tensor(np.float32(step * 0.5)))
        rec.record(step)

for rank in (0, 1):
    with SummaryRecord(os.path.join(out, "ranks", f"rank_{rank}")) as rec:
        for step in range(1, 51):
            rec.add_value("scalar", "loss", Tensor(np.float32(1.0 / step + rank)))
            rec.record(step)

# ---------------------------------------------------------------- SummaryCollector
x = rng.standard_normal((160, 4)).astype(np.float32)
y = (x @ np.array([[1.0], [-2.0], [0.5], [3.0]], dtype=np.float32) + 0.1).astype(np.float32)
dataset = ms.dataset.NumpySlicesDataset({"x": x, "y": y}, shuffle=False).batch(8)
net = nn.Dense(4, 1)
loss_fn = nn.MSELoss()
opt = nn.Momentum(net.trainable_params(), learning_rate=0.01, momentum=0.9)
model = Model(net, loss_fn, opt)


class RecordLoss(Callback):
    def __init__(self):
        self.losses = []

    def on_train_step_end(self, run_context):
        cb = run_context.original_args()
        self.losses.append((cb.cur_step_num, float(cb.net_outputs.asnumpy())))


seen = RecordLoss()
collector = SummaryCollector(
    os.path.join(out, "collector"),
    collect_freq=1,
    collect_specified_data={"collect_metric": True, "collect_graph": True, "collect_train_lineage": True, "histogram_regular": "weight"},
    custom_lineage_data={"team": "msnb", "seed": 7, "ratio": 0.5},
)
ms.set_context(mode=ms.GRAPH_MODE)  # the collector only records the graph in graph mode
os.makedirs(os.path.join(out, "collector"), exist_ok=True)
with open(os.path.join(out, "collector", "train.log"), "w") as log, contextlib.redirect_stdout(log):
    model.train(2, dataset, callbacks=[collector, LossMonitor(1), TimeMonitor(), seen], dataset_sink_mode=False)
eval_model = Model(net, loss_fn, opt, metrics={"mae": nn.MAE()})
eval_collector = SummaryCollector(os.path.join(out, "evaluation"), collect_specified_data={"collect_eval_lineage": True})
eval_model.eval(dataset, callbacks=[eval_collector], dataset_sink_mode=False)

# Files as older MindSpore wrote them: "Mindspore.Event:1" and no device id in the name.
# Built with MindSpore's own summary_pb2 (no current writer produces them) and framed like any record.
import struct  # noqa: E402

from crc32c import crc32c  # noqa: E402
from mindspore.train import summary_pb2  # noqa: E402


def _masked(data):
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def _frame(payload):
    head = struct.pack("<Q", len(payload))
    return head + struct.pack("<I", _masked(head)) + payload + struct.pack("<I", _masked(payload))


legacy = os.path.join(out, "legacy")
os.makedirs(legacy, exist_ok=True)
records = [summary_pb2.Event(wall_time=1600000000.0, version="Mindspore.Event:1")]
for step in range(1, 6):
    ev = summary_pb2.Event(wall_time=1600000000.0 + step, step=step)
    ev.summary.value.add(tag="loss", scalar_value=1.0 / step)
    records.append(ev)
landscape = summary_pb2.Event(wall_time=1600000010.0, step=5)
value = landscape.summary.value.add(tag="landscape")
value.loss_landscape.metadata.decomposition = "PCA"
value.loss_landscape.metadata.unit = "step"
records.append(landscape)
with open(os.path.join(legacy, "events.out.events.summary.1600000000.oldhost_MS"), "wb") as f:
    for ev in records:
        f.write(_frame(ev.SerializeToString()))

# ---------------------------------------------------------------- expected values
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from framing import payloads  # noqa: E402
from mindspore.train import lineage_pb2, summary_pb2  # noqa: E402


def num(v):
    return None if math.isnan(v) else ("inf" if v == math.inf else ("-inf" if v == -math.inf else v))


expected = {"files": {}, "train_losses": seen.losses}
for root, _dirs, files in os.walk(out):
    for name in sorted(files):
        if ".summary." not in name:
            continue
        path = os.path.join(root, name)
        rel = os.path.relpath(path, out)
        entry = {"records": 0, "scalars": [], "histograms": [], "tensors": [], "images": [], "lineage": [], "version": None, "graph_steps": []}
        for _pos, payload in payloads(path):
            entry["records"] += 1
            if name.endswith("_lineage"):
                ev = lineage_pb2.LineageEvent()
                ev.ParseFromString(payload)
                if ev.HasField("train_lineage"):
                    hp = ev.train_lineage.hyper_parameters
                    entry["lineage"].append(
                        {
                            "kind": "train",
                            "step": ev.step,
                            "optimizer": hp.optimizer,
                            "learning_rate": hp.learning_rate,
                            "loss_function": hp.loss_function,
                            "epoch": hp.epoch,
                            "parallel_mode": hp.parallel_mode,
                            "device_num": hp.device_num,
                            "batch_size": hp.batch_size,
                            "network": ev.train_lineage.algorithm.network,
                            "loss": ev.train_lineage.algorithm.loss,
                            "train_dataset_path": ev.train_lineage.train_dataset.train_dataset_path,
                            "train_dataset_size": ev.train_lineage.train_dataset.train_dataset_size,
                        }
                    )
                elif ev.HasField("dataset_graph"):
                    entry["lineage"].append({"kind": "dataset_graph", "step": ev.step})
                elif ev.HasField("evaluation_lineage"):
                    entry["lineage"].append(
                        {
                            "kind": "evaluation",
                            "step": ev.step,
                            "metric": ev.evaluation_lineage.metric,
                            "valid_dataset_size": ev.evaluation_lineage.valid_dataset.valid_dataset_size,
                        }
                    )
                elif ev.HasField("user_defined_info"):
                    info = {}
                    for part in ev.user_defined_info.user_info:
                        info.update(dict(part.map_str))
                        info.update(dict(part.map_int32))
                        info.update(dict(part.map_double))
                    entry["lineage"].append({"kind": "user_defined", "step": ev.step, "info": info})
                elif ev.version:
                    entry["version"] = ev.version
                continue
            ev = summary_pb2.Event()
            ev.ParseFromString(payload)
            if ev.version:
                entry["version"] = ev.version
            if ev.HasField("graph_def"):
                entry["graph_steps"].append(ev.step)
            entry.setdefault("landscape_steps", []).extend(ev.step for v in ev.summary.value if v.WhichOneof("value") == "loss_landscape")
            for v in ev.summary.value:
                kind = v.WhichOneof("value")
                if kind == "scalar_value":
                    entry["scalars"].append([v.tag, ev.step, ev.wall_time, num(v.scalar_value)])
                elif kind == "histogram":
                    h = v.histogram
                    entry["histograms"].append(
                        {
                            "tag": v.tag,
                            "step": ev.step,
                            "min": h.min,
                            "max": h.max,
                            "sum": h.sum,
                            "count": h.count,
                            "nan_count": h.nan_count,
                            "pos_inf_count": h.pos_inf_count,
                            "neg_inf_count": h.neg_inf_count,
                            "left": [b.left for b in h.buckets],
                            "width": [b.width for b in h.buckets],
                            "counts": [b.count for b in h.buckets],
                        }
                    )
                elif kind == "tensor":
                    t = v.tensor
                    entry["tensors"].append({"tag": v.tag, "step": ev.step, "dims": list(t.dims), "data_type": t.data_type, "float_data": list(t.float_data)})
                elif kind == "image":
                    im = v.image
                    entry["images"].append(
                        {
                            "tag": v.tag,
                            "step": ev.step,
                            "height": im.height,
                            "width": im.width,
                            "colorspace": im.colorspace,
                            "sha256": hashlib.sha256(im.encoded_image).hexdigest(),
                        }
                    )
        expected["files"][rel] = entry

with open(os.path.join(out, "expected.json"), "w") as f:
    json.dump(expected, f)
print("wrote", out)
