"""What real configs use, rehearsed on CPU through mindformers' real Trainer: LoRA with dropout, mask compression,
a Hugging Face pretrained_model_dir that is here, the config's own MindRecord data at a shrunk sequence, and a
subset of the shipped-config sweep.

Each training costs 30-60 s, so one run shows several things where it can.  MindSpore and mindformers stay out
of the test process (importing mindformers writes ./output): whatever needs them runs in a child.
"""

import importlib.util
import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from msnb.config import load_config
from msnb.errors import NotRehearsed, SmokeError
from msnb.smoke import run_smoke
from msnb.smoke.mindformers.plan import plan_mindformers, registered_model_type

pytest.importorskip("mindspore")
MF_SPEC = importlib.util.find_spec("mindformers")  # located, not imported (importing writes ./output)
if MF_SPEC is None:
    pytest.skip("mindformers is not installed (pip install 'msnb[mindformers]')", allow_module_level=True)
SHIPPED = Path(MF_SPEC.origin).parent.parent / "configs"
REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks"))
import smoke_sweep  # noqa: E402  (benchmarks/ is no package)

QWEN3_32B = smoke_sweep.HF_CONFIGS["Qwen3-32B"]


def _hf_folder(tmp: Path) -> Path:
    folder = tmp / "Qwen3-32B"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(QWEN3_32B))
    return folder


def _child(code: str, cwd: Path, timeout: int = 300) -> str:
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, cwd=cwd, timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


# ---- plans: plain Python, no training -------------------------------------------------------------------------------


def test_a_present_pretrained_model_dir_is_shrunk_from_its_config_json_and_listed(tmp_path):
    folder = _hf_folder(tmp_path)
    path = tmp_path / "ft.yaml"
    path.write_text(f"base_config: {SHIPPED / 'qwen3' / 'finetune_qwen3.yaml'}\npretrained_model_dir: {folder}\n")
    plan = plan_mindformers(load_config(path), device="CPU", steps=5)
    mc = plan.config["model"]["model_config"]
    # the YAML's model_config wins over config.json in mindformers' merge: every size is overridden there, small
    assert (mc["num_hidden_layers"], mc["hidden_size"], mc["num_attention_heads"], mc["num_key_value_heads"]) == (2, 64, 2, 2)
    assert (mc["intermediate_size"], mc["vocab_size"], mc["head_dim"], mc["max_position_embeddings"]) == (128, 256, 32, 64)
    assert plan.config["pretrained_model_dir"] == str(folder)  # the folder still supplies everything else
    changes = "; ".join(plan.change_lines())
    assert "model.model_config: num_hidden_layers 64 -> 2, hidden_size 5120 -> 64" in changes
    assert f"the value in {folder}/config.json)" in changes and "seq_length 4096 -> 32" in changes
    assert plan.source == "ft.yaml" and " from ft.yaml, shrunk from 64 layers" in plan.describe()  # the YAML named, not config.json


def test_a_pretrained_config_json_that_is_no_json_object_is_refused_naming_the_file(tmp_path):
    folder = tmp_path / "hf"
    folder.mkdir()
    (folder / "config.json").write_text("[1, 2]")
    path = tmp_path / "ft.yaml"
    path.write_text(f"base_config: {SHIPPED / 'qwen3' / 'finetune_qwen3.yaml'}\npretrained_model_dir: {folder}\n")
    with pytest.raises(SmokeError, match=r"hf/config\.json: pretrained_model_dir's config\.json is not a JSON object"):
        plan_mindformers(load_config(path), device="CPU", steps=5)


@pytest.mark.parametrize(
    "extra, words",
    [
        ("use_eod_attn_mask_compression: True", "use_eod_attn_mask_compression (packed documents"),
        ("experimental_attention_variant: dsa", "DeepSeek sparse attention (dsa"),
    ],
)
def test_an_attention_kernel_with_no_cpu_replacement_is_not_rehearsed_before_launch(tmp_path, run_msnb, extra, words):
    path = tmp_path / "packed.yaml"
    path.write_text(f"base_config: {SHIPPED / 'qwen3' / 'pretrain_qwen3_32b_4k.yaml'}\nmodel:\n  model_config:\n    {extra}\n")
    proc = run_msnb("smoke", path, "--no-live", check=3, cwd=tmp_path, timeout=120)
    assert words in proc.stderr and "runs on Ascend" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert not (tmp_path / "output").exists()


def test_packed_documents_switched_on_by_the_shipped_dataset_flag_are_not_rehearsed_naming_the_feature(tmp_path, run_msnb):
    """The shipped Qwen3 pretrain with its Megatron loader's create_compressed_eod_mask on: mindformers' Trainer turns
    use_eod_attn_mask_compression on from it (and refused flash attention off); the same rule as in model_config."""
    config = yaml.safe_load((SHIPPED / "qwen3" / "pretrain_qwen3_32b_4k.yaml").read_text())
    config["train_dataset"]["data_loader"]["config"]["create_compressed_eod_mask"] = True
    config["train_dataset_task"]["dataset_config"] = config["train_dataset"]
    path = tmp_path / "packed.yaml"
    path.write_text(yaml.safe_dump(config))
    proc = run_msnb("smoke", path, "--json", "--no-live", check=3, cwd=tmp_path, timeout=120)
    verdict = json.loads(proc.stdout)
    assert verdict["outcome"] == "not_rehearsed" and verdict["exit_code"] == 3, verdict
    assert verdict["reason"].startswith(f"{path}: train_dataset.data_loader.config.create_compressed_eod_mask makes mindformers switch on "
                                        "use_eod_attn_mask_compression (packed documents"), verdict["reason"]  # fmt: skip
    assert not (tmp_path / "output").exists()


@pytest.mark.parametrize(
    "base, flag",
    [
        ("qwen3/finetune_qwen3.yaml", "train_dataset.data_loader.create_compressed_eod_mask"),  # the Hugging Face loader
        ("qwen3/finetune_qwen3.yaml", "train_dataset.data_loader.adaptor_config.compress_mask"),  # the common loader
        ("glm4/finetune_glm4_9b.yaml", "train_dataset.data_loader.create_compressed_eod_mask"),  # a legacy model too
        ("glm4/finetune_glm4_9b.yaml", "model.model_config.use_eod_attn_mask_compression"),
    ],
)
def test_every_switch_of_packed_documents_is_one_rule(tmp_path, base, flag):
    if not (SHIPPED / base).is_file():
        pytest.skip(f"this mindformers ships no {base}")
    parts = flag.split(".")
    text = (
        f"base_config: {SHIPPED / base}\n"
        + "".join(f"{'  ' * i}{part}:\n" for i, part in enumerate(parts[:-1]))
        + f"{'  ' * (len(parts) - 1)}{parts[-1]}: True\n"
    )
    path = tmp_path / "packed.yaml"
    path.write_text(text)
    said = "" if flag.startswith("model.") else f"{flag} makes mindformers switch on "
    with pytest.raises(NotRehearsed, match=re.escape(f"{path}: {said}use_eod_attn_mask_compression (packed documents: ")):
        plan_mindformers(load_config(path), device="CPU", steps=5)


@pytest.mark.parametrize("name, expected", [("deepseekV3", "deepseek_v3"), ("Qwen3", "qwen3"), ("Qwen3MoeForCausalLM", "qwen3_moe"), ("llm", None)])
def test_a_model_name_means_the_registered_type_it_spells(name, expected):
    assert registered_model_type(name) == expected


def test_the_registered_types_are_what_the_installed_mindformers_registers(tmp_path):
    """The plan's list (it imports no mindformers) against mindformers' own registry, read in a child."""
    from msnb.smoke.mindformers.plan import MCORE_MODEL_TYPES

    out = _child(
        """
        import json
        import mindformers
        from mindformers.tools.register import MindFormerRegister, MindFormerModuleType
        reg = MindFormerRegister.registry.get(MindFormerModuleType.CONFIG, {})
        print(json.dumps(sorted(reg)))
        """,
        tmp_path,
    )
    registered = json.loads(out.strip().splitlines()[-1])
    for model_type in MCORE_MODEL_TYPES:
        assert model_type in registered or any(model_type.replace("_", "") in r.lower().replace("_", "") for r in registered), model_type


def test_the_child_data_rows_have_the_lengths_each_model_reads(tmp_path):
    """Synthetic rows for legacy LLaMA (it cuts input_ids[:, :-1] and labels[:, 1:]) and MindRecord rows cut to the shrunk sequence."""
    out = _child(
        f"""
        import json, numpy as np
        from mindspore.mindrecord import FileWriter
        from msnb.smoke.mindformers.worker import sliced_mindrecord, synthetic_dataset
        lens = {{}}
        ds = synthetic_dataset(["input_ids", "labels"], 8, 50, 2, 2, model_shifts=True)
        row = next(ds.create_dict_iterator(output_numpy=True))
        lens["shifts"] = [row["input_ids"].shape[1], row["labels"].shape[1], bool((row["input_ids"] == row["labels"]).all())]
        row = next(synthetic_dataset(["input_ids", "labels"], 8, 50, 2, 2).create_dict_iterator(output_numpy=True))
        lens["shifted"] = [row["input_ids"].shape[1], row["labels"].shape[1], bool((row["input_ids"][:, 1:] == row["labels"][:, :-1]).all())]
        w = FileWriter({str(tmp_path / "d.mindrecord")!r}, shard_num=1, overwrite=True)
        w.add_schema({{"input_ids": {{"type": "int32", "shape": [-1]}}, "labels": {{"type": "int32", "shape": [-1]}}}}, "s")
        w.write_raw_data([{{"input_ids": np.arange(65, dtype=np.int32), "labels": np.arange(64, dtype=np.int32)}} for _ in range(4)])
        w.commit()
        row = next(sliced_mindrecord([{str(tmp_path / "d.mindrecord")!r}], ["input_ids", "labels"], 64, 16, 2, 4).create_dict_iterator(output_numpy=True))
        lens["mindrecord"] = [row["input_ids"].shape[1], row["labels"].shape[1], row["input_ids"][0].tolist()[:3]]
        cols = ["input_ids", "labels", "loss_mask", "position_ids", "attention_mask"]
        w = FileWriter({str(tmp_path / "sft.mindrecord")!r}, shard_num=1, overwrite=True)
        w.add_schema({{c: {{"type": "int32", "shape": [-1, 64] if c == "attention_mask" else [-1]}} for c in cols}}, "sft")
        mask = np.zeros(64, np.int32)
        mask[40:50] = 1  # a prompt of 40 tokens, an answer of 10, padding
        pos = np.arange(64, dtype=np.int32)
        pos[44:] -= 44  # a second packed document from token 44
        square = np.arange(64 * 64, dtype=np.int32).reshape(64, 64)
        w.write_raw_data([{{"input_ids": np.arange(64, dtype=np.int32), "labels": np.arange(1, 65, dtype=np.int32), "loss_mask": mask,
                           "position_ids": pos, "attention_mask": square}}] * 2)
        w.commit()
        row = next(sliced_mindrecord([{str(tmp_path / "sft.mindrecord")!r}], cols, 64, 16, 2, 2).create_dict_iterator(output_numpy=True))
        lens["window"] = {{c: row[c][0].tolist() for c in cols if c != "attention_mask"}}
        lens["window"]["attention_mask"] = bool((row["attention_mask"][0] == square[32:48, 32:48]).all())
        print(json.dumps(lens))
        """,
        tmp_path,
    )
    lens = json.loads(out.strip().splitlines()[-1])
    assert lens["shifts"] == [9, 9, True]  # seq + 1 each, the same tokens: the model shifts them itself
    assert lens["shifted"] == [8, 8, True]  # labels are the next tokens
    assert lens["mindrecord"] == [17, 16, [0, 1, 2]]  # 65 -> 17 and 64 -> 16: the offset from seq_length kept
    # a finetune row: the window starts half a window before its first trained token, the same for every column
    window = lens["window"]
    assert window["input_ids"] == list(range(32, 48)) and window["labels"] == list(range(33, 49))
    assert window["loss_mask"] == [0] * 8 + [1] * 8 and window["attention_mask"] is True
    assert window["position_ids"] == list(range(12)) + [0, 1, 2, 3]  # from 0 at the window, the next document's own


def test_softmax_attention_rebuilds_the_compressed_mask_exactly(tmp_path):
    """sparse_mode 2 (mask compression: a fixed 2048 x 2048 mask is passed) gives what an explicit causal mask gives."""
    out = _child(
        """
        import numpy as np, mindspore as ms
        ms.set_device("CPU")
        from msnb.smoke.mindformers.cpu_rehearsal import _flash_attention
        _flash_attention()
        from mindformers.parallel_core.training_graph.transformer import flash_attention as fa
        rng = np.random.default_rng(0)
        q, k, v = (ms.Tensor(rng.standard_normal((2, 2, 16, 8)).astype(np.float32)) for _ in range(3))
        causal = ms.Tensor(np.triu(np.ones((2, 1, 16, 16), np.uint8), 1))
        compressed = ms.Tensor(np.triu(np.ones((2048, 2048), np.uint8), 1))
        plain = fa.FlashAttentionScore(2, scale_value=0.35, input_layout="BNSD", sparse_mode=0)(q, k, v, None, None, None, causal)[3]
        comp = fa.FlashAttentionScore(2, scale_value=0.35, input_layout="BNSD", sparse_mode=2)(q, k, v, None, None, None, compressed)[3]
        print(float(np.abs(plain.asnumpy() - comp.asnumpy()).max()), float(np.abs(plain.asnumpy()).max()))
        """,
        tmp_path,
    )
    diff, scale = map(float, out.strip().splitlines()[-1].split())
    assert diff < 1e-6 < scale


# ---- real trainings through mindformers' Trainer -------------------------------------------------------------------


def test_lora_with_dropout_and_mask_compression_train_on_cpu(tmp_path):
    """Qwen3 with a LoRA adapter (lora_dropout 0.1: DropoutExt is Ascend's) and use_attn_mask_compression (flash attention stays on)."""
    path = tmp_path / "qwen3_lora.yaml"
    path.write_text(
        f"base_config: {SHIPPED / 'qwen3' / 'pretrain_qwen3_32b_4k.yaml'}\n"
        + textwrap.dedent("""\
            model:
              model_config:
                use_attn_mask_compression: True
                pet_config:
                  pet_type: lora
                  lora_rank: 4
                  lora_alpha: 8
                  lora_dropout: 0.1
                  target_modules: '.*linear_qkv|.*linear_proj'
                  freeze_include: ['*']
                  freeze_exclude: ['*lora*']
            callbacks:
              - {type: MFLossMonitor, per_print_times: 1}
        """)
    )
    result = run_smoke(path, live=False, steps=12)
    assert result.passed, result.format_text()
    rehearsal = result.check("cpu_rehearsal").detail
    assert "Dropout (LoRA's lora_dropout" in rehearsal and "CausalMaskGenerate" in rehearsal
    assert "use_flash_attention" not in result.check("config_changes").detail  # left on: mindformers refuses compression without it
    assert result.check("callbacks").detail.startswith("MFLossMonitor: 12 lines")


def test_the_configs_own_mindrecord_trains_at_the_shrunk_sequence(tmp_path):
    """A legacy LLaMA finetune whose MindRecord rows are 2,049 tokens, shrunk to seq 32: every column cut consistently, past the prompt."""
    _child(
        f"""
        import numpy as np
        from mindspore.mindrecord import FileWriter
        w = FileWriter({str(tmp_path / "sft.mindrecord")!r}, shard_num=1, overwrite=True)
        w.add_schema({{"input_ids": {{"type": "int32", "shape": [-1]}}, "labels": {{"type": "int32", "shape": [-1]}}}}, "sft")
        rng = np.random.default_rng(0)
        rows = []
        for _ in range(32):
            t = (3 + (int(rng.integers(0, 200)) + np.arange(2049)) % 200).astype(np.int32)
            labels = t.copy()
            labels[:300] = -100  # the prompt: the rows' first 32 tokens train nothing
            rows.append({{"input_ids": t, "labels": labels}})
        w.write_raw_data(rows)
        w.commit()
        """,
        tmp_path,
    )
    path = tmp_path / "llama_sft.yaml"
    path.write_text(
        textwrap.dedent(f"""\
            seed: 0
            run_mode: finetune
            use_legacy: True
            use_parallel: True
            trainer: {{type: CausalLanguageModelingTrainer, model_name: llama3_1_8b}}
            runner_config: {{epochs: 2, batch_size: 4, sink_mode: False}}
            runner_wrapper: {{type: MFTrainOneStepCell, scale_sense: 1.0, use_clip_grad: True}}
            optimizer: {{type: AdamW, betas: [0.9, 0.95], eps: 1.e-8, weight_decay: 0.0}}
            lr_schedule: {{type: ConstantWarmUpLR, learning_rate: 1.e-5, warmup_ratio: 0, total_steps: -1}}
            context: {{mode: 0, device_target: Ascend}}
            parallel_config: {{data_parallel: 8, model_parallel: 1, pipeline_stage: 1, micro_batch_num: 1}}
            train_dataset: &train_dataset
              data_loader: {{type: MindDataset, dataset_dir: {tmp_path / "sft.mindrecord"}, shuffle: True}}
              input_columns: [input_ids, labels]
            train_dataset_task: {{type: CausalLanguageModelDataset, dataset_config: *train_dataset}}
            model:
              model_config: {{type: LlamaConfig, seq_length: 2048, hidden_size: 4096, num_layers: 32, num_heads: 32, vocab_size: 256,
                             compute_dtype: bfloat16, param_init_type: float32}}
              arch: {{type: LlamaForCausalLM}}
            callbacks:
              - {{type: MFLossMonitor, per_print_times: 1}}
        """)
    )
    result = run_smoke(path, live=False, steps=8)
    assert result.passed, result.format_text()
    assert result.check("data").detail.endswith(
        "every column cut to the shrunk sequence (2048 -> 32 tokens, offsets kept), a row's window from half a window before its first trained token (labels)"
    )
    assert result.check("callbacks").detail.startswith("MFLossMonitor: 8 lines")
    losses = result.tables.scalars.where(tag="loss").value
    assert len(losses) >= 8 and (losses > 0.1).all(), losses  # cut to their first 32 tokens, the rows trained nothing: a loss of 0


def test_a_subset_of_the_shipped_config_sweep(tmp_path):
    """The sweep on the shipped Qwen3 finetune: a user's copy with monitoring and a Hugging Face folder that is here."""
    md, rows = tmp_path / "SWEEP.md", tmp_path / "rows.json"
    code = smoke_sweep.main(
        ["--pattern", "qwen3/finetune_qwen3.yaml", "--steps", "4", "--markdown", str(md), "--json", str(rows), "--keep", str(tmp_path / "cfg")]
    )
    data = json.loads(rows.read_text())
    assert [(r["config"], r["model"], r["outcome"]) for r in data["rows"]] == [("qwen3/finetune_qwen3.yaml", "Qwen3", "passed")], data
    assert code == 0 and data["rows"][0]["peak_rss_mib"] > 100
    verdict = json.loads((tmp_path / "cfg" / "qwen3__finetune_qwen3.verdict.json").read_text())
    changes = next(c["detail"] for c in verdict["checks"] if c["name"] == "config_changes")
    assert "num_hidden_layers 64 -> 2" in changes and "Qwen3-32B/config.json" in changes  # shrunk from the folder's config.json
    text = md.read_text()
    assert "mindformers 1.9" in text and "| qwen3/finetune_qwen3.yaml | Qwen3 | passed |" in text
