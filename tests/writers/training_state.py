"""Runs monitored by mindformers' TrainingStateMonitor, with a fault injected, in mindformers' layout.

Usage: python training_state.py OUT_DIR
Writes (each run with its truth in OUT/expected.json):
  OUT/fault/tensorboard/rank_{0..7}/events.out.tfevents.*    8 ranks x 201 parameters x 2,000 steps (step_interval 20), a fault
  OUT/healthy/tensorboard/rank_{0..7}/...                    8 ranks x 60 parameters, noise and an lr warm-up only
  OUT/small/tensorboard/rank_{0,1}/... (+ max_attention_logit/<param>/head_<i>/ folders)   tensorboardX's SummaryWriter
  OUT/small/log/worker_0.log, OUT/small/output/log/rank_1/info.log                      the same values as log lines
  OUT/spike/output/abnormal_global_norm.json

What mindformers 1.9 writes, and where this follows it (mindformers/core/callback/callback.py):
- TrainingStateMonitor._to_tensorboard (lines 1483-1490): ``add_scalar(tag, data, global_step)``, or
  ``add_scalars(tag, {"head_<i>": v})`` for dict data, which tensorboardX writes to ``rank_N/<tag>/head_<i>``.
- _dump_data_in_step (1354-1399): ``local_norm/<param>`` and ``device_local_norm`` every ``step_interval`` steps;
  _dump_local_loss (1401-1409): ``local_<loss>_loss`` (tensorboard, mean over micro-batches) and one
  ``micro_local_<loss>_loss`` log line per micro-batch; _dump_max_attention_logit (1411-1439):
  ``max_attention_logit/<param>`` (a list in the log, heads ``head_<tp_id * n + i>`` in TensorBoard) and
  ``max_attention_logit/mean`` / ``/max``; _calc_weight_state (1078-1083): ``weight_norm``;
  _calc_device_local_loss (1091-1096): ``device_accum_local_<loss>_loss``; _calc_throughput_linearity (1085-1089).
- _to_log (1492-1499): ``logger.info("Epoch:[%3d/%3d], step:[%5d/%5d] %s: %s", epoch, origin_epochs, step,
  steps_per_epoch, tag, data)``; mindformers/tools/logger.py lines 39-41 give the prefixes:
  file ``[%(levelname)s] %(asctime)s [%(filepath)s:%(lineno)d] %(funcName)s: %(message)s``,
  stdout ``%(asctime)s - %(name)s[%(filepath)s:%(lineno)d] - %(levelname)s - %(message)s``.
- MFLossMonitor (callback.py 747-794): per step ``loss``, ``learning-rate``, ``loss-scale``, ``grad-norm`` to
  TensorBoard and the ``{ Epoch:[...], step:[...], loss:[x/avg], per_step_time: ...`` log line.
- abnormal_global_norm_check (1012-1051): ``{"<step>": [global_norm, ...]}`` in ``abnormal_global_norm.json``.

Speed: this protobuf is the pure-Python one (about 200 us an event), so the two large runs are framed here:
each tag's event is serialised once by tensorboardX's own ``Event``/``Summary`` classes and only its step,
wall time and value fields are re-encoded per point; a sample of points is checked byte for byte against
tensorboardX's serialisation, and the file's first record is tensorboardX's ``EventsWriter``'s own.  The
small run is written by ``SummaryWriter`` itself, call for call as mindformers makes them.
"""

import json
import logging
import math
import os
import struct
import sys

import numpy as np
from tensorboardX import SummaryWriter
from tensorboardX.event_file_writer import EventsWriter
from tensorboardX.proto.event_pb2 import Event
from tensorboardX.proto.summary_pb2 import Summary
from tensorboardX.record_writer import masked_crc32c

WALL0 = 1_750_000_000.0
STEP_TIME = 0.5


def param_names(layers: int) -> list[str]:
    """A llama-like model's parameters, as mindformers names them (201 for 22 layers)."""
    names = ["model.tok_embeddings.embedding_weight"]
    for i in range(layers):
        p = f"model.layers.{i}."
        names += [p + s for s in ("attention.wq.weight", "attention.wk.weight", "attention.wv.weight", "attention.wo.weight")]
        names += [p + s for s in ("feed_forward.w1.weight", "feed_forward.w2.weight", "feed_forward.w3.weight")]
        names += [p + "attention_norm.weight", p + "ffn_norm.weight"]
    return names + ["model.norm_out.weight", "lm_head.weight"]


def simulate(ranks, params, steps, interval, seed, fault=None):
    """Values of one run: per-parameter gradient norms every *interval* steps, trainer scalars every step.

    fault: dict(rank, param, grow_from, nan_at, rate): that parameter's norm on that rank grows
    exponentially from ``grow_from``, is NaN from ``nan_at``; the rank's loss follows as the norm grows and
    is NaN the step after; grad-norm (all-reduced) is NaN on every rank from then on; that rank's other
    parameters are NaN at the next interval, every rank's one interval later.
    """
    rng = np.random.default_rng(seed)
    n_p = len(params)
    s = np.arange(1, steps + 1)
    lr = 3e-4 * np.minimum(1.0, s / 200) * (0.55 + 0.45 * np.cos(np.pi * s / steps))  # warm-up, cosine decay
    warm = 1.0 + 2.0 * np.exp(-s / 300.0)  # gradient norms fall as training settles
    base = np.exp(rng.normal(-3.0, 0.8, n_p))
    norm_steps = s[interval - 1 :: interval]
    ln = base[None, :, None] * warm[None, None, norm_steps - 1] * (1 + 0.05 * rng.standard_normal((ranks, n_p, norm_steps.size)))
    # the per-step norms behind grad-norm (not written per step; only their sum is)
    total_sq = (base**2).sum() * warm**2
    loss = 2.0 + 8.0 * np.exp(-s / 400.0)
    losses = loss[None, :] * (1 + 0.01 * rng.standard_normal((ranks, steps)))
    grad_norm = np.sqrt(total_sq) * (1 + 0.02 * rng.standard_normal(steps))
    grad = np.repeat(grad_norm[None, :], ranks, axis=0)
    if fault:
        r, p = fault["rank"], params.index(fault["param"])
        g0, nan_at, rate = fault["grow_from"], fault["nan_at"], fault["rate"]
        factor = np.where(s >= g0, np.exp(rate * (s - g0)), 1.0)
        sel = norm_steps >= g0
        ln[r, p, sel] *= factor[norm_steps[sel] - 1]
        extra = (base[p] * warm) ** 2 * (factor**2 - 1)
        grad = np.repeat((np.sqrt(total_sq + extra) * (1 + 0.02 * rng.standard_normal(steps)))[None, :], ranks, axis=0)
        losses[r] += 0.3 * np.log(factor)  # the rank's loss climbs with the norm
        ln[r, p, norm_steps >= nan_at] = np.nan
        losses[r, s >= nan_at + 1] = np.nan
        grad[:, s >= nan_at + 1] = np.nan
        after = norm_steps[norm_steps >= nan_at + 1]
        if after.size:
            ln[r, :, norm_steps >= after[0]] = np.nan
            if after.size > 1:
                ln[:, :, norm_steps >= after[1]] = np.nan
    return {"steps": s, "lr": lr, "norm_steps": norm_steps, "local_norm": ln, "loss": losses, "grad": grad}


# ---------------------------------------------------------------- fast framing, checked against tensorboardX


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _event_bytes(tag_bytes: bytes, step: int, wall: float, value: float) -> bytes:
    """Event{wall_time=1, step=2, summary=5{value=1{tag=1, simple_value=2}}}, fields in number order as protobuf writes them."""
    v = b"\x0a" + _varint(len(tag_bytes)) + tag_bytes + (b"\x15" + struct.pack("<f", value) if value != 0 else b"")
    summ = b"\x0a" + _varint(len(v)) + v
    return b"\x09" + struct.pack("<d", wall) + (b"\x10" + _varint(step) if step else b"") + b"\x2a" + _varint(len(summ)) + summ


def _frame(data: bytes) -> bytes:
    header = struct.pack("<Q", len(data))
    return header + struct.pack("<I", masked_crc32c(header)) + data + struct.pack("<I", masked_crc32c(data))


class FastEvents:
    """One rank's event file: tensorboardX's EventsWriter writes the name and version record, points follow."""

    def __init__(self, logdir: str, checks: list):
        os.makedirs(logdir, exist_ok=True)
        w = EventsWriter(os.path.join(logdir, "events"))
        w.close()
        self.path = w._file_name
        self.buf = bytearray()
        self.checks = checks

    def add(self, tag: str, steps, values) -> None:
        tb = tag.encode()
        for step, value in zip(steps.tolist(), np.asarray(values, dtype=np.float32).tolist()):
            wall = WALL0 + step * STEP_TIME
            data = _event_bytes(tb, step, wall, value)
            if len(self.checks) < 400 and (step % 97 == 0 or not math.isfinite(value)):
                self.checks.append((data, tag, step, wall, value))
            self.buf += _frame(data)

    def close(self) -> None:
        with open(self.path, "ab") as f:
            f.write(self.buf)


def check_against_tensorboardx(checks) -> None:
    for data, tag, step, wall, value in checks:
        ref = Event(wall_time=wall, step=step, summary=Summary(value=[Summary.Value(tag=tag, simple_value=value)])).SerializeToString()
        assert data == ref, f"framing differs from tensorboardX for {tag} at {step}"


def write_fast_run(root: str, sim: dict, params: list[str], checks: list) -> None:
    ranks = sim["local_norm"].shape[0]
    for r in range(ranks):
        ev = FastEvents(os.path.join(root, "tensorboard", f"rank_{r}"), checks)
        s, ns = sim["steps"], sim["norm_steps"]
        for tag, vals in (("loss", sim["loss"][r]), ("grad-norm", sim["grad"][r]), ("learning-rate", sim["lr"]), ("loss-scale", np.full(s.size, 65536.0))):
            ev.add(tag, s, vals)
        ev.add("device_local_norm", ns, np.sqrt(np.nansum(sim["local_norm"][r] ** 2, axis=0)) + np.where(np.isnan(sim["local_norm"][r]).any(axis=0), np.nan, 0))
        ev.add("local_lm_loss", ns, sim["loss"][r][ns - 1])
        for i, name in enumerate(params):
            ev.add(f"local_norm/{name}", ns, sim["local_norm"][r, i])
        ev.close()


# ---------------------------------------------------------------- the small run: SummaryWriter and the logger


def _log_line(formatter: logging.Formatter, message: str, args: tuple, created: float, lineno: int, func: str) -> str:
    rec = logging.makeLogRecord(
        {
            "name": "mindformers",
            "levelname": "INFO",
            "levelno": logging.INFO,
            "msg": message,
            "args": args,
            "created": created,
            "msecs": (created % 1) * 1000,
            "lineno": lineno,
            "funcName": func,
            "filepath": "mindformers/core/callback/callback.py",
        }
    )
    return formatter.format(rec)


FILE_FORMAT = "[%(levelname)s] %(asctime)s [%(filepath)s:%(lineno)d] %(funcName)s: %(message)s"
STDOUT_FORMAT = "%(asctime)s - %(name)s[%(filepath)s:%(lineno)d] - %(levelname)s - %(message)s"


def write_small_run(root: str, seed: int = 3) -> dict:
    """2 ranks x 4 parameters x 300 steps, every call as TrainingStateMonitor and MFLossMonitor make it."""
    params = [
        "model.layers.0.attention.wq.weight",
        "model.layers.0.attention.wk.weight",
        "model.layers.1.feed_forward.w1.weight",
        "model.layers.10.attention.wq.weight",
    ]
    steps, interval, per_epoch = 300, 2, 150
    fault = {"rank": 1, "param": params[3], "grow_from": 200, "nan_at": 260, "rate": 0.08}
    sim = simulate(2, params, steps, interval, seed, fault)
    rng = np.random.default_rng(seed + 1)
    heads = 3 + 0.1 * rng.standard_normal((2, steps, 2))
    formats = [logging.Formatter(STDOUT_FORMAT), logging.Formatter(FILE_FORMAT)]
    log_paths = [os.path.join(root, "log", "worker_0.log"), os.path.join(root, "output", "log", "rank_1", "info.log")]
    for r in range(2):
        w = SummaryWriter(os.path.join(root, "tensorboard", f"rank_{r}"))
        lines = []

        def to_log(tag, data, step, r=r, lines=lines):
            epoch, in_epoch = (step - 1) // per_epoch + 1, (step - 1) % per_epoch + 1
            msg = "Epoch:[%3d/%3d], step:[%5d/%5d] %s: %s"
            lines.append(_log_line(formats[r], msg, (epoch, steps // per_epoch, in_epoch, per_epoch, tag, data), WALL0 + step * STEP_TIME, 1496, "_to_log"))

        for step in range(1, steps + 1):
            loss, gn, lr = float(sim["loss"][r, step - 1]), float(sim["grad"][r, step - 1]), float(sim["lr"][step - 1])
            epoch, in_epoch = (step - 1) // per_epoch + 1, (step - 1) % per_epoch + 1
            mf = (
                "{ Epoch:[%3d/%3d], step:[%5d/%5d], "
                + f"loss:[{loss:5.6f}/{loss:5.6f}], "
                + "per_step_time: %dms, lr: %s, overflow cond: %s, loss_scale: %s, global_norm: %s%s"
            )
            lines.append(
                _log_line(
                    formats[r], mf, (epoch, 2, in_epoch, per_epoch, 500, lr, False, 1.0, f"[{gn}]", ""), WALL0 + step * STEP_TIME, 747, "print_output_info"
                )
            )
            w.add_scalar("learning-rate", lr, global_step=step)
            w.add_scalar("loss", loss, global_step=step)
            w.add_scalar("grad-norm", gn, global_step=step)
            if step % interval == 0:
                k = step // interval - 1
                for i, name in enumerate(params):
                    v = float(sim["local_norm"][r, i, k])
                    w.add_scalar(f"local_norm/{name}", v, global_step=step)
                    to_log(f"local_norm/{name}", np.float32(v), step)
                h = heads[r, step - 1]
                w.add_scalars("max_attention_logit/model.layers.0.attention", {f"head_{i}": float(x) for i, x in enumerate(h)}, global_step=step)
                to_log("max_attention_logit/model.layers.0.attention", [float(x) for x in h], step)
                for tag, v in (("max_attention_logit/mean", float(h.mean())), ("max_attention_logit/max", float(h.max()))):
                    w.add_scalar(tag, v, global_step=step)
                    to_log(tag, v, step)
                for micro in range(2):
                    to_log("micro_local_lm_loss", np.float32(loss + 0.001 * micro), step)
                w.add_scalar("local_lm_loss", loss + 0.0005, global_step=step)
        w.close()
        os.makedirs(os.path.dirname(log_paths[r]), exist_ok=True)
        with open(log_paths[r], "w") as f:
            f.write("\n".join(lines) + "\n")
    return {"ranks": 2, "params": params, "steps": steps, "interval": interval, "fault": fault}


def main(out: str) -> None:
    checks: list = []
    expected = {}
    params = param_names(22)
    fault = {"rank": 5, "param": "model.layers.12.attention.wq.weight", "grow_from": 1200, "nan_at": 1400, "rate": 0.03}
    write_fast_run(os.path.join(out, "fault"), simulate(8, params, 2000, 20, 0, fault), params, checks)
    expected["fault"] = {"ranks": 8, "params": len(params), "steps": 2000, "interval": 20, "fault": fault}
    healthy = param_names(7)[:60]
    write_fast_run(os.path.join(out, "healthy"), simulate(8, healthy, 2000, 10, 1), healthy, checks)
    expected["healthy"] = {"ranks": 8, "params": len(healthy), "steps": 2000, "interval": 10, "fault": None}
    check_against_tensorboardx(checks)
    expected["small"] = write_small_run(os.path.join(out, "small"))
    spike = os.path.join(out, "spike", "output")
    os.makedirs(spike, exist_ok=True)
    with open(os.path.join(spike, "abnormal_global_norm.json"), "w", encoding="utf-8") as f:
        json.dump({"300": [12.5], "600": [41.0, 42.5]}, f)  # as abnormal_global_norm_check writes it
    expected["spike"] = {"steps": [300, 600]}
    expected["checked_events"] = len(checks)
    with open(os.path.join(out, "expected.json"), "w") as f:
        json.dump(expected, f)
    print("wrote", out)


if __name__ == "__main__":
    main(os.path.abspath(sys.argv[1]))
