"""msnb memory against the figures others publish.

    python benchmarks/bench_memory.py            # the three comparisons, as tables
    python benchmarks/bench_memory.py --markdown # the same, as the Markdown tables in docs/MEMORY.md

1. Parameters: msnb's count from a shipped config's sizes against the model card's published total.
2. Model states per card (weights + gradients + optimizer state) on N data-parallel cards, no tensor or pipeline
   parallelism, against the formulas of the ZeRO paper (Rajbhandari et al., 2020: mixed-precision Adam, K = 12) and
   of DeepSpeed's own estimators (``estimate_zero2_model_states_mem_needs`` and ``..._zero3_...``, no offload),
   written here from their published formulas, independently of msnb's code.  msnb counts float32 weights and
   gradients and two float32 moments (16 bytes a parameter, as ZeRO's 2 + 2 + 12); MindSpore's parallel optimizer
   ``level1`` shards weights and optimizer state (ZeRO-1 shards the optimizer state, which in ZeRO's count holds
   the float32 master weights), ``level2`` gradients too (ZeRO-3 shards all three).
3. mindformers' documented cards: the shipped configs at the device counts mindformers' READMEs launch them on
   (Atlas 800T A2, 64 GB a card, ``context.max_device_memory`` as the config sets it): the largest stage must fit
   what the config lets MindSpore use, or msnb would call a documented, working config too big.
4. The training layouts mindformers' READMEs list with their memory configuration (Qwen3 32B/14B/8B/4B, TeleChat3
   36B: cards, parallel and recompute config, ``max_device_memory``), the same way.

Nothing here is timed: it checks numbers.  mindformers must be installed (its configs are read, never imported).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from msnb.config.shipped import shipped_configs_dir  # noqa: E402
from msnb.fullsize.memory import GIB, estimate_card_memory, read_layout  # noqa: E402

# published totals (model cards: Qwen/Qwen3-32B "32.8B", Qwen/Qwen3-30B-A3B "30.5B", deepseek-ai/DeepSeek-V3
# "685B" = 671B main model + 14B multi-token-prediction module)
PUBLISHED = {
    "qwen3/pretrain_qwen3_32b_4k.yaml": ("Qwen3-32B", 32.8e9),
    "qwen3_moe/pretrain_qwen3_30b_a3b_4k.yaml": ("Qwen3-30B-A3B", 30.5e9),
    "deepseek3/pretrain_deepseek3_671b.yaml": ("DeepSeek-V3 (with MTP)", 685e9),
}

# the device counts mindformers' READMEs launch these configs on (configs/<model>/README.md, Atlas 800T A2 64G)
DOCUMENTED = {
    "qwen3/pretrain_qwen3_32b_4k.yaml": (16, "two Atlas 800T A2 (64G)"),
    "qwen3/finetune_qwen3.yaml": (16, "two Atlas 800T A2 (64G), with Qwen3-32B's config.json"),
    "deepseek3/pretrain_deepseek3_12b_16p_pp16.yaml": (16, "two Atlas 800T A2 (64G)"),
    "deepseek3/pretrain_deepseek3_671b.yaml": (256, "32 Atlas 800T A2 (64G)"),
    "qwen3_moe/pretrain_qwen3_30b_a3b_4k.yaml": (16, "two Atlas 800T A2 (64G)"),
}

# the training layouts mindformers' READMEs list as trained on Atlas 800T A2 with their memory configuration
# (configs/qwen3/README.md, configs/telechat3/README.md: cards, parallel_config, recompute_config, max_device_memory),
# built on the shipped Qwen3 / TeleChat3 configs with the published config.json sizes of each Qwen3 size
QWEN3_SIZES = {
    "Qwen3-14B": {"hidden_size": 5120, "intermediate_size": 17408, "num_hidden_layers": 40, "num_attention_heads": 40},
    "Qwen3-8B": {"hidden_size": 4096, "intermediate_size": 12288, "num_hidden_layers": 36, "num_attention_heads": 32},
    "Qwen3-4B": {"hidden_size": 2560, "intermediate_size": 9728, "num_hidden_layers": 36, "num_attention_heads": 32, "tie_word_embeddings": True,
                 "untie_embeddings_and_output_weights": False},
}  # fmt: skip
VALIDATED = (
    # (model, README level, base config, sizes, cards, parallel_config, recompute)
    ("Qwen3-32B", "Validated", "qwen3/pretrain_qwen3_32b_4k.yaml", {}, 16, {"model_parallel": 4, "pipeline_stage": 4, "micro_batch_num": 4}, True),
    ("Qwen3-14B", "Preliminary", "qwen3/pretrain_qwen3_32b_4k.yaml", QWEN3_SIZES["Qwen3-14B"], 8, {"model_parallel": 8}, True),
    ("Qwen3-8B", "Preliminary", "qwen3/pretrain_qwen3_32b_4k.yaml", QWEN3_SIZES["Qwen3-8B"], 8, {"model_parallel": 8}, False),
    ("Qwen3-4B", "Preliminary", "qwen3/pretrain_qwen3_32b_4k.yaml", QWEN3_SIZES["Qwen3-4B"], 8, {"model_parallel": 8}, False),
    ("TeleChat3-36B", "Validated", "telechat3/pretrain_telechat3_36b.yaml", {}, 16, {"model_parallel": 8, "pipeline_stage": 2, "micro_batch_num": 4},
     [[14, 14], [14, 14]]),
)  # fmt: skip

QWEN3_32B_CONFIG_JSON = (
    '{"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 5120, "num_hidden_layers": 64, '
    '"num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 128, "intermediate_size": 25600, "vocab_size": 151936, '
    '"max_position_embeddings": 40960, "tie_word_embeddings": false}'
)


# ----------------------------------------------------------------------- the oracles, from their published formulas


def zero_paper(params: float, n: int, stage: int, k: int = 12) -> float:
    """Rajbhandari et al. 2020, section 5.1 (Figure 1): bytes a card for model states, mixed-precision Adam (K = 12)."""
    if stage == 0:
        return (2 + 2 + k) * params
    if stage == 1:  # P_os
        return 2 * params + 2 * params + k * params / n
    if stage == 2:  # P_os+g
        return 2 * params + (2 + k) * params / n
    return (2 + 2 + k) * params / n  # P_os+g+p


def deepspeed_zero2(params: float, n: int) -> float:
    """DeepSpeed's estimate_zero2_model_states_mem_needs, cpu_offload False: the GPU memory a card."""
    return 4 * params + int(16 * params / n)


def deepspeed_zero3(params: float, largest_layer: float, n: int) -> float:
    """DeepSpeed's estimate_zero3_model_states_mem_needs, no offload: the largest layer's 4 bytes a parameter plus 18 / N."""
    return 4 * largest_layer + int(18 * params / n)


# ----------------------------------------------------------------------- the comparisons


def _model_states(est) -> int:
    stage = est.stages[0]
    return stage.weights + stage.gradients + stage.optimizer


def parameter_rows(root: Path) -> list:
    rows = []
    for name, (model, published) in PUBLISHED.items():
        est = estimate_card_memory(root / name)
        rows.append((model, name, est.parameters / 1e9, published / 1e9, f"{est.parameters / published:.3f}"))
    return rows


def zero_rows(root: Path) -> list:
    """Qwen3-32B's config on N data-parallel cards, each layout against its ZeRO / DeepSpeed counterpart."""
    path = root / "qwen3/pretrain_qwen3_32b_4k.yaml"
    import yaml

    cfg = yaml.safe_load(path.read_text())
    mc = cfg["model"]["model_config"]
    largest_layer = mc["vocab_size"] * mc["hidden_size"]  # the embedding: the largest single module
    rows = []
    for n in (8, 16, 64):
        base = dataclasses.replace(read_layout(cfg), dp=n, tp=1, pp=1, ep=1, cp=1, micro_batch_num=1)
        for label, layout, oracle_name, oracle in (
            ("no parallel optimizer", dataclasses.replace(base, parallel_optimizer=False), "ZeRO stage 0", lambda p, n=n: zero_paper(p, n, 0)),
            ("level1", dataclasses.replace(base, parallel_optimizer=True, optimizer_level="level1"), "ZeRO stage 1", lambda p, n=n: zero_paper(p, n, 1)),
            ("level1", dataclasses.replace(base, parallel_optimizer=True, optimizer_level="level1"), "DeepSpeed zero2 estimator", lambda p, n=n: deepspeed_zero2(p, n)),
            ("level2", dataclasses.replace(base, parallel_optimizer=True, optimizer_level="level2"), "ZeRO stage 3", lambda p, n=n: zero_paper(p, n, 3)),
            ("level2", dataclasses.replace(base, parallel_optimizer=True, optimizer_level="level2"), "DeepSpeed zero3 estimator",
             lambda p, n=n: deepspeed_zero3(p, largest_layer, n)),
        ):  # fmt: skip
            est = estimate_card_memory(path, layout=layout)
            ours = _model_states(est)
            theirs = oracle(est.parameters)
            rows.append((n, label, oracle_name, ours / GIB, theirs / GIB, f"{ours / theirs:.3f}"))
    return rows


def documented_rows(root: Path, scratch: Path) -> list:
    rows = []
    for name, (devices, where) in DOCUMENTED.items():
        path = root / name
        if name == "qwen3/finetune_qwen3.yaml":  # its sizes come from pretrained_model_dir: Qwen3-32B's published config.json
            folder = scratch / "Qwen3-32B"
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "config.json").write_text(QWEN3_32B_CONFIG_JSON)
            path = scratch / "finetune_qwen3.yaml"
            path.write_text((root / name).read_text().replace("/path/to/Qwen3-32B", str(folder)))
        est = estimate_card_memory(path, devices=devices, card="800T-A2")
        big = est.largest_stage
        rows.append((name, devices, where, est.layout.devices, big.stage, big.total / GIB, est.usable_gb, f"{big.total / (est.usable_gb * GIB):.3f}", est.fits))
    return rows


def validated_rows(root: Path, scratch: Path) -> list:
    """Each layout mindformers' READMEs list as trained, on its cards and max_device_memory: the largest stage must fit."""
    import yaml

    rows = []
    for model, level, base, sizes, cards, parallel, recompute in VALIDATED:
        cfg = yaml.safe_load((root / base).read_text())
        cfg["model"]["model_config"].update(sizes)
        pc = {"data_parallel": 1, "model_parallel": 1, "pipeline_stage": 1, "micro_batch_num": 1, **parallel}
        cfg["parallel_config"].update(pc)
        if pc["pipeline_stage"] == 1:
            cfg["model"]["model_config"]["offset"] = 0
        cfg["recompute_config"]["recompute"] = recompute
        cfg.setdefault("context", {})["max_device_memory"] = "58GB"
        path = scratch / f"{model}.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump(cfg, sort_keys=False))
        est = estimate_card_memory(path, devices=cards, card="800T-A2")
        big = est.largest_stage
        words = f"tp {est.layout.tp}, pp {est.layout.pp}" + (", recompute" if recompute else ", no recompute")
        rows.append((model, level, cards, words, big.total / GIB, est.usable_gb, f"{big.total / (est.usable_gb * GIB):.3f}", est.fits))
    return rows


def stage_table(root: Path, name: str) -> list:
    est = estimate_card_memory(root / name, card="800T-A2")
    return [
        (s.stage, s.layers, s.weights / GIB, s.gradients / GIB, s.optimizer / GIB, s.activations_per_micro_batch / GIB, s.micro_batches_in_flight,
         s.activations / GIB, s.total / GIB)
        for s in sorted(est.stages, key=lambda s: (-s.total, s.stage))
    ]  # fmt: skip


def _table(head: tuple, rows: list, markdown: bool) -> str:
    def cell(v):
        if isinstance(v, float):
            return f"{v:,.1f}"
        return str(v)

    cells = [tuple(cell(v) for v in r) for r in rows]
    if markdown:
        lines = ["| " + " | ".join(head) + " |", "| " + " | ".join("---" for _ in head) + " |"]
        return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in cells])
    widths = [max(len(str(x)) for x in col) for col in zip(head, *cells)]
    return "\n".join("  ".join(str(c).ljust(w) for c, w in zip(r, widths)) for r in [head, *cells])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--markdown", action="store_true", help="print Markdown tables")
    parser.add_argument("--scratch", default="/tmp/msnb-bench-memory", help="where the Qwen3-32B config.json is written")
    args = parser.parse_args(argv)
    root = shipped_configs_dir()
    if root is None:
        print("mindformers is not installed: its shipped configs are what this benchmark reads", file=sys.stderr)
        return 2
    md = args.markdown
    print("1. parameters: msnb's count from the shipped config against the model card\n")
    print(_table(("model", "config", "msnb (B)", "published (B)", "ratio"), parameter_rows(root), md))
    print("\n2. model states a card (weights + gradients + optimizer state), Qwen3-32B on N data-parallel cards, GiB\n")
    print(_table(("N", "msnb layout", "oracle", "msnb", "oracle's", "ratio"), zero_rows(root), md))
    print("\n3. mindformers' documented cards: the largest stage against what the config lets MindSpore use, GiB\n")
    rows = documented_rows(root, Path(args.scratch))
    print(_table(("config", "cards", "documented on", "layout's cards", "largest stage", "needs", "usable", "ratio", "fits"), rows, md))
    print("\n4. the training layouts mindformers' READMEs list (Atlas 800T A2, max_device_memory 58GB), GiB\n")
    validated = validated_rows(root, Path(args.scratch))
    print(_table(("model", "README", "cards", "layout", "needs", "usable", "ratio", "fits"), validated, md))
    rows = rows + [(r[-1],) for r in validated]
    for name in ("qwen3/pretrain_qwen3_32b_4k.yaml", "qwen3_moe/pretrain_qwen3_30b_a3b_4k.yaml", "deepseek3/pretrain_deepseek3_12b_16p_pp16.yaml"):
        print(f"\n{name}, GiB a card\n")
        head = ("stage", "layers", "weights", "grads", "optimizer", "act/micro", "in flight", "activations", "total")
        print(_table(head, stage_table(root, name), md))
    return 0 if all(r[-1] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
