"""msnb memory's estimate against peaks measured on real cards (the ground-truth table in docs/MEMORY.md).

    python benchmarks/memory_ground_truth.py             # the table
    python benchmarks/memory_ground_truth.py --markdown  # the same as Markdown

Each public measurement with a known layout is written as the mindformers config that matches it (the shipped
Qwen3 pretrain config with the measured model's sizes, layout, sequence, batch and recompute), estimated by
``msnb memory``, and scored against the measured figure: error = estimate / measured - 1 (positive: msnb counts more).
Where the stage measured is known, that stage's estimate is scored; where it is not, the stage the source names.

Sources (measured figures as published, with the settings their own pages give):

- MindSpore's course "MindSpore-Compatible Distributed Training Principles and Practices", chapter 5 (MindSpeed-LLM
  on MindSpore 2.7.1, Atlas 800 with 64 GB cards), Qwen2.5-7B run by ``pretrain_qwen25_7b_32k_ms.sh``: bf16, MBS 1,
  ``--sequence-parallel``, flash attention, no distributed optimizer. DryRun.md: TP2 PP2 at 10,240 tokens, GBS 64 on
  4 cards (64 micro-batches), MindSpore's "Used peak memory usage (without fragments)" 55,405 MiB without recompute and
  35,073 with full recompute, on a rank it does not name (scored: the largest stage). partition-strategy.md: at 4,096
  tokens (the page overrides TP, PP and SEQ_LEN only: the script's GBS 64 in MindSpeed-LLM 2.2.0, the branch
  MindSpeed-Core-MS r0.4.0 clones, on 8 cards: 64 micro-batches) TP2 PP4 35,366, TP4 PP2 27,951, TP4 PP2 with full
  recompute 26,779, from ``worker_7.log``: the last stage, a figure the page takes from the training log without
  naming the line.
- Megatron-LM pull request 482 (tools/get_training_info/README.md): Llama2-7B, bf16, flash attention, distributed
  optimizer, SwiGLU, no sequence parallelism and no recompute (the tool supports neither), torch.cuda.max_memory_allocated
  after several iterations, rank 0, GB: DP8 (MBS 2) 69.1; DP4 TP2 (MBS 4) 55.7; DP4 PP2 (MBS 2, GBS 2048) 49.8; TP8
  (MBS 4) 28.8. The table does not give the sequence length; the same README's example runs 2,048 tokens, and only
  2,048 fits the figures (DP8: 47 GiB of model states leave 22 for activations, which 4,096 tokens would double).

Each row is scored twice: msnb's estimate of the matching mindformers config (float32 weights and gradients, AdamW's
float32 moments: 16 bytes a parameter), and the same parameters and activations with the measured framework's own
model-state bytes (Megatron's bf16 layout: bf16 weights 2, fp32 main gradients 4, fp32 master weights and moments 12,
split over data parallelism by the distributed optimizer).

Not scored: the 175B Llama's per-stage DryRun peaks in mindformers' pipeline-balance toolkit readme (77,698 MiB on
stage 0 ... 21,822 on stage 15, 16,384 ranks, 16 stages): the readme gives the model and the per-stage offset and
select recompute, but not the data / tensor parallel split, the micro-batches or the parallel optimizer, so no config
can be written that matches it.
"""

from __future__ import annotations

import argparse
import copy
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from msnb.config.shipped import shipped_configs_dir  # noqa: E402
from msnb.fullsize.memory import GIB, estimate_card_memory  # noqa: E402

MIB = 1 << 20
BASE = "qwen3/pretrain_qwen3_32b_4k.yaml"

# published config.json sizes (Qwen/Qwen2.5-7B, meta-llama/Llama-2-7b-hf)
QWEN25_7B = {"vocab_size": 152064, "hidden_size": 3584, "intermediate_size": 18944, "num_hidden_layers": 28, "num_attention_heads": 28,
             "num_key_value_heads": 4, "head_dim": 128, "tie_word_embeddings": False, "untie_embeddings_and_output_weights": True,
             "qk_layernorm": False, "attention_bias": True}  # fmt: skip
LLAMA2_7B = {"vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32, "num_attention_heads": 32,
             "num_key_value_heads": 32, "head_dim": 128, "tie_word_embeddings": False, "untie_embeddings_and_output_weights": True,
             "qk_layernorm": False, "attention_bias": False}  # fmt: skip


@dataclass
class Row:
    source: str
    what: str
    sizes: dict
    seq: int
    micro: int
    layout: dict  # parallel_config keys
    recompute: bool
    stage: int | None  # the stage measured; None: not said (the largest stage's estimate is scored: what a verdict judges)
    measured_mib: float
    parallel_optimizer: bool = False
    framework: FrameworkStates | None = None  # the measured framework's own model-state layout, for the second column
    differs: str = ""


@dataclass(frozen=True)
class FrameworkStates:
    """Bytes a parameter of the measured framework's model states, as its published layout has them: the weights
    the layers compute with, the gradient buffer, and the master copy with Adam's moments (split over data parallelism
    when the distributed optimizer is on)."""

    name: str
    weights: int
    gradients: int
    master_and_moments: int
    distributed_optimizer: bool

    def bytes_a_card(self, parameters: int, dp: int) -> int:
        split = dp if self.distributed_optimizer else 1
        return parameters * (self.weights + self.gradients) + parameters * self.master_and_moments // split


# Megatron's mixed precision (--bf16): bf16 weights, fp32 main gradients (DDP's grad buffer, accumulate in fp32), fp32
# master weights and Adam's two fp32 moments (Float16OptimizerWithFloat16Params / DistributedOptimizer)
MINDSPEED_STATES = FrameworkStates("MindSpeed-LLM (Megatron's bf16 layout, no distributed optimizer in the course's script)", 2, 4, 12, False)
MEGATRON_STATES = FrameworkStates("Megatron-LM (bf16, distributed optimizer)", 2, 4, 12, True)


MINDSPEED = (
    "MindSpeed-LLM's Megatron layers on MindSpore: bf16 weights, fp32 main gradients and master weights (18 bytes a "
    "parameter against msnb's 16 for mindformers' float32 weights); sequence parallel; workspace of the kernels in the figure"
)
MEGATRON = (
    "PyTorch Megatron-LM on GPUs, torch.cuda.max_memory_allocated (no allocator cache): bf16 weights, fp32 main "
    "gradients, Adam state and master weights sharded over data parallel (distributed optimizer), counted as MindSpore's "
    "parallel optimizer level1; 2,048 tokens (the README's own example)"
)
COURSE_4K = {"micro_batch_num": 64, "use_seq_parallel": True}  # the course's 32k script (MindSpeed-LLM 2.2.0): MBS 1, GBS 64, --sequence-parallel; 8 cards
COURSE_10K = {"micro_batch_num": 64, "use_seq_parallel": True}  # DryRun.md: MBS 1, GBS 64, 4 cards; --sequence-parallel
ROWS = [
    Row("MindSpore course, ch. 5", "Qwen2.5-7B TP2 PP2, 10,240 tokens, no recompute", QWEN25_7B, 10240, 1,
        {"data_parallel": 1, "model_parallel": 2, "pipeline_stage": 2, **COURSE_10K}, False, None, 55405, framework=MINDSPEED_STATES, differs=MINDSPEED),
    Row("MindSpore course, ch. 5", "Qwen2.5-7B TP2 PP2, 10,240 tokens, full recompute", QWEN25_7B, 10240, 1,
        {"data_parallel": 1, "model_parallel": 2, "pipeline_stage": 2, **COURSE_10K}, True, None, 35073, framework=MINDSPEED_STATES, differs=MINDSPEED),
    Row("MindSpore course, ch. 5", "Qwen2.5-7B TP2 PP4, 4,096 tokens", QWEN25_7B, 4096, 1,
        {"data_parallel": 1, "model_parallel": 2, "pipeline_stage": 4, **COURSE_4K}, False, 3, 35366, framework=MINDSPEED_STATES, differs=MINDSPEED),
    Row("MindSpore course, ch. 5", "Qwen2.5-7B TP4 PP2, 4,096 tokens", QWEN25_7B, 4096, 1,
        {"data_parallel": 1, "model_parallel": 4, "pipeline_stage": 2, **COURSE_4K}, False, 1, 27951, framework=MINDSPEED_STATES, differs=MINDSPEED),
    Row("MindSpore course, ch. 5", "Qwen2.5-7B TP4 PP2, 4,096 tokens, full recompute", QWEN25_7B, 4096, 1,
        {"data_parallel": 1, "model_parallel": 4, "pipeline_stage": 2, **COURSE_4K}, True, 1, 26779, framework=MINDSPEED_STATES, differs=MINDSPEED),
    Row("Megatron-LM PR 482", "Llama2-7B DP8, MBS 2", LLAMA2_7B, 2048, 2,
        {"data_parallel": 8, "model_parallel": 1, "pipeline_stage": 1, "micro_batch_num": 1}, False, 0, 69.1 * 1024, True, MEGATRON_STATES, MEGATRON),
    Row("Megatron-LM PR 482", "Llama2-7B DP4 TP2, MBS 4", LLAMA2_7B, 2048, 4,
        {"data_parallel": 4, "model_parallel": 2, "pipeline_stage": 1, "micro_batch_num": 1}, False, 0, 55.7 * 1024, True, MEGATRON_STATES, MEGATRON),
    Row("Megatron-LM PR 482", "Llama2-7B DP4 PP2, MBS 2, GBS 2048", LLAMA2_7B, 2048, 2,
        {"data_parallel": 4, "model_parallel": 1, "pipeline_stage": 2, "micro_batch_num": 256}, False, 0, 49.8 * 1024, True, MEGATRON_STATES, MEGATRON),
    Row("Megatron-LM PR 482", "Llama2-7B TP8, MBS 4", LLAMA2_7B, 2048, 4,
        {"data_parallel": 1, "model_parallel": 8, "pipeline_stage": 1, "micro_batch_num": 1}, False, 0, 28.8 * 1024, True, MEGATRON_STATES, MEGATRON),
]  # fmt: skip


def write_config(row: Row, root: Path, scratch: Path) -> Path:
    """The mindformers run config that matches *row*: the shipped Qwen3 pretrain config with its sizes and layout."""
    import yaml  # deferred: the benchmark's only YAML writer

    cfg = yaml.safe_load((root / BASE).read_text())
    cfg = copy.deepcopy(cfg)
    mc = cfg["model"]["model_config"]
    mc.update(row.sizes)
    mc.update({"seq_length": row.seq, "max_position_embeddings": row.seq, "offset": 0, "params_dtype": "float32", "compute_dtype": "bfloat16"})
    cfg["parallel_config"].update(row.layout)
    cfg["runner_config"]["batch_size"] = row.micro
    cfg["recompute_config"].update({"recompute": row.recompute, "select_recompute": False})
    cfg["parallel"]["enable_parallel_optimizer"] = row.parallel_optimizer
    cfg["parallel_config"].setdefault("use_seq_parallel", False)
    path = scratch / (row.what.replace(" ", "_").replace(",", "").replace("/", "-") + ".yaml")
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


def score(rows=ROWS) -> list[dict]:
    """Each row estimated and scored: the stage's estimate, the measured figure, the error and the parts."""
    root = shipped_configs_dir()
    if root is None:
        raise SystemExit("mindformers' shipped configs are not installed here: nothing to build the configs from")
    out = []
    with tempfile.TemporaryDirectory() as scratch:
        for row in rows:
            est = estimate_card_memory(write_config(row, root, Path(scratch)), card="910B2")
            stage = est.largest_stage if row.stage is None else next(s for s in est.stages if s.stage == row.stage)
            measured = row.measured_mib * MIB
            scored = {
                "row": row,
                "stage": stage.stage,
                "estimate_mib": stage.total / MIB,
                "error": stage.total / measured - 1,
                "parts": {k: getattr(stage, k) / GIB for k in ("weights", "gradients", "optimizer", "activations", "step_extra")},
                "in_flight": stage.micro_batches_in_flight,
            }
            if row.framework is not None:  # msnb's parameters a card and activations, the measured framework's bytes a parameter
                states = row.framework.bytes_a_card(stage.parameters, est.layout.dp * est.layout.cp)
                scored["framework_mib"] = (states + stage.activations) / MIB
                scored["framework_error"] = (states + stage.activations) / measured - 1
                scored["framework_states_gib"] = states / GIB
            out.append(scored)
    return out


def table(scored: list[dict], markdown: bool) -> str:
    head = ("source", "measurement", "stage", "measured MiB", "msnb MiB", "error", "weights+grads+opt GiB", "activations GiB (in flight)",
            "step's grads copy beyond activations GiB", "framework's states GiB", "msnb + framework's states MiB", "error")  # fmt: skip
    lines = []
    if markdown:
        lines += ["| " + " | ".join(head) + " |", "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for s in scored:
        r, p = s["row"], s["parts"]
        stage = f"{s['stage']}" if r.stage is not None else f"{s['stage']} (largest; not said)"
        cells = (r.source, r.what, stage, f"{r.measured_mib:,.0f}", f"{s['estimate_mib']:,.0f}", f"{s['error']:+.1%}",
                 f"{p['weights'] + p['gradients'] + p['optimizer']:.1f}", f"{p['activations']:.1f} ({s['in_flight']})", f"{p['step_extra']:.1f}")  # fmt: skip
        if "framework_mib" in s:
            cells += (f"{s['framework_states_gib']:.1f}", f"{s['framework_mib']:,.0f}", f"{s['framework_error']:+.1%}")
        else:
            cells += ("", "", "")
        lines.append("| " + " | ".join(cells) + " |" if markdown else "  ".join(cells))
    within = sum(abs(s["error"]) <= 0.15 for s in scored)
    lines.append(f"\n{within} of {len(scored)} rows within 15% (msnb's estimate of the matching mindformers config)")
    framed = [s for s in scored if "framework_error" in s]
    if framed:
        near = sum(abs(s["framework_error"]) <= 0.15 for s in framed)
        lines.append(f"{near} of {len(framed)} rows within 15% with the measured framework's model-state bytes in place of mindformers'")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args(argv)
    print(table(score(), args.markdown))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
