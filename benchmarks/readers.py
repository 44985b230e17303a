"""Read one file with one tool and report what it kept (run as a child process).

    python readers.py TOOL PATH   ->  one JSON line: tool, points, seconds, rss_before_mb, rss_peak_mb

Each tool runs in the environment it needs (MindInsight needs protobuf <= 3.20.1,
TensorBoard and tbparse their own packages), so only the standard library and
the tool itself are imported here.  The time covers reading only, not imports.
"""

import json
import resource
import struct
import sys
import time


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def floor(path):
    """The least a Python reader can do: walk the frames and check both CRCs with crc32c."""
    from crc32c import crc32c

    def masked(c):
        return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF

    def run():
        data = open(path, "rb").read()
        pos, n, end = 0, 0, len(data)
        unpack = struct.unpack_from
        while pos + 12 <= end:
            (length,) = unpack("<Q", data, pos)
            (head_crc,) = unpack("<I", data, pos + 8)
            if masked(crc32c(data[pos : pos + 8])) != head_crc:
                raise ValueError("header crc")
            payload = data[pos + 12 : pos + 12 + length]
            (crc,) = unpack("<I", data, pos + 12 + length)
            if masked(crc32c(payload)) != crc:
                raise ValueError("payload crc")
            pos += 16 + length
            n += 1
        return n  # records, not points: it decodes nothing

    return run


def floor_tree(path):
    """:func:`floor` over every event file under a directory, one after the other in this process."""
    import os

    files = sorted(os.path.join(d, f) for d, _, names in os.walk(path) for f in names if "tfevents" in f or "_MS" in f)

    def run():
        return sum(floor(f)() for f in files)

    return run


def msnb_reader(path):
    import msnb
    import msnb.events  # noqa: F401  (import outside the timed region, like the other tools)

    def run():
        r = msnb.read(path)
        if r.problems:
            raise RuntimeError(r.problems)
        return len(r.scalars) + len(r.histograms)

    return run


def summary_pb2_loop(path):
    """A plain loop over MindSpore's own generated classes (pure-Python protobuf in a MindSpore process)."""
    from mindspore.train import summary_pb2

    def run():
        data = open(path, "rb").read()
        pos, points = 0, []
        while pos + 12 <= len(data):
            (length,) = struct.unpack_from("<Q", data, pos)
            ev = summary_pb2.Event()
            ev.ParseFromString(data[pos + 12 : pos + 12 + length])
            for v in ev.summary.value:
                kind = v.WhichOneof("value")
                if kind == "scalar_value":
                    points.append((v.tag, ev.step, v.scalar_value))
                elif kind == "histogram":
                    points.append((v.tag, ev.step, [(b.left, b.width, b.count) for b in v.histogram.buckets]))
            pos += 16 + length
        return len(points)

    return run


def mindinsight_loader(path):
    """MindInsight 2.3.1's MSDataLoader with its defaults (it keeps 1,000 points a tag)."""
    import os

    from mindinsight.datavisual.data_transform.ms_data_loader import MSDataLoader

    summary_dir = os.path.dirname(path)

    def run():
        loader = MSDataLoader(summary_dir)
        loader.load()
        events = loader.get_events_data()
        n = 0
        for plugin in ("scalar", "histogram"):
            try:
                tags = events.list_tags_by_plugin(plugin)
            except KeyError:  # MindInsight raises for a plugin with no data
                continue
            for tag in tags:
                n += len(events.tensors(tag))
        return n

    return run


def event_accumulator(path):
    """TensorBoard's EventAccumulator, told to keep every scalar (size_guidance 0)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    def run():
        ea = EventAccumulator(path, size_guidance={"scalars": 0, "histograms": 0})
        ea.Reload()
        return sum(len(ea.Scalars(t)) for t in ea.Tags()["scalars"])

    return run


def tbparse_reader(path):
    from tbparse import SummaryReader

    def run():
        return len(SummaryReader(path).scalars)

    return run


TOOLS = {
    "msnb": msnb_reader,
    "floor": floor,
    "floor_tree": floor_tree,
    "summary_pb2": summary_pb2_loop,
    "mindinsight": mindinsight_loader,
    "event_accumulator": event_accumulator,
    "tbparse": tbparse_reader,
}

if __name__ == "__main__":
    tool, path = sys.argv[1], sys.argv[2]
    run = TOOLS[tool](path)
    before = rss_mb()
    t0 = time.perf_counter()
    points = run()
    seconds = time.perf_counter() - t0
    print(json.dumps({"tool": tool, "points": points, "seconds": seconds, "rss_before_mb": before, "rss_peak_mb": rss_mb()}))
