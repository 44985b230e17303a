"""The smoke's child for a mindformers run YAML: the config's own model through mindformers' Trainer, then exit.

    python -m msnb.smoke.mindformers.worker SPEC.json

Runs in the scratch directory (mindformers writes ``./output/log`` wherever
it is imported), never in the user's kernel.  In order: the CPU rehearsal when
training on CPU (:mod:`msnb.smoke.mindformers.cpu_rehearsal`), ``MindFormerConfig`` on the
user's own file (so what trains is what mindformers builds from it: its
base_config handling, its template, ``${}`` left as mindformers leaves it),
then exactly the plan's changes applied on that object (:mod:`msnb.smoke.
mindformers.plan`: shrink, rehearse, isolate), ``build_context`` as
mindformers' own launcher does, the dataset (synthetic, or the config's own),
then ``Trainer(args=config, train_dataset=...).train()`` with the config's
callbacks plus msnb's step timer.

What ran is written to ``rehearsal.json`` (with every key where mindformers'
reading differed from msnb's plan). A failure leaves ``failure.json``: the
stage, one line, and whose it is (``config``: the run would fail the same way
on Ascend; ``kernel``: an operator with no CPU kernel; ``msnb``: msnb's own
code failed), so the verdict says it in one line while the log keeps the
traceback.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import signal
import subprocess
import sys
import time
import traceback
from pathlib import Path

import numpy as np

from ...fullsize.import_guards import guard_deepseek_v4_import
from ...processes import set_parent_death_signal


def synthetic_dataset(columns: list, seq: int, vocab: int, batch: int, samples: int, seed: int = 0, model_shifts: bool = False):
    """Token ids with exactly the columns the config's dataset gives, following a pattern a model can learn.

    Each sample counts upward from a random start (modulo the vocabulary, above
    the three special ids), so the next token is predictable: a model that
    trains sees its loss fall, one that does not (learning rate 0, frozen
    weights) does not.  A config whose only column is ``input_ids`` gets
    ``seq + 1`` tokens (the model shifts them into labels itself); so does every
    token column of a model that shifts its inputs itself (``model_shifts``: legacy
    LLaMA without ``input_sliced_sig`` cuts ``input_ids[:, :-1]`` and
    ``labels[:, 1:]``, so both are the same seq + 1 tokens); otherwise ``labels``
    are the next tokens, ``loss_mask`` ones, ``position_ids`` 0..seq-1 and
    ``attention_mask`` causal (1 = masked, as mindformers' Megatron loader).
    """
    from mindspore.dataset import GeneratorDataset  # deferred: MindSpore (the mindspore extra)

    span = max(2, int(vocab) - 3)
    rng = np.random.default_rng(seed)
    only_ids = list(columns) == ["input_ids"]

    def rows():
        for _ in range(samples):
            tokens = (3 + (rng.integers(0, span) + np.arange(seq + 1)) % span).astype(np.int32)
            row = {
                "input_ids": tokens if only_ids or model_shifts else tokens[:-1],
                "labels": tokens if model_shifts else tokens[1:],
                "loss_mask": np.ones(seq + 1 if model_shifts else seq, np.int32),
                "position_ids": np.arange(seq, dtype=np.int32),
                "attention_mask": np.triu(np.ones((1, seq, seq), np.int32), 1),
            }
            yield tuple(row[c] if c in row else np.zeros(seq, np.int32) for c in columns)

    return GeneratorDataset(rows, column_names=list(columns), shuffle=False).batch(batch, drop_remainder=True)


def _mindrecord_files(path: str) -> list:
    """A MindRecord dataset_dir as mindformers takes it: one file, or every ``*.mindrecord`` file of a folder."""
    if os.path.isdir(path):
        return sorted(os.path.join(path, n) for n in os.listdir(path) if n.endswith(".mindrecord"))
    return [path]


def trained_window(columns: list, seq_before: int, seq_after: int):
    """A function that cuts one row's columns to the same window of ``seq_after`` tokens, one that holds trained tokens.

    A finetune row is a prompt (``loss_mask`` 0, or ``labels`` -100) then the answer: its first ``seq_after`` tokens
    are often all prompt, a loss of 0 that cannot fall. The window starts half a window before the row's first
    trained token (``loss_mask`` above 0, else ``labels`` of 0 or more; a row with neither column is trained from
    its start), within the row. Every column is cut there alike, keeping its offset from the config's sequence
    length (rows of ``seq_length + 1`` tokens become ``seq_after + 1``); a square ``seq x seq`` column (an attention
    mask) is cut in both dimensions; ``position_ids`` count from 0 at the window's start until the next document.
    """
    names = list(columns)
    marker = "loss_mask" if "loss_mask" in names else ("labels" if "labels" in names else None)

    def start_of(row: dict) -> int:
        if marker is None:
            return 0
        x = np.asarray(row[marker]).reshape(-1)[:seq_before]
        trained = np.flatnonzero(x > 0 if marker == "loss_mask" else x >= 0)
        if trained.size == 0:
            return 0
        return int(min(max(0, int(trained[0]) - seq_after // 2), max(0, seq_before - seq_after)))

    def cut(*arrays):
        row = dict(zip(names, (np.asarray(a) for a in arrays)))
        first = start_of(row)
        out = []
        for name, x in row.items():
            if x.ndim == 0:
                out.append(x)
                continue
            n = seq_after + max(0, x.shape[-1] - seq_before)
            if x.ndim >= 2 and x.shape[-1] == x.shape[-2]:
                x = x[..., first : first + n, first : first + n]
            else:
                x = x[..., first : first + n]
            if name == "position_ids" and x.ndim == 1 and first and x.size:
                x = x.copy()
                run = np.flatnonzero(np.diff(x) != 1)  # where the document the window starts in ends
                stop = int(run[0]) + 1 if run.size else x.size
                x[:stop] -= x[0]
            out.append(np.ascontiguousarray(x))
        return tuple(out)

    return cut


def sliced_mindrecord(files: list, columns: list, seq_before: int, seq_after: int, batch: int, samples: int):
    """The config's own MindRecord rows, every column of a row cut to the same window of the shrunk sequence.

    The window holds the row's trained tokens where it has any (:func:`trained_window`).
    """
    from mindspore.dataset import MindDataset  # deferred: MindSpore (the mindspore extra)

    ds = MindDataset(files, columns_list=list(columns), shuffle=False, num_samples=samples)
    ds = ds.map(operations=trained_window(columns, seq_before, seq_after), input_columns=list(columns), output_columns=list(columns))
    return ds.batch(batch, drop_remainder=True)


def _model_shifts(config) -> bool:
    """Whether the legacy model cuts its inputs itself (LLaMA without input_sliced_sig: input_ids[:, :-1], labels[:, 1:])."""
    mc = config.model.model_config
    arch = getattr(config.model, "arch", None)
    names = f"{getattr(mc, 'type', '') or ''} {getattr(arch, 'type', '') if arch else ''}".lower()
    return "llama" in names and not getattr(mc, "input_sliced_sig", False)


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:400]}" if text else type(exc).__name__


MSNB_DIR = str(Path(__file__).resolve().parent.parent) + os.sep  # msnb's own package: a frame there is msnb's code
# MindSpore's words for an operator the CPU backend has no kernel for (2.9/2.10)
_NO_KERNEL = (
    re.compile(r"Unsupported op \[([A-Za-z0-9_]{1,80})\] on CPU"),
    # a CPU kernel that exists but not for this dtype (BFloat16 where the config's class default is bfloat16)
    re.compile(r"Select CPU operator\[([A-Za-z0-9_]{1,80})\] fail! Unsupported data type"),
    re.compile(r"The kernel ([A-Za-z0-9_]{1,80}) unregistered"),  # PyNative's pyboost SelectKernel
    re.compile(r"Cannot find backend kernel for cnode:?\s{0,4}([A-Za-z0-9_./-]{0,120})"),
    re.compile(r"(?:kernel|operator|op)\s{1,4}\[?([A-Za-z0-9_]{1,80})\]?\s{1,4}(?:is\s{1,4})?not\s{1,4}(?:supported|registered)\s{1,4}on\s{1,4}CPU", re.I),
)


class ConfigFault(Exception):
    """The user's config is at fault in a way mindformers would only say deep inside (an unregistered model type)."""


def classify(exc: BaseException) -> tuple[str, str | None]:
    """Whose failure *exc* is: ``("msnb", None)``, ``("kernel", name)`` or ``("config", None)``.

    A frame of msnb's own code below the point where mindformers took over (a replaced kernel, the worker's own
    preparation) makes it msnb's; MindSpore's "no CPU kernel" words make it a kernel msnb cannot rehearse; anything
    else happened inside mindformers or MindSpore on the user's config, as it would on Ascend.
    """
    if isinstance(exc, ConfigFault):
        return "config", None
    text = str(exc)[:20000]
    for pattern in _NO_KERNEL:
        found = pattern.search(text)
        if found:
            return "kernel", found.group(1) or None
    frames = traceback.extract_tb(exc.__traceback__)
    outside = [f for f in frames if not f.filename.startswith(MSNB_DIR)]
    if frames and frames[-1].filename.startswith(MSNB_DIR):
        return "msnb", None  # raised in msnb's own code (the worker, a replaced kernel, the step timer)
    if outside and any(f.filename.startswith(MSNB_DIR) for f in frames[frames.index(outside[0]) :]):
        return "msnb", None  # mindformers called into msnb's code (a replaced kernel) on the way down
    if MSNB_DIR in text:  # a graph-compile error naming msnb's source (MindSpore prints the construct's file)
        return "msnb", None
    return "config", None


def apply_overrides(config, overrides: list) -> list:
    """Apply the plan's changes on mindformers' own config object; return where mindformers' reading differed from msnb's.

    A change whose parent section mindformers does not have (it dropped or never read it) is not applied: adding
    it would train something mindformers would not build. Each difference is one line for the verdict.
    """
    differences = []
    for item in overrides:
        path = item["path"]
        node = config
        missing = None
        for depth, part in enumerate(path[:-1]):
            if isinstance(node, dict):
                if part not in node or node[part] is None:
                    if item.get("before") is not None:
                        missing = ".".join(str(p) for p in path[: depth + 1])
                        break
                    node[part] = type(config)() if depth == 0 else {}
                node = node[part]
            elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
                node = node[part]
            else:
                missing = ".".join(str(p) for p in path[: depth + 1])
                break
        key = ".".join(str(p) for p in path)
        if missing is None and not isinstance(node, (dict, list)):
            missing = ".".join(str(p) for p in path[:-1]) + " as a section (it holds a value)"
        if missing is not None:
            differences.append(f"{key}: not applied, mindformers' config has no {missing} (msnb read it in the YAML)")
            continue
        last = path[-1]
        had = isinstance(node, dict) and last in node
        current = node.get(last) if isinstance(node, dict) else (node[last] if isinstance(node, list) and isinstance(last, int) and last < len(node) else None)
        if item.get("before") is not None and had and current != item["before"]:
            differences.append(f"{key}: mindformers reads {current!r}, msnb read {item['before']!r} in the YAML")
        if item.get("delete"):
            if had:
                del node[last]
        elif isinstance(node, (dict, list)):
            node[last] = item["value"]
    return differences


def check_model_type(config, legacy: bool) -> None:
    """An architecture mindformers has not registered fails in one line, naming the closest registered names."""
    from mindformers.tools.register import MindFormerRegister  # deferred: mindformers (the child only)

    registry = MindFormerRegister.registry
    if legacy:
        arch = config.model.get("arch") if isinstance(config.model, dict) else None
        name = arch.get("type") if isinstance(arch, dict) else None
        # the new-architecture classes register as mcore_<Name>: a legacy config cannot name them
        known, key = sorted(n for n in registry.get("models", {}) if not n.startswith("mcore_")), "model.arch.type"
    else:
        name = config.model.model_config.get("model_type")
        known = sorted({getattr(c, "model_type", None) for c in registry.get("config", {}).values()} - {None, ""})
        key = "model.model_config.model_type"
    if not isinstance(name, str) or not name or name in known:
        return
    close = difflib.get_close_matches(name, known, n=3, cutoff=0.4) or known[:3]
    raise ConfigFault(f"{key} {name!r} is not registered in this mindformers (closest: {', '.join(close)})")


def _start_preflight(spec: dict):
    """The pre-flight's child, started before this process imports mindformers (the two imports overlap); None when not asked."""
    if spec.get("preflight") is None:
        return None
    workdir = os.path.join(spec["workdir"], "preflight")
    os.makedirs(workdir, exist_ok=True)
    run = {"workdir": workdir, "config": spec["config"], "devices": spec["preflight"].get("devices"), "per_node": spec["preflight"].get("per_node")}
    with open(os.path.join(workdir, "spec.json"), "w") as f:
        json.dump({"workdir": workdir, "runs": [run]}, f)
    with open(os.path.join(workdir, "preflight.log"), "wb") as log:  # the child holds its own copy of the file
        return subprocess.Popen(
            [sys.executable, "-m", "msnb.fullsize.child", os.path.join(workdir, "spec.json")], cwd=workdir, stdout=log, stderr=subprocess.STDOUT
        )


def _memory_check(spec: dict) -> dict:
    """The smoke's pre-flight judges the per-card memory too: against the card named, else the config's
    context.max_device_memory, else "not checked" (:func:`msnb.fullsize.memory.memory_check`)."""
    from ...fullsize.memory import memory_check  # deferred: the memory table, only where a pre-flight runs

    told = spec["preflight"]
    try:
        return memory_check(spec["config"], devices=told.get("devices"), card_gb=told.get("card_gb"), card=told.get("card"))[1]
    except Exception as exc:  # msnb's own error: said as such, never the config's finding
        traceback.print_exc()
        return {
            "check": "per-card memory (msnb's estimate at full size)",
            "outcome": "msnb error",
            "message": f"{type(exc).__name__}: {exc}"[:500],
            "traceback": traceback.format_exc()[-4000:],
        }


def _preflight_first(spec: dict, proc) -> None:
    """The pre-flight on the unshrunk config, in a child process of its own: a finding stops the smoke here.

    Its own process, because building the full-size network sets process-wide state (MindSpore's contexts, the
    communication stand-in, mindformers' parallel groups) that the shrunk training must not inherit. What it found goes
    to ``preflight.json`` for the verdict; a finding is the config's (the full-size job would die on it at startup),
    so it raises :class:`ConfigFault` before anything is shrunk or trained. msnb's own failure in the pre-flight is
    written as such and never blamed on the config: the smoke goes on.
    """
    # deferred: the pre-flight's words, only for a mindformers smoke
    from ...fullsize.child import FAILED

    workdir = os.path.join(spec["workdir"], "preflight")
    started = time.monotonic()
    code = proc.wait()
    try:
        with open(os.path.join(workdir, "preflight.json")) as f:
            said = json.load(f)[0]
    except (OSError, ValueError, IndexError):
        said = {"error": f"the pre-flight's child wrote no result (exit status {code})"}
    said.setdefault("checks", []).append(_memory_check(spec))
    said["seconds"] = round(time.monotonic() - started, 3)  # what waiting for the pre-flight added to the smoke (benchmarks/smoke_sweep.py)
    with open(os.path.join(spec["workdir"], "preflight.json"), "w") as f:
        json.dump(said, f, default=str)
    failed = [c for c in said.get("checks", []) if c.get("outcome") == FAILED]
    if failed:
        first = failed[0]
        more = f" (and {len(failed) - 1} more)" if len(failed) > 1 else ""
        by = f"mindformers' {first['check']}, raised at {first['source']}" if first.get("source") else f"msnb's {first['check']}"
        raise ConfigFault(f"{' '.join(str(first.get('message')).split())} ({by}){more}")


def main(spec_path: str) -> int:
    set_parent_death_signal(signal.SIGKILL)  # the guard gone: so is the training
    with open(spec_path) as f:
        spec = json.load(f)
    workdir = spec["workdir"]
    os.chdir(workdir)  # mindformers' ./output/log lands in the scratch directory
    failure = os.path.join(workdir, "failure.json")
    stage = "importing mindformers"
    rank = 0
    made, reached, said = [], None, {}  # the CPU replacements made; cpu_rehearsal.reached once imported; rehearsal.json's content
    preflight = _start_preflight(spec)  # its child imports mindformers while this process does
    try:
        guarded = guard_deepseek_v4_import()  # before mindformers: its 2.0 import needs hyper_parallel otherwise
        # deferred until the death signal is armed, and inside the try (a failure is this stage's line): mindformers, MindSpore
        import mindformers
        from mindformers import MindFormerConfig, Trainer, build_context

        from ...monitor import current_rank
        from ..shared.step_callbacks import StepTimer, StopAt
        from .cpu_rehearsal import apply, reached

        if spec["device"] == "CPU":
            stage = "replacing Ascend-only kernels (CPU rehearsal)"
            made = apply(legacy=bool(spec.get("legacy")), family=spec.get("mindformers_model") or "", pynative=spec.get("mode") == "pynative")
        stage = "loading the config (MindFormerConfig)"
        config = MindFormerConfig(spec["config"])  # the user's own file, read as mindformers reads it
        stage = "checking the model type"  # the registry's names, before the pre-flight builds the full-size model from them
        check_model_type(config, bool(spec.get("legacy")))
        if spec.get("preflight") is not None:
            stage = "the pre-flight at full size (mindformers' own startup checks)"
            _preflight_first(spec, preflight)
        stage = "applying the smoke's changes to mindformers' config"
        differences = apply_overrides(config, spec["overrides"])
        # every replacement made, until the network is built: then those it used (below)
        said = {"mindformers": getattr(mindformers, "__version__", "?"), "replaced": [guarded] * bool(guarded) + [line for _, line in made]}
        said["differences"] = differences
        _write_rehearsal(workdir, said)
        stage = "building the context (build_context)"
        build_context(config)  # with use_parallel, this initialises the communication msrun set up
        rank, world = current_rank()
        rank = rank or 0
        if world > 1:
            failure = os.path.join(workdir, f"failure_rank{rank}.json")
        dataset = None
        if spec["data"] == "synthetic":
            stage = "making the synthetic dataset"
            seq, vocab = int(spec["seq"]), int(spec["vocab"])
            batch = int(config.runner_config.batch_size)
            shifts = bool(spec.get("legacy")) and _model_shifts(config)
            dataset = synthetic_dataset(
                spec["columns"], seq, vocab, batch, samples=int(spec["steps"]) * batch, seed=int(spec.get("seed", 0)) + rank, model_shifts=shifts
            )
        elif spec.get("mindrecord") and spec.get("seq_before") != spec.get("seq_after"):
            batch = int(config.runner_config.batch_size)
            files = [f for path in spec["mindrecord"] for f in _mindrecord_files(path)]
            dataset = sliced_mindrecord(files, spec["columns"], int(spec["seq_before"]), int(spec["seq_after"]), batch, int(spec["steps"]) * batch)
        stage = "building the model and training (Trainer.train)"
        times = os.path.join(workdir, "step_times.csv" if world == 1 else f"step_times_rank{rank}.csv")
        callbacks = [StepTimer(times, int(spec.get("collect_freq") or 1)), StopAt(int(spec["steps"]))]
        trainer = Trainer(args=config, train_dataset=dataset, callbacks=callbacks)
        trainer.train()
    except BaseException as exc:  # the reason in one line for the verdict; the traceback stays in the log
        traceback.print_exc()
        cause, kernel = classify(exc)
        with open(failure, "w") as f:
            json.dump({"stage": stage, "line": _one_line(exc), "cause": cause, "kernel": kernel, "rank": rank}, f)
        sys.stdout.flush()
        return 1
    finally:
        if said and stage.startswith("building the model"):  # the network was built (or began to be): say what it used
            said["replaced"] = [guarded] * bool(guarded) + reached(made)
            _write_rehearsal(workdir, said)
    print("msnb smoke worker: mindformers training finished", flush=True)
    return 0


def _write_rehearsal(workdir: str, said: dict) -> None:
    """rehearsal.json: the mindformers version, the CPU replacements and the config differences, for the verdict."""
    with open(os.path.join(workdir, "rehearsal.json"), "w") as f:
        json.dump(said, f)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
