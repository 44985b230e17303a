"""Write the scenario corpus with the real writers (run in a child process).

Usage: python write.py OUT_DIR [tbx|ms]
tbx: tensorboardX SummaryWriter in mindformers' layout, OUT/NAME/tensorboard/rank_N/events.out.tfevents.*
     (one file per segment: a resumed job writes a second file, named to sort after the first)
ms:  MindSpore SummaryRecord, OUT/NAME/rank_N/events.out.events.summary.*
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from catalog import LEARNING_RATE, SCENARIOS  # noqa: E402

out = os.path.abspath(sys.argv[1])
which = sys.argv[2]

if which == "tbx":
    from tensorboardX import SummaryWriter

    for name, (writer, make, _expect) in SCENARIOS.items():
        if writer != "tbx":
            continue
        for rank, segments in make().items():
            for i, (steps, values) in enumerate(segments):
                w = SummaryWriter(os.path.join(out, name, "tensorboard", f"rank_{rank}"), filename_suffix=f".part{i}")
                for s, v in zip(steps.tolist(), values.tolist()):
                    w.add_scalar("loss", v, s)
                    w.add_scalar("learning-rate", LEARNING_RATE.get(name, 1e-4), s)
                w.close()
else:
    import mindspore as ms
    import numpy as np
    from mindspore import Tensor
    from mindspore.train.summary import SummaryRecord

    ms.set_context(mode=ms.PYNATIVE_MODE)
    ms.set_device("CPU")
    for name, (writer, make, _expect) in SCENARIOS.items():
        if writer != "ms":
            continue
        for rank, segments in make().items():
            for steps, values in segments:
                with SummaryRecord(os.path.join(out, name, f"rank_{rank}")) as rec:
                    for s, v in zip(steps.tolist(), values.tolist()):
                        rec.add_value("scalar", "loss", Tensor(np.float32(v)))
                        rec.record(s)
print("wrote", out)
