"""Write TensorBoard event files with tensorboardX, as mindformers does, then decode
them with tensorboardX's own protobuf classes into expected.json.

Usage: python tensorboard_events.py OUT_DIR
Layout written: OUT/tensorboard/rank_{0,1}/events.out.tfevents.*
"""

import json
import math
import os
import sys

import numpy as np
from tensorboardX import SummaryWriter
from tensorboardX.proto.event_pb2 import Event
from tensorboardX.proto.summary_pb2 import Summary, SummaryMetadata
from tensorboardX.proto.tensor_pb2 import TensorProto

out = os.path.abspath(sys.argv[1])
rng = np.random.default_rng(1)

for rank in (0, 1):
    w = SummaryWriter(os.path.join(out, "tensorboard", f"rank_{rank}"))
    w.add_text("config", f"seed: 0\nrank: {rank}\nmodel: tiny", 0)
    for step in range(1, 101):
        loss = 3.0 / step + 0.01 * rank
        if rank == 1 and step == 60:
            loss = float("nan")
        w.add_scalar("loss", loss, step)
        w.add_scalar("learning-rate", 1e-4 * min(1.0, step / 10), step)
        w.add_scalar("grad-norm", 1.5 + 0.1 * math.sin(step), step)
        if step % 25 == 0:
            w.add_histogram("weight_norm_hist", rng.standard_normal(500), step)
    # TF2-style scalars: a 0-d tensor of the "scalars" plugin, float and double
    meta = SummaryMetadata(plugin_data=SummaryMetadata.PluginData(plugin_name="scalars"))
    writer = w._get_file_writer()
    for step in (101, 102):
        f32 = Summary(value=[Summary.Value(tag="tf2/float", metadata=meta, tensor=TensorProto(dtype=1, float_val=[step * 0.25]))])
        f64 = Summary(value=[Summary.Value(tag="tf2/double", metadata=meta, tensor=TensorProto(dtype=2, double_val=[step * 0.125]))])
        writer.add_summary(f32, step)
        writer.add_summary(f64, step)
    w.close()


def num(v):
    return None if math.isnan(v) else v


sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from framing import payloads  # noqa: E402

expected = {"files": {}}
for root, _dirs, files in os.walk(out):
    for name in sorted(files):
        if "tfevents" not in name:
            continue
        path = os.path.join(root, name)
        entry = {"records": 0, "scalars": [], "texts": [], "histograms": [], "version": None}
        for _pos, payload in payloads(path):
            entry["records"] += 1
            ev = Event()
            ev.ParseFromString(payload)
            if ev.file_version:
                entry["version"] = ev.file_version
            for v in ev.summary.value:
                kind = v.WhichOneof("value")
                if kind == "simple_value":
                    entry["scalars"].append([v.tag, ev.step, ev.wall_time, num(v.simple_value)])
                elif kind == "tensor" and v.metadata.plugin_data.plugin_name == "scalars":
                    t = v.tensor
                    value = (list(t.float_val) or list(t.double_val))[0]
                    entry["scalars"].append([v.tag, ev.step, ev.wall_time, value])
                elif kind == "tensor" and v.metadata.plugin_data.plugin_name == "text":
                    entry["texts"].append([v.tag, ev.step, [s.decode() for s in v.tensor.string_val]])
                elif kind == "histo":
                    h = v.histo
                    entry["histograms"].append(
                        {
                            "tag": v.tag,
                            "step": ev.step,
                            "min": h.min,
                            "max": h.max,
                            "num": h.num,
                            "sum": h.sum,
                            "bucket_limit": list(h.bucket_limit),
                            "bucket": list(h.bucket),
                        }
                    )
        expected["files"][os.path.relpath(path, out)] = entry

with open(os.path.join(out, "expected.json"), "w") as f:
    json.dump(expected, f)
print("wrote", out)
