"""msnb memory's estimate against peaks measured on real cards (the ground-truth table in docs/MEMORY.md).

    python benchmarks/memory_ground_truth.py             # the table
    python benchmarks/memory_ground_truth.py --markdown  # the same as Markdown

Each public measurement with a known layout is written as the mindformers config that matches it (the shipped
Qwen3 pretrain config with the measured model's sizes, layout, sequence, batch and recompute), estimated by
``msnb memory``, and scored against the measured figure: error = estimate / measured - 1 (positive: msnb counts more).
Where the stage measured is known, that stage's estimate is scored; where it is not, the stage the source names.

Sources (measured figures as published):

- MindSpore's course "MindSpore-Compatible Distributed Training Principles and Practices", chapter 5 (MindSpeed-LLM
  on MindSpore 2.7.1, Atlas 800T A2, 64 GB cards): Qwen2.5-7B, bf16, micro-batch 1, global batch 64, MindSpore's
  "Used peak memory usage (without fragments)", in MiB: TP2 PP2 at 10,240 tokens 55,405 without recompute and
  35,073 with full recompute (4 cards, so data-parallel 1: 64 micro-batches); at 4,096 tokens TP2 PP4 35,366, TP4 PP2
  27,951, TP4 PP2 with full recompute 26,779 (the last rank).
- Megatron-LM pull request 482 (tools/get_training_info/README.md): Llama2-7B, bf16, flash attention, distributed
  optimizer, SwiGLU, torch.cuda.max_memory_allocated after several iterations, rank 0, GB: DP8 (MBS 2) 69.1; DP4 TP2
  (MBS 4) 55.7; DP4 PP2 (MBS 2, GBS 2048) 49.8; TP8 (MBS 4) 28.8.  The sequence length is not in the table: 4,096
  (Llama2's) is assumed here.

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
    stage: int  # the stage measured
    measured_mib: float
    parallel_optimizer: bool = False
    differs: str = ""


MINDSPEED = (
    "MindSpeed-LLM's Megatron layers on MindSpore: bf16 weights, fp32 main gradients and master weights (18 bytes a "
    "parameter against msnb's 16 for mindformers' float32 weights); workspace of the kernels in the figure"
)
MEGATRON = (
    "PyTorch Megatron-LM on GPUs, torch.cuda.max_memory_allocated (no allocator cache): bf16 weights, fp32 main "
    "gradients, Adam state and master weights sharded over data parallel (distributed optimizer), counted as MindSpore's "
    "parallel optimizer level1; sequence length assumed 4,096"
)
ROWS = [
    Row("MindSpore course, ch. 5", "Qwen2.5-7B TP2 PP2, 10,240 tokens, no recompute", QWEN25_7B, 10240, 1,
        {"data_parallel": 1, "model_parallel": 2, "pipeline_stage": 2, "micro_batch_num": 64}, False, 1, 55405, differs=MINDSPEED),
    Row("MindSpore course, ch. 5", "Qwen2.5-7B TP2 PP2, 10,240 tokens, full recompute", QWEN25_7B, 10240, 1,
        {"data_parallel": 1, "model_parallel": 2, "pipeline_stage": 2, "micro_batch_num": 64}, True, 1, 35073, differs=MINDSPEED),
    Row("MindSpore course, ch. 5", "Qwen2.5-7B TP2 PP4, 4,096 tokens", QWEN25_7B, 4096, 1,
        {"data_parallel": 1, "model_parallel": 2, "pipeline_stage": 4, "micro_batch_num": 64}, False, 3, 35366, differs=MINDSPEED),
    Row("MindSpore course, ch. 5", "Qwen2.5-7B TP4 PP2, 4,096 tokens", QWEN25_7B, 4096, 1,
        {"data_parallel": 1, "model_parallel": 4, "pipeline_stage": 2, "micro_batch_num": 64}, False, 1, 27951, differs=MINDSPEED),
    Row("MindSpore course, ch. 5", "Qwen2.5-7B TP4 PP2, 4,096 tokens, full recompute", QWEN25_7B, 4096, 1,
        {"data_parallel": 1, "model_parallel": 4, "pipeline_stage": 2, "micro_batch_num": 64}, True, 1, 26779, differs=MINDSPEED),
    Row("Megatron-LM PR 482", "Llama2-7B DP8, MBS 2", LLAMA2_7B, 4096, 2,
        {"data_parallel": 8, "model_parallel": 1, "pipeline_stage": 1, "micro_batch_num": 1}, False, 0, 69.1 * 1024, True, MEGATRON),
    Row("Megatron-LM PR 482", "Llama2-7B DP4 TP2, MBS 4", LLAMA2_7B, 4096, 4,
        {"data_parallel": 4, "model_parallel": 2, "pipeline_stage": 1, "micro_batch_num": 1}, False, 0, 55.7 * 1024, True, MEGATRON),
    Row("Megatron-LM PR 482", "Llama2-7B DP4 PP2, MBS 2, GBS 2048", LLAMA2_7B, 4096, 2,
        {"data_parallel": 4, "model_parallel": 1, "pipeline_stage": 2, "micro_batch_num": 256}, False, 0, 49.8 * 1024, True, MEGATRON),
    Row("Megatron-LM PR 482", "Llama2-7B TP8, MBS 4", LLAMA2_7B, 4096, 4,
        {"data_parallel": 1, "model_parallel": 8, "pipeline_stage": 1, "micro_batch_num": 1}, False, 0, 28.8 * 1024, True, MEGATRON),
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
            stage = next(s for s in est.stages if s.stage == row.stage)
            out.append(
                {
                    "row": row,
                    "estimate_mib": stage.total / MIB,
                    "error": stage.total / (row.measured_mib * MIB) - 1,
                    "parts": {k: getattr(stage, k) / GIB for k in ("weights", "gradients", "optimizer", "activations")},
                    "in_flight": stage.micro_batches_in_flight,
                }
            )
    return out


def table(scored: list[dict], markdown: bool) -> str:
    head = ("source", "measurement", "stage", "measured MiB", "msnb MiB", "error", "weights+grads+opt GiB", "activations GiB (in flight)")
    lines = []
    if markdown:
        lines += ["| " + " | ".join(head) + " |", "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for s in scored:
        r, p = s["row"], s["parts"]
        cells = (r.source, r.what, str(r.stage), f"{r.measured_mib:,.0f}", f"{s['estimate_mib']:,.0f}", f"{s['error']:+.1%}",
                 f"{p['weights'] + p['gradients'] + p['optimizer']:.1f}", f"{p['activations']:.1f} ({s['in_flight']})")  # fmt: skip
        lines.append("| " + " | ".join(cells) + " |" if markdown else "  ".join(cells))
    within = sum(abs(s["error"]) <= 0.15 for s in scored)
    lines.append(f"\n{within} of {len(scored)} rows within 15%")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args(argv)
    print(table(score(), args.markdown))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
