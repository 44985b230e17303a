"""Per-card memory at full size (msnb memory) and the smoke's memory floor: the same sizes the real run builds.

The hand-computed figures below are derived here from the tensors' shapes, not read from msnb's code: each
parameter matrix of a grouped-query attention layer and a gated MLP, and the activations a layer keeps for its
backward pass (Korthikanti et al.'s count), written out for a config small enough to add up by hand.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from msnb.errors import NotRehearsed, UsageError
from msnb.fullsize.memory import CARDS, estimate_card_memory, layers_per_stage
from msnb.fullsize.sizes import model_sizes
from tests.smoke.cluster_oracle import CLUSTER_CONTEXT, CLUSTER_STANDIN

REPO = Path(__file__).resolve().parents[2]

# the small config: 4 layers, hidden 64, 4 heads of 16, 2 kv heads, gated MLP of 128, vocab 1000, 32 tokens
SMALL = {
    "use_legacy": False,
    "run_mode": "train",
    "trainer": {"type": "CausalLanguageModelingTrainer", "model_name": "qwen3"},
    "runner_config": {"batch_size": 1, "epochs": 1},
    "optimizer": {"type": "AdamW"},
    "parallel_config": {"data_parallel": 2, "model_parallel": 2, "pipeline_stage": 2, "micro_batch_num": 4},
    "parallel": {"parallel_mode": 1, "enable_parallel_optimizer": False},
    "recompute_config": {"recompute": [1, 0]},
    "model": {
        "model_config": {
            "model_type": "qwen3",
            "num_hidden_layers": 4,
            "hidden_size": 64,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "head_dim": 16,
            "intermediate_size": 128,
            "vocab_size": 1000,
            "seq_length": 32,
            "offset": [1, -1],
            "params_dtype": "float32",
            "compute_dtype": "bfloat16",
            "use_flash_attention": True,
            "tie_word_embeddings": False,
        }
    },
}


def _write(tmp_path: Path, cfg: dict, name: str = "run.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


def _with(cfg: dict, **parallel) -> dict:
    out = json.loads(json.dumps(cfg))
    out["parallel"].update(parallel)
    return out


# parameters, by hand: attention q 64x(4*16), k and v 64x(2*16) each, o (4*16)x64; MLP gate, up, down 64x128 each;
# two norms of 64 a layer and the q and k norms of 16 (mindformers' Qwen3 training class builds them whatever
# qk_layernorm says); tensor parallelism (2) splits the matrices, not the norms
ATTENTION = 64 * 64 + 2 * 64 * 32 + 64 * 64  # 12,288
MLP = 3 * 64 * 128  # 24,576
LAYER_ON_A_CARD = (ATTENTION + MLP) // 2 + 2 * 64 + 2 * 16  # 18,592
EMBEDDING_ON_A_CARD = 1000 * 64 // 2  # vocab-parallel: 32,000 (the head the same, on the last stage)
# offset [1, -1]: 4 // 2 = 2 layers a stage, plus the offset: 3 on the first stage, 1 on the last
STAGE0 = 3 * LAYER_ON_A_CARD + EMBEDDING_ON_A_CARD  # 87,776
STAGE1 = 1 * LAYER_ON_A_CARD + EMBEDDING_ON_A_CARD + 64  # and the final norm: 50,656


def _layer_activations(recomputed: bool) -> int:
    """Bytes one layer keeps for one micro-batch of 1 x 32 tokens in bfloat16 (2 bytes), tensor parallel 2, no sequence parallelism."""
    tokens, w = 32, 2
    if recomputed:
        return w * tokens * 64  # the layer's input alone
    hidden_sized = 4 * w * tokens * 64  # both norms' inputs and outputs, whole on every card without sequence parallelism
    qkv_and_out = w * tokens * (4 * 16 + 4 * 16 + 2 * 2 * 16) // 2  # q, the attention output, k and v
    softmax_stats = 2 * 4 * tokens * 4 // 2  # flash attention keeps float32 max and sum per head and token
    mlp = 4 * w * tokens * 128 // 2  # gate, up, the activation and the product
    return hidden_sized + qkv_and_out + softmax_stats + mlp


def test_the_stages_add_up_to_the_hand_computed_figures(tmp_path):
    est = estimate_card_memory(_write(tmp_path, SMALL), card_gb=1)
    first, last = sorted(est.stages, key=lambda s: s.stage)
    assert (first.layers, last.layers) == (3, 1)
    assert (first.parameters, last.parameters) == (STAGE0, STAGE1)
    # float32 weights and gradients, AdamW's two float32 moments; no parallel optimizer: nothing split by dp
    assert (first.weights, first.gradients, first.optimizer) == (4 * STAGE0, 4 * STAGE0, 8 * STAGE0)
    assert (last.weights, last.gradients, last.optimizer) == (4 * STAGE1, 4 * STAGE1, 8 * STAGE1)
    # recompute [1, 0]: the first stage's first layer keeps its input only; the embedding's output too
    assert first.activations_per_micro_batch == _layer_activations(True) + 2 * _layer_activations(False) + 2 * 32 * 64
    # the last stage: its layer and the logits (bfloat16 and their float32 copy), vocab-parallel
    assert last.activations_per_micro_batch == _layer_activations(False) + (2 + 4) * 32 * 1000 // 2
    # 1F1B with 2 stages and 4 micro-batches: the first stage holds 2 in flight, the last 1
    assert (first.micro_batches_in_flight, last.micro_batches_in_flight) == (2, 1)
    # a pipeline: at the optimizer step mindformers' wrapper scales accu_grads into a new float32 tensor a gradient
    # (4 bytes a parameter), after the backward pass has freed the activations: the stage holds the larger of the two
    assert (first.step_gradients, last.step_gradients) == (4 * STAGE0, 4 * STAGE1)
    assert first.total == 16 * STAGE0 + max(2 * first.activations_per_micro_batch, 4 * STAGE0)
    assert est.largest_stage is first
    assert est.layout.devices == 8 and est.fits is True
    text = est.format_text()
    assert text.index("\n  0 ") < text.index("\n  1 ")  # the largest stage first
    assert "not counted:" in text and "communication buffers" in text
    assert est.as_dict()["stages"][0]["total"] == first.total
    assert repr(est) == f"<CardMemory run.yaml: 2 stages, largest {first.total / 2**30:,.1f} GiB (stage 0), fits>"


def test_the_optimizer_step_holds_a_scaled_copy_of_the_accumulated_gradients(tmp_path):
    """mindformers trains a pipeline, or gradient accumulation, with MFPipelineWithLossScaleCell: its accu_grads (the
    gradients counted) live the whole job, and its step makes ``accu_grad * reciprocal(scale)`` for every gradient before
    the clip and the optimizer use them (the reduce-scattered shard with the parallel optimizer); without either, the
    gradients are the step's own and nothing is added. The stage's peak is the larger of that copy and the activations."""

    def stage0(name, cfg):
        est = estimate_card_memory(_write(tmp_path, cfg, name))
        return min(est.stages, key=lambda s: s.stage)

    piped = stage0("pp.yaml", SMALL)
    assert piped.step_gradients == 4 * STAGE0
    assert piped.step_extra == 4 * STAGE0 - piped.activations > 0
    assert piped.total == piped.weights + piped.gradients + piped.optimizer + 4 * STAGE0
    assert piped.as_dict()["step_gradients"] == 4 * STAGE0 and piped.as_dict()["step_extra"] == piped.step_extra

    flat = json.loads(json.dumps(SMALL))
    flat["parallel_config"].update(pipeline_stage=1, micro_batch_num=1)
    flat["model"]["model_config"]["offset"] = 0
    alone = stage0("flat.yaml", flat)
    assert (alone.step_gradients, alone.step_extra) == (0, 0)
    assert alone.total == alone.weights + alone.gradients + alone.optimizer + alone.activations

    flat["runner_config"]["gradient_accumulation_steps"] = 4
    accumulated = stage0("accu.yaml", flat)
    assert accumulated.step_gradients == 4 * accumulated.parameters

    sharded = stage0("po.yaml", _with(SMALL, enable_parallel_optimizer=True))
    assert sharded.step_gradients == 4 * (sharded.optimizer // 8)  # the shard the optimizer updates, float32

    # long enough sequences: the activations are more than the copy, and the total is the backward pass's
    long = json.loads(json.dumps(SMALL))
    long["model"]["model_config"]["seq_length"] = 4096
    held = stage0("long.yaml", long)
    assert held.activations > held.step_gradients and held.step_extra == 0
    assert held.total == held.weights + held.gradients + held.optimizer + held.activations


def test_the_parallel_optimizer_shards_by_its_level(tmp_path):
    """MindSpore's parallel optimizer over the data-parallel group (2): level1 shards weights and optimizer state but keeps
    the weights it all-gathers in the forward pass until the backward; level2 shards gradients too; level3 gathers again."""

    def stage0(name, **parallel):
        est = estimate_card_memory(_write(tmp_path, _with(SMALL, enable_parallel_optimizer=True, **parallel), name))
        return est, min(est.stages, key=lambda s: s.stage)

    level1, s1 = stage0("l1.yaml")
    _, s2 = stage0("l2.yaml", parallel_optimizer_config={"optimizer_level": "level2"})
    _, s3 = stage0("l3.yaml", parallel_optimizer_config={"optimizer_level": "level3"})
    half = STAGE0 // 2
    assert (s1.weights, s1.gradients, s1.optimizer) == (4 * half + 4 * (STAGE0 - half), 4 * STAGE0, 8 * half)
    assert (s2.weights, s2.gradients, s2.optimizer) == (4 * half + 4 * (STAGE0 - half), 4 * half, 8 * half)
    assert (s3.weights, s3.gradients, s3.optimizer) == (4 * half, 4 * half, 8 * half)
    assert level1.fits is None and level1.exit_code == 3  # no card given: nothing judged
    # recompute [1, 0] with parallel_optimizer_comm_recompute: the first layer gathers again when recomputed, keeping
    # nothing; the other two layers and the embedding keep their other half
    cfg = _with(SMALL, enable_parallel_optimizer=True)
    cfg["recompute_config"]["parallel_optimizer_comm_recompute"] = True
    s4 = min(estimate_card_memory(_write(tmp_path, cfg, "comm.yaml")).stages, key=lambda s: s.stage)
    kept = 2 * (LAYER_ON_A_CARD - LAYER_ON_A_CARD // 2) + (EMBEDDING_ON_A_CARD - EMBEDDING_ON_A_CARD // 2)
    assert s4.weights == 4 * half + 4 * kept and s4.gathered == 4 * kept


def test_routed_experts_are_split_by_expert_parallel_alone(tmp_path):
    """mindformers' GroupedMLP lays the experts out over expert_parallel, each expert whole: 4 experts over ep 2 is 2 a card."""
    cfg = json.loads(json.dumps(SMALL))
    cfg["parallel_config"]["expert_parallel"] = 2
    mc = cfg["model"]["model_config"]
    mc.update(model_type="qwen3_moe", num_experts=4, moe_intermediate_size=32, num_experts_per_tok=2, first_k_dense_replace=0)
    est = estimate_card_memory(_write(tmp_path, cfg))
    experts_on_a_card = 4 * 3 * 64 * 32 // 2  # gate, up, down of 64 x 32 for each of 4 experts, over ep 2
    layer = ATTENTION // 2 + 2 * 64 + 2 * 16 + 64 * 4 + experts_on_a_card  # attention over tp, norms (q/k too) and the router whole
    assert min(est.stages, key=lambda s: s.stage).parameters == 3 * layer + EMBEDDING_ON_A_CARD


def test_the_card_is_judged_by_name_by_size_and_by_max_device_memory(tmp_path):
    cfg = json.loads(json.dumps(SMALL))
    cfg["context"] = {"max_device_memory": "0.000001GB"}  # MindSpore may use 1 kB of the card: nothing fits in that
    est = estimate_card_memory(_write(tmp_path, cfg), card="910B2")
    assert est.card_gb == CARDS["910B2"] == 64 and est.usable_gb == 0.000001 and est.fits is False and est.exit_code == 1
    assert "does not fit" in est.verdict()
    with pytest.raises(UsageError, match="910B4"):
        estimate_card_memory(_write(tmp_path, SMALL), card="H100")
    with pytest.raises(UsageError):
        estimate_card_memory(_write(tmp_path, SMALL), card_gb=-3)


def test_an_offset_that_does_not_add_up_is_said():
    assert layers_per_stage(64, 4, [-1, -1, 1, 1]) == ([15, 15, 17, 17], None)
    # pipeline interleave (DeepSeek-V3 671B's): 61 // (8 x 2) = 3 a chunk, plus each row's offset, two chunks a stage
    assert layers_per_stage(61, 8, [[1] * 8, [1] * 7 + [-2]]) == ([8] * 7 + [5], None)
    per, note = layers_per_stage(10, 4, 0)
    assert sum(per) == 10 and "does not add up" in note
    # an int or a list offset under interleave 2: each of the 2 x 4 chunks holds 64 // 8 = 8, plus its offset
    assert layers_per_stage(64, 4, 0, interleave=2) == ([16] * 4, None)
    assert layers_per_stage(66, 4, [0, 0, 0, 1], interleave=2) == ([16, 16, 16, 18], None)


def test_sizes_come_from_config_json_and_from_the_class_defaults(tmp_path):
    """The same sources as the real run: pretrained_model_dir's config.json under the YAML; the class's defaults under both."""
    if model_sizes({"use_legacy": False, "model": {"model_config": {"model_type": "qwen3"}}}).sources.get("hidden_size") is None:
        pytest.skip("mindformers is not installed: no config classes to read defaults from")
    folder = tmp_path / "Qwen3-32B"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(QWEN3_32B))
    cfg = {"use_legacy": False, "pretrained_model_dir": str(folder), "model": {"model_config": {"num_hidden_layers": 2}}}
    sizes = model_sizes(cfg)
    assert sizes.config["hidden_size"] == 5120 and sizes.sources["hidden_size"] == f"{folder}/config.json"
    assert sizes.config["num_hidden_layers"] == 2 and sizes.sources["num_hidden_layers"] == "the YAML"
    assert sizes.config["seq_length"] == 4096  # TransformerConfig's default: neither file gives one
    # no folder, no sizes in the YAML: Qwen3Config's defaults in mindformers 1.9 (32 layers x 4096, 32 heads of 128, ffn 22016)
    only_type = model_sizes({"use_legacy": False, "model": {"model_config": {"model_type": "qwen3"}}})
    assert only_type.sources["num_hidden_layers"] == "Qwen3Config's default"
    est = estimate_card_memory(_write(tmp_path, {**SMALL, "model": {"model_config": {"model_type": "qwen3"}}}, "defaults.yaml"))
    by_hand = 32 * (4096 * 128 * (2 * 32 + 2 * 32) + 3 * 4096 * 22016 + 2 * 4096 + 2 * 128) + 2 * 151936 * 4096 + 4096  # q/k norms of 128
    assert est.parameters == by_hand and "Qwen3Config's default" in est.sizes_from


# Qwen3-32B's published config.json sizes (Hugging Face, Qwen/Qwen3-32B)
QWEN3_32B = {
    "architectures": ["Qwen3ForCausalLM"],
    "model_type": "qwen3",
    "hidden_size": 5120,
    "num_hidden_layers": 64,
    "num_attention_heads": 64,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "intermediate_size": 25600,
    "vocab_size": 151936,
    "max_position_embeddings": 40960,
    "tie_word_embeddings": False,
}


@pytest.fixture
def qwen3_32b_finetune(tmp_path):
    """mindformers' shipped finetune_qwen3.yaml pointed at a folder holding Qwen3-32B's config.json (the issue's case)."""
    from tests.test_robust_outputs_walks import shipped_config

    folder = tmp_path / "Qwen3-32B"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(QWEN3_32B))
    text = shipped_config("qwen3/finetune_qwen3.yaml").read_text().replace("/path/to/Qwen3-32B", str(folder))
    run = tmp_path / "finetune_qwen3.yaml"
    run.write_text(text)
    return run


def test_the_32b_config_json_at_its_own_size_is_refused_before_any_child(qwen3_32b_finetune, tmp_path):
    """--shrink never with Qwen3-32B's config.json: refused by prepare(), which starts nothing, as not rehearsed (never failed)."""
    from msnb.smoke.run.options import SmokeOptions
    from msnb.smoke.run.runner import prepare

    with pytest.raises(NotRehearsed, match=r"32\.\d+ B parameters.*config\.json"):
        prepare(SmokeOptions(config=str(qwen3_32b_finetune), shrink="never", device="CPU"))
    proc = subprocess.run(
        [sys.executable, "-m", "msnb.cli", "smoke", str(qwen3_32b_finetune), "--shrink", "never", "--json"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert proc.returncode == 3, proc.stderr
    assert json.loads(proc.stdout)["outcome"] == "not_rehearsed"
    assert not (tmp_path / "output").exists()  # nothing was trained: mindformers was never started
    # the same sizes give msnb memory's table: 64 layers over 4 stages, 16 each
    est = estimate_card_memory(qwen3_32b_finetune, card="910B2")
    assert [s.layers for s in sorted(est.stages, key=lambda s: s.stage)] == [16, 16, 16, 16]
    assert est.parameters / 1e9 == pytest.approx(32.8, rel=0.01)


def test_a_legacy_class_default_is_the_floor_too(tmp_path):
    """A legacy YAML that leaves the sizes to LlamaConfig's defaults (7B) at its own size: the floor counts the 7B."""
    from msnb.smoke.run.options import SmokeOptions
    from msnb.smoke.run.runner import prepare

    if model_sizes({"model": {"model_config": {"type": "LlamaConfig"}}}).sources.get("num_layers") is None:
        pytest.skip("mindformers is not installed: no config classes to read defaults from")
    cfg = {
        "run_mode": "train",
        "trainer": {"type": "CausalLanguageModelingTrainer", "model_name": "llama"},
        "runner_config": {"batch_size": 1, "epochs": 1},
        "model": {"arch": {"type": "LlamaForCausalLM"}, "model_config": {"type": "LlamaConfig"}},
    }
    with pytest.raises(NotRehearsed, match="LlamaConfig's default"):
        prepare(SmokeOptions(config=str(_write(tmp_path, cfg)), shrink="never", device="CPU"))


def test_msnb_memory_command_exit_codes(tmp_path):
    small = _write(tmp_path, SMALL)

    def run(*args):
        return subprocess.run([sys.executable, "-m", "msnb.cli", "memory", str(small), *args], capture_output=True, text=True, timeout=120)

    fits = run("--card-gb", "64")
    assert fits.returncode == 0 and "fits:" in fits.stdout
    unknown = run("--json")
    assert unknown.returncode == 3 and json.loads(unknown.stdout)["fits"] is None
    both = run("--card-gb", "64", "--card", "910B2")
    assert both.returncode == 2 and "not both" in both.stderr


def test_card_names_in_the_help_are_the_known_cards():
    from msnb.smoke.run.options import MEMORY_OPTIONS

    card_help = next(o.help for o in MEMORY_OPTIONS if o.flags == ("--card",))
    assert all(name in card_help for name in CARDS if name != "910")


def test_a_run_that_leaves_the_machine_without_memory_is_not_rehearsed_naming_it(tmp_path, monkeypatch):
    """A real smoke run (msnb's built-in model) on a machine with less free than the watch keeps free: stopped, not rehearsed, never failed."""
    from msnb.environment import available_memory_bytes
    from msnb.smoke.run.memory_watch import MemoryWatch
    from msnb.smoke.run.options import SmokeOptions
    from msnb.smoke.run.runner import judge, launch, prepare, watch

    free = available_memory_bytes()
    if free is None:
        pytest.skip("this system does not say how much memory is free")
    monkeypatch.chdir(tmp_path)
    launched = launch(prepare(SmokeOptions(device="CPU", steps=5, live=False)))
    watched = watch(launched, memory=MemoryWatch(launched.marker, reserve=free + (64 << 30), every=0.5))
    result = judge(launched, watched)
    assert watched.out_of_memory is not None and result.outcome == "not_rehearsed" and result.exit_code == 3
    assert "memory left" in result.not_rehearsed and "too small to rehearse" in result.not_rehearsed
    process = next(c for c in result.checks if c.name == "process")
    assert process.status == "warn" and "not rehearsed" in process.detail
    assert not any(c.status == "fail" for c in result.checks), [c for c in result.checks if c.status == "fail"]


def test_the_benchmark_agrees_with_zero_where_the_bytes_are_the_same(tmp_path):
    """benchmarks/bench_memory.py: no sharding is ZeRO stage 0 exactly (16 bytes a parameter both), level1 is ZeRO-1 plus the
    gathered embedding and head only, and every shipped config fits the cards mindformers documents it on."""
    import importlib.util

    from tests.test_robust_outputs_walks import shipped_config

    root = shipped_config("qwen3/pretrain_qwen3_32b_4k.yaml").parents[1]
    spec = importlib.util.spec_from_file_location("bench_memory", REPO / "benchmarks" / "bench_memory.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    rows = bench.zero_rows(root)
    assert {float(r[-1]) for r in rows if r[2] == "ZeRO stage 0"} == {1.0}
    assert all(1.0 < float(r[-1]) < 1.06 for r in rows if r[2] == "ZeRO stage 1")
    assert all(r[-1] is True for r in bench.documented_rows(root, tmp_path))
    assert all(r[-1] is True for r in bench.validated_rows(root, tmp_path))


def test_hostile_sizes_are_counted_not_looped_over(tmp_path):
    """10**11 layers is arithmetic, not 10**11 iterations; a billion pipeline stages is refused naming the key, not a billion rows."""
    cfg = json.loads(json.dumps(SMALL))
    cfg["model"]["model_config"].update(num_hidden_layers=10**11, offset=0)
    est = estimate_card_memory(_write(tmp_path, cfg))
    assert sum(s.layers for s in est.stages) == 10**11
    cfg["parallel_config"]["pipeline_stage"] = 10**9
    with pytest.raises(UsageError, match="pipeline_stage 1000000000"):
        estimate_card_memory(_write(tmp_path, cfg, "stages.yaml"))


def test_a_yaml_with_no_model_to_size_is_refused_in_one_line(tmp_path):
    monitor_only = _write(tmp_path, {"monitor_config": {"monitor_on": True}}, "monitor.yaml")
    with pytest.raises(UsageError, match="not a mindformers run config"):
        estimate_card_memory(monitor_only)
    cfg = {**SMALL, "pretrained_model_dir": str(tmp_path / "absent"), "trainer": {"type": "CausalLanguageModelingTrainer"}}
    cfg["model"] = {"model_config": {"model_type": "no_such"}}
    with pytest.raises(UsageError, match="has no config.json here"):
        estimate_card_memory(_write(tmp_path, cfg, "unsized.yaml"))
    # the shipped finetune_qwen3.yaml as shipped (/path/to/Qwen3-32B): Qwen3Config's 8B defaults would be a guess, a false 'fits'
    from tests.test_robust_outputs_walks import shipped_config

    with pytest.raises(UsageError, match=r"'/path/to/Qwen3-32B' has no config.json here.*num_hidden_layers"):
        estimate_card_memory(shipped_config("qwen3/finetune_qwen3.yaml"), card="910B2")


# The full-size network and its optimizer built with mindformers' own code, apart from msnb (its own stand-in for the
# communication, written here), parameters without data: per pipeline stage (the stage mindformers gives each cell),
# the trainable parameters, their dtypes, and the optimizer's state per parameter.
BUILT_PARAMETERS = r"""
import json, os, sys
import mindspore as ms
from mindspore.nn.utils import no_init_parameters
from mindformers import MindFormerConfig
from mindformers.core.parallel_config import build_parallel_config
from mindformers.trainer.base_trainer import BaseTrainer


class Steps:  # the learning-rate schedule asks the dataset's size
    def get_dataset_size(self):
        return 1000000

said = {}
for path, devices in json.loads(sys.argv[1]):
    os.environ["RANK_SIZE"] = str(devices)
    config = MindFormerConfig(path)
    cluster_context(config, devices)
    build_parallel_config(config)
    trainer = BaseTrainer(task="text_generation", model_name="built")
    trainer.config, trainer.train_dataset = config, Steps()
    with no_init_parameters():
        net = trainer.create_network_without_param_init(default_args={"parallel_config": config.parallel_config, "moe_config": config.moe_config,
                                                                      "dataset_config": config.train_dataset})
        optimizer = trainer.create_optimizer_scheduler_without_param_init(trainer.wrap_network_with_tool_cells(net), set())
    stage_of = {}
    for name, cell in net.cells_and_names():  # the innermost cell with a pipeline_stage places its parameters
        if getattr(cell, "pipeline_stage", None) is not None:
            for p in cell.get_parameters():
                if p.name not in stage_of or len(name) > len(stage_of[p.name][1]):
                    stage_of[p.name] = (cell.pipeline_stage, name)
    stages, dtypes = {}, set()
    for p in net.trainable_params():
        st = stage_of.get(p.name, (0, ""))[0]
        stages[st] = stages.get(st, 0) + int(p.size)
        dtypes.add(str(p.dtype))
    state = {}
    for p in optimizer.get_parameters():
        if p.name.startswith(("adam_m.", "adam_v.", "moments.")):
            state[str(p.dtype)] = state.get(str(p.dtype), 0) + int(p.size)
    said[path] = {"stages": stages, "dtypes": sorted(dtypes), "state": state, "trainable": sum(stages.values())}
print("BUILT" + json.dumps(said))
"""
BUILT_PARAMETERS = BUILT_PARAMETERS.replace(
    "\nfrom mindformers import MindFormerConfig\n", CLUSTER_STANDIN + CLUSTER_CONTEXT + "from mindformers import MindFormerConfig\n", 1
)


@pytest.mark.skipif(importlib.util.find_spec("mindformers") is None, reason="mindformers is not installed")
def test_the_estimates_parameters_per_stage_are_the_built_networks(tmp_path):
    """The weights, gradients and optimizer state msnb counts per stage, held to the network mindformers builds at full
    size for each shipped config: exactly the same trainable parameters on each pipeline stage (the routers' untrained
    buffers, kilobytes without gradients or optimizer state, are left out of both) (before tensor and expert parallelism split them), in the
    dtype msnb counts the weights and gradients in, and the optimizer's state per parameter in bytes."""
    from tests.test_robust_outputs_walks import shipped_config

    shipped = {  # config: the cards its README launches it on
        "qwen3/pretrain_qwen3_32b_4k.yaml": 16,
        "qwen3_moe/pretrain_qwen3_30b_a3b_4k.yaml": 16,
        "deepseek3/pretrain_deepseek3_12b_16p_pp16.yaml": 16,
        "deepseek3/pretrain_deepseek3_671b.yaml": 256,
    }
    paths = {name: str(shipped_config(name)) for name in shipped}
    proof = subprocess.run(
        [sys.executable, "-c", BUILT_PARAMETERS, json.dumps([[paths[n], d] for n, d in shipped.items()])],
        cwd=tmp_path, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert "BUILT" in proof.stdout, proof.stderr[-3000:]
    built = json.loads(proof.stdout.split("BUILT", 1)[1])
    sizes = {"Float32": 4, "Float16": 2, "BFloat16": 2}
    for name, path in paths.items():
        got = built[path]
        whole = estimate_card_memory(path, layout={"model_parallel": 1, "expert_parallel": 1})  # a stage's parameters, unsplit
        assert len(whole.stages) == len(got["stages"]), name
        for stage in whole.stages:
            network = got["stages"][str(stage.stage)]
            assert stage.parameters == network, (name, stage.stage, stage.parameters, network)
        assert whole.parameters == got["trainable"], name
        (dtype,) = got["dtypes"]
        per_parameter = sum(sizes[t] * n for t, n in got["state"].items()) / got["trainable"]  # AdamW: two float32 moments
        if whole.layout.parallel_optimizer:  # deepseek3 671B shards them: the sharding is tested apart, the bytes a parameter here
            continue
        for stage in whole.stages:
            assert stage.weights == stage.gradients == sizes[dtype] * stage.parameters, (name, stage.stage)
            assert stage.optimizer == round(per_parameter) * stage.parameters, (name, stage.stage, per_parameter)
    assert {round(sum(sizes[t] * n for t, n in b["state"].items()) / b["trainable"], 3) for b in built.values()} == {8.0}
