"""mindformers-style YAML: inheritance, ${} references, monitor_config validation, lint, `msnb config`."""

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from msnb.config import ConfigError, check_config, lint, load_config, monitor_settings


def write(root: Path, name: str, text: str) -> Path:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


def write_tree(root: Path) -> Path:
    """team/monitor.yaml <- base.yaml <- run.yaml, plus a second base in a list."""
    write(
        root,
        "team/monitor.yaml",
        """\
        monitor_config:
          summary_dir: ./summary
          collect_freq: 50
          per_print_times: 10
        runner_config:
          epochs: 1
    """,
    )
    write(
        root,
        "team/data.yaml",
        """\
        train_dataset:
          batch_size: 4
          data_loader: {type: MindDataset, dataset_dir: /data/a}
        runner_config:
          epochs: 3
    """,
    )
    write(
        root,
        "base.yaml",
        """\
        base_config: team/monitor.yaml
        seed: 0
        runner_config:
          batch_size: 8
          sink_size: 2
    """,
    )
    return write(
        root,
        "run.yaml",
        """\
        base_config: [base.yaml, team/data.yaml]
        runner_config:
          batch_size: 16
        monitor_config:
          collect_freq: ${runner_config.batch_size}
          per_print_times: ${monitor_config.collect_freq}
        train_dataset:
          data_loader: {dataset_dir: /data/b}
    """,
    )


@pytest.fixture
def tree(tmp_path):
    return write_tree(tmp_path)


def test_inheritance_two_levels_and_a_list_of_bases(tree):
    cfg = load_config(tree)
    assert cfg.get("seed") == 0  # from base.yaml
    assert cfg.get("runner_config.batch_size") == 16  # the file itself wins
    assert cfg.get("runner_config.sink_size") == 2  # dicts merge key by key
    assert cfg.get("runner_config.epochs") == 3  # a later base wins over an earlier one
    assert cfg.get("train_dataset.data_loader") == {"type": "MindDataset", "dataset_dir": "/data/b"}
    assert cfg.get("monitor_config.summary_dir") == "./summary"
    assert [Path(f).name for f in cfg.files] == ["monitor.yaml", "base.yaml", "data.yaml", "run.yaml"]
    assert Path(cfg.where("monitor_config.summary_dir")).name == "monitor.yaml"
    assert Path(cfg.where("runner_config.epochs")).name == "data.yaml"


def test_references_are_resolved_across_files(tree):
    cfg = load_config(tree)
    assert cfg.get("monitor_config.collect_freq") == 16
    assert cfg.get("monitor_config.per_print_times") == 16  # a reference to a reference
    assert load_config(tree, resolve=False).get("monitor_config.collect_freq") == "${runner_config.batch_size}"


def test_environment_references(tmp_path, monkeypatch):
    monkeypatch.setenv("MSNB_TEST_RUN", "exp7")
    path = write(tmp_path, "env.yaml", "monitor_config:\n  summary_dir: ./summary/${oc.env:MSNB_TEST_RUN}\n")
    assert load_config(path).get("monitor_config.summary_dir") == "./summary/exp7"


def test_cycle_is_reported_with_the_chain(tmp_path):
    write(tmp_path, "a.yaml", "base_config: b.yaml\n")
    write(tmp_path, "b.yaml", "base_config: [c.yaml]\n")
    write(tmp_path, "c.yaml", "base_config: a.yaml\n")
    with pytest.raises(ConfigError) as err:
        load_config(tmp_path / "a.yaml")
    msg = str(err.value)
    assert "cycle" in msg and "a.yaml -> " in msg and "c.yaml" in msg and err.value.key == "base_config"


def test_missing_base_names_the_including_file(tmp_path):
    path = write(tmp_path, "run.yaml", "base_config: ../nowhere/base.yaml\n")
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert err.value.file == str(path.resolve()) and err.value.key == "base_config" and "nowhere/base.yaml" in str(err.value)


def test_reference_to_a_missing_key_names_file_and_key(tree, tmp_path):
    path = write(tmp_path, "broken.yaml", "base_config: run.yaml\nmonitor_config:\n  summary_dir: ${runner_config.nope}\n")
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert err.value.key == "monitor_config.summary_dir"
    assert err.value.file == str(path.resolve())
    assert "runner_config.nope" in str(err.value)


def test_reference_error_in_a_base_names_the_base(tree, tmp_path):
    write(tmp_path, "team/bad.yaml", "monitor_config:\n  flush_interval: ${nope.value}\n")
    path = write(tmp_path, "uses_bad.yaml", "base_config: team/bad.yaml\n")
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert Path(err.value.file).name == "bad.yaml" and err.value.key == "monitor_config.flush_interval"


def test_unknown_key_and_wrong_type(tmp_path):
    path = write(tmp_path, "typo.yaml", "monitor_config:\n  colect_freq: 10\n")
    with pytest.raises(ConfigError) as err:
        monitor_settings(load_config(path))
    assert err.value.key == "monitor_config.colect_freq" and err.value.file == str(path.resolve())
    assert "did you mean 'collect_freq'" in str(err.value)

    base = write(tmp_path, "types_base.yaml", "monitor_config:\n  keep_default_callbacks: 1\n")
    path = write(tmp_path, "types.yaml", "base_config: types_base.yaml\nmonitor_config:\n  collect_freq: 10\n")
    with pytest.raises(ConfigError) as err:
        monitor_settings(load_config(path))
    assert err.value.key == "monitor_config.keep_default_callbacks" and err.value.file == str(base.resolve())
    assert "true/false" in str(err.value)

    path = write(tmp_path, "nested.yaml", "monitor_config:\n  collect_specified_data:\n    collect_graph: yes please\n")
    with pytest.raises(ConfigError, match="collect_specified_data.collect_graph"):
        monitor_settings(load_config(path))
    path = write(tmp_path, "es.yaml", "monitor_config:\n  early_stop: {window: 10, patiance: 3}\n")
    with pytest.raises(ConfigError, match="early_stop.patiance"):
        monitor_settings(load_config(path))


def test_yaml_syntax_error_names_file_and_line(tmp_path):
    path = write(tmp_path, "syntax.yaml", "a: 1\nb: [1, 2\nc: 3\n")
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert err.value.file == str(path.resolve()) and err.value.line is not None and "invalid YAML" in str(err.value)
    path = write(tmp_path, "list.yaml", "- a\n- b\n")
    with pytest.raises(ConfigError, match="top level must be a mapping"):
        load_config(path)


MINDFORMERS_YAML = """\
seed: 0
output_dir: './output'
run_mode: 'train'
use_parallel: True
trainer:
  type: CausalLanguageModelingTrainer
  model_name: 'llama2_7b'
runner_config:
  epochs: 2
  batch_size: 1
  sink_mode: True
  sink_size: 1
  gradient_accumulation_steps: 8
runner_wrapper:
  type: MFTrainOneStepCell
  scale_sense: 1.0
  use_clip_grad: True
optimizer:
  type: AdamW
  betas: [0.9, 0.95]
  eps: 1.e-8
lr_schedule:
  type: CosineWithWarmUpLR
  learning_rate: 5.e-5
  warmup_ratio: 0.03
context:
  mode: 0
  device_target: "Ascend"
  max_device_memory: "58GB"
parallel:
  parallel_mode: 1
  gradients_mean: False
  full_batch: True
parallel_config:
  data_parallel: 8
  model_parallel: 1
  pipeline_stage: 1
model:
  model_config:
    type: LlamaConfig
    batch_size: 1
    seq_length: 4096
    hidden_size: 4096
    num_layers: 32
  arch:
    type: LlamaForCausalLM
callbacks:
  - type: MFLossMonitor
  - type: CheckpointMonitor
    prefix: "llama2_7b"
    save_checkpoint_steps: 100
monitor_config:
  monitor_on: True
  dump_path: './dump'
  target: ['layers.0', 'layers.1']
  invert: False
  step_interval: 1
  local_loss_format: ['log', 'tensorboard']
  local_norm_format: ['log', 'tensorboard']
  device_local_norm_format: ['log', 'tensorboard']
  optimizer_state_format: null
  weight_state_format: null
  throughput_baseline: null
  print_struct: False
  check_for_global_norm: False
  global_norm_spike_threshold: 1.0
tensorboard:
  tensorboard_dir: 'worker/tensorboard'
  tensorboard_queue_size: 10
  log_loss_scale_to_tensorboard: True
  log_timers_to_tensorboard: True
"""


@pytest.fixture(scope="module")
def mindformers_reads(tmp_path_factory):
    """What mindformers' own loader makes of MINDFORMERS_YAML and of the inheritance tree: one child process imports
    mindformers for both tests that ask it (importing it takes seconds, and writes ./output: the child works in a
    folder of its own)."""
    root = tmp_path_factory.mktemp("mindformers-reads")
    llama = write(root, "llama2_7b.yaml", MINDFORMERS_YAML)
    tree = write_tree(root / "tree")
    code = textwrap.dedent(f"""\
        import json, os
        os.chdir({str(root)!r})
        from mindformers.tools.register import MindFormerConfig
        from mindformers.tools.register.template import MonitorConfig
        tree = MindFormerConfig({str(tree)!r})
        tree = tree.to_dict() if hasattr(tree, "to_dict") else dict(tree)
        cfg = MindFormerConfig({str(llama)!r})
        MonitorConfig.apply(dict(cfg.monitor_config))
        try:
            MonitorConfig.apply({{"summary_dir": "./summary"}})
            rejected = None
        except KeyError as exc:
            rejected = str(exc)
        llama = {{"keys": sorted(MonitorConfig.keys()), "rejected": rejected, "epochs": cfg.runner_config.epochs}}
        print(json.dumps({{"llama": llama, "tree": tree}}, default=str))
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return {**json.loads(proc.stdout.strip().splitlines()[-1]), "llama_path": llama, "tree_path": tree}


def test_a_real_mindformers_yaml_loads_and_mindformers_agrees(mindformers_reads):
    path = mindformers_reads["llama_path"]
    report = check_config(path)
    settings = monitor_settings(load_config(path))
    assert settings.mindformers["monitor_on"] is True and settings.mindformers["target"] == ["layers.0", "layers.1"]
    assert settings.present == frozenset()  # no msnb keys: mindformers gets exactly what it accepts
    assert report.config["tensorboard"]["tensorboard_dir"] == "worker/tensorboard"
    rules = {f.rule for f in report.findings}
    # 8 data-parallel devices, but no note about msnb's summary_dir: the config has none (mindformers writes its own summaries)
    assert "summary-dir-per-rank" not in rules and "summary-dir-no-rank" not in rules
    assert "duplicate-printing" not in rules  # a mindformers run config's callbacks are mindformers' own, not msnb's defaults
    assert "msnb-keys-in-mindformers-config" not in rules

    # mindformers itself: it loads this file, accepts this monitor_config, and knows exactly msnb's list of its keys;
    # it rejects msnb's keys inside monitor_config, which is what the lint warns about
    answer = mindformers_reads["llama"]
    from msnb.config.monitor_schema import MINDFORMERS_MONITOR_KEYS

    assert set(answer["keys"]) == set(MINDFORMERS_MONITOR_KEYS)
    assert answer["rejected"] and "summary_dir" in answer["rejected"]
    assert answer["epochs"] == 2


def test_inheritance_agrees_with_mindformers(mindformers_reads):
    """mindformers' own loader merges the same tree the same way (references aside)."""
    theirs = mindformers_reads["tree"]
    ours = load_config(mindformers_reads["tree_path"], resolve=False).data
    assert theirs["seed"] == ours["seed"]
    # mindformers adds its template's defaults (and normalises sink_size); compare what the files set
    for key in ("batch_size", "epochs"):
        assert theirs["runner_config"][key] == ours["runner_config"][key], key
    assert theirs["train_dataset"]["data_loader"] == ours["train_dataset"]["data_loader"]
    assert theirs["train_dataset"]["batch_size"] == ours["train_dataset"]["batch_size"]
    assert theirs["monitor_config"]["summary_dir"] == ours["monitor_config"]["summary_dir"]


def findings_for(tmp_path, text, **kw):
    path = write(tmp_path, "lint.yaml", text)
    return {f.rule: f for f in lint(load_config(path), **kw)}


def test_lint_rules(tmp_path):
    found = findings_for(tmp_path, "monitor_config:\n  collect_freq: 1\n  collect_specified_data: {histogram_regular: '.*'}\n")
    assert found["collect-freq-low"].key == "monitor_config.collect_freq"
    assert found["histogram-every-parameter"].severity == "warning"
    assert "collect-freq-low" not in findings_for(tmp_path, "monitor_config:\n  collect_freq: 1\n", steps=200)  # a short run may

    found = findings_for(tmp_path, "use_parallel: true\nmonitor_config:\n  summary_dir: ./summary\n  per_rank_dir: false\n")
    assert found["summary-dir-no-rank"].severity == "warning"
    assert "summary-dir-no-rank" not in findings_for(tmp_path, "use_parallel: true\nmonitor_config:\n  summary_dir: ./summary/rank_0\n  per_rank_dir: false\n")

    found = findings_for(
        tmp_path, "callbacks:\n  - type: LossMonitor\n  - {type: EarlyStopping, monitor: eval_loss}\nmonitor_config:\n  early_stop: {window: 1}\n"
    )
    assert "LossMonitor" in found["duplicate-printing"].message
    assert found["early-stop-raw-loss"].severity == "warning"
    assert "duplicate-printing" not in findings_for(tmp_path, "callbacks:\n  - type: LossMonitor\nmonitor_config:\n  keep_default_callbacks: false\n")

    found = findings_for(tmp_path, "monitor_config:\n  summary_base_dir: /runs\n  summary_dir: /elsewhere/exp1\n")
    assert found["summary-dir-outside-base"].severity == "warning"
    assert "summary-dir-is-base" in findings_for(tmp_path, "monitor_config:\n  summary_base_dir: /runs\n  summary_dir: /runs\n")
    assert "summary-dir-too-deep" in findings_for(tmp_path, "monitor_config:\n  summary_base_dir: /runs\n  summary_dir: /runs/a/b\n")
    clean = findings_for(tmp_path, "monitor_config:\n  summary_base_dir: /runs\n  summary_dir: /runs/exp1\n  collect_freq: 10\n")
    assert not clean

    found = findings_for(tmp_path, "monitor_config:\n  collect_freq: 20\n  collect_freq: 30\n")
    assert "lines 2 and 3" in found["duplicate-key"].message and found["duplicate-key"].key == "collect_freq"

    found = findings_for(tmp_path, "trainer: {type: CausalLanguageModelingTrainer}\nmonitor_config:\n  monitor_on: true\n  summary_dir: ./s\n")
    assert "summary_dir" in found["msnb-keys-in-mindformers-config"].message


def test_msnb_config_cli(tree, tmp_path, run_msnb):
    proc = run_msnb("config", tree, "--json", check=0)
    out = json.loads(proc.stdout)
    assert out["config"]["monitor_config"]["collect_freq"] == 16
    assert all(set(f) == {"rule", "severity", "key", "message", "fix"} for f in out["findings"])
    text = run_msnb("config", tree, check=0).stdout
    assert "collect_freq: 16" in text and "inherits:" in text

    bad = write(tmp_path, "bad.yaml", "base_config: run.yaml\nmonitor_config:\n  summary_dir: ${nope}\n")
    proc = run_msnb("config", bad, check=2)
    assert proc.stdout == "" and str(bad.resolve()) in proc.stderr and "monitor_config.summary_dir" in proc.stderr
