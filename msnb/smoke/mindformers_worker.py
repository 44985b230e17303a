"""The smoke's child for a mindformers run YAML: the config's own model through mindformers' Trainer, then exit.

    python -m msnb.smoke.mindformers_worker SPEC.json

Runs in the scratch directory (mindformers writes ``./output/log`` wherever
it is imported), never in the user's kernel.  In order: the CPU rehearsal when
training on CPU (:mod:`msnb.smoke.cpu_rehearsal`), ``MindFormerConfig`` on the
config :mod:`msnb.smoke.mindformers_plan` prepared, ``build_context`` as
mindformers' own launcher does, the dataset (synthetic, or the config's own),
then ``Trainer(args=config, train_dataset=...).train()`` with the config's
callbacks plus msnb's step timer.  What ran is written to ``rehearsal.json``;
a failure leaves its one-line reason in ``failure.txt`` beside the log, so the
verdict can say it in one line while the log keeps the traceback.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import traceback

import numpy as np

from .guard import set_parent_death_signal
from .import_guards import guard_deepseek_v4_import


def synthetic_dataset(columns: list, seq: int, vocab: int, batch: int, samples: int, seed: int = 0):
    """Token ids with exactly the columns the config's dataset gives, following a pattern a model can learn.

    Each sample counts upward from a random start (modulo the vocabulary, above
    the three special ids), so the next token is predictable: a model that
    trains sees its loss fall, one that does not (learning rate 0, frozen
    weights) does not.  A config whose only column is ``input_ids`` gets
    ``seq + 1`` tokens (the model shifts them into labels itself); otherwise
    ``labels`` are the next tokens, ``loss_mask`` ones, ``position_ids`` 0..seq-1
    and ``attention_mask`` causal (1 = masked, as mindformers' Megatron loader).
    """
    from mindspore.dataset import GeneratorDataset  # deferred: MindSpore (the mindspore extra)

    span = max(2, int(vocab) - 3)
    rng = np.random.default_rng(seed)
    only_ids = list(columns) == ["input_ids"]

    def rows():
        for _ in range(samples):
            tokens = (3 + (rng.integers(0, span) + np.arange(seq + 1)) % span).astype(np.int32)
            row = {
                "input_ids": tokens if only_ids else tokens[:-1],
                "labels": tokens[1:],
                "loss_mask": np.ones(seq, np.int32),
                "position_ids": np.arange(seq, dtype=np.int32),
                "attention_mask": np.triu(np.ones((1, seq, seq), np.int32), 1),
            }
            yield tuple(row[c] if c in row else np.zeros(seq, np.int32) for c in columns)

    return GeneratorDataset(rows, column_names=list(columns), shuffle=False).batch(batch, drop_remainder=True)


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:400]}" if text else type(exc).__name__


def main(spec_path: str) -> int:
    set_parent_death_signal(signal.SIGKILL)  # the guard gone: so is the training
    with open(spec_path) as f:
        spec = json.load(f)
    workdir = spec["workdir"]
    os.chdir(workdir)  # mindformers' ./output/log lands in the scratch directory
    failure = os.path.join(workdir, "failure.txt")
    stage = "importing mindformers"
    rank = 0
    try:
        guarded = guard_deepseek_v4_import()  # before mindformers: its 2.0 import needs hyper_parallel otherwise
        # deferred until the death signal is armed, and inside the try (a failure is this stage's line): mindformers, MindSpore
        import mindformers
        from mindformers import MindFormerConfig, Trainer, build_context

        from ..monitor import current_rank
        from .cpu_rehearsal import apply
        from .step_callbacks import StepTimer, StopAt

        applied = []
        if spec["device"] == "CPU":
            stage = "replacing Ascend-only kernels (CPU rehearsal)"
            applied = apply(legacy=bool(spec.get("legacy")), family=spec.get("mindformers_model") or "", pynative=spec.get("mode") == "pynative")
        applied = [guarded, *applied] if guarded else applied
        with open(os.path.join(workdir, "rehearsal.json"), "w") as f:
            json.dump({"mindformers": getattr(mindformers, "__version__", "?"), "replaced": applied}, f)
        stage = "loading the config (MindFormerConfig)"
        config = MindFormerConfig(spec["config"])
        stage = "building the context (build_context)"
        build_context(config)  # with use_parallel, this initialises the communication msrun set up
        rank, world = current_rank()
        rank = rank or 0
        if world > 1:
            failure = os.path.join(workdir, f"failure_rank{rank}.txt")
        dataset = None
        if spec["data"] == "synthetic":
            mc = config.model.model_config
            seq = int(mc.seq_length)
            vocab = int(getattr(mc, "vocab_size", None) or getattr(mc, "padded_vocab_size", None) or 256)
            batch = int(config.runner_config.batch_size)
            dataset = synthetic_dataset(spec["columns"], seq, vocab, batch, samples=int(spec["steps"]) * batch, seed=int(spec.get("seed", 0)) + rank)
        stage = "building the model and training (Trainer.train)"
        times = os.path.join(workdir, "step_times.csv" if world == 1 else f"step_times_rank{rank}.csv")
        callbacks = [StepTimer(times, int(spec.get("collect_freq") or 1)), StopAt(int(spec["steps"]))]
        trainer = Trainer(args=config, train_dataset=dataset, callbacks=callbacks)
        trainer.train()
    except BaseException as exc:  # the reason in one line for the verdict; the traceback stays in the log
        traceback.print_exc()
        with open(failure, "w") as f:
            f.write(f"{stage}: {_one_line(exc)}\n")
        sys.stdout.flush()
        return 1
    print("msnb smoke worker: mindformers training finished", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
