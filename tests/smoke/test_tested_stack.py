"""The smoke's tested set and the configs it will not stand in for: refused before anything starts, never replaced.

Runs in both environments (mindformers 1.9 + MindSpore 2.9, mindformers 2.0 + MindSpore 2.10, docs/STACKS.md). The
tests that need mindformers 2.0's own files skip in the first, saying so.
"""

import importlib.metadata as md
import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from msnb.config import load_config
from msnb.config.run_config import is_dynamic_graph_run, is_mindformers_run, looks_like_training_config
from msnb.environment import version_tuple
from msnb.errors import NotRehearsed
from msnb.fullsize.import_guards import imports_v4_unguarded
from msnb.smoke import run_smoke
from msnb.smoke.mindformers.tested_stack import TESTED, check_tested_stack, screen_config


def _version(dist):
    try:
        return md.version(dist)
    except md.PackageNotFoundError:
        return None


MF = _version("mindformers")
MF_SPEC = importlib.util.find_spec("mindformers")  # located, not imported (importing writes ./output)
SHIPPED = Path(MF_SPEC.origin).parent.parent / "configs" if MF_SPEC else None
needs_mindformers_2_0 = pytest.mark.skipif(
    MF is None or version_tuple(MF)[:2] != (2, 0),
    reason=f"needs mindformers 2.0 (the second environment of docs/STACKS.md); this one has mindformers {MF or 'not installed'}",
)

# mindformers 2.0's configs/deepseek3/pretrain_deepseek3_1b_8p_pynative.yaml, its sections and their first keys as shipped
DYNAMIC_DEEPSEEK3 = textwrap.dedent("""\
    checkpoint:
      enable_save: False
      save_path: "./output/checkpoint"
      prefix: "deepseekv3"
      load_path: ""
    training:
      steps: 10
      local_batch_size: 1
      global_batch_size: 8
      max_norm: 1.0
      seed: 42
      deterministic: True
    optimizer:
      type: AdamW
      betas: [0.9, 0.95]
      eps: 1.e-8
      weight_decay: 0.01
    lr_scheduler:
      type: ConstantWarmUpLR
      learning_rate: 1.e-5
      warmup_ratio: 0
    parallelism:
      data_parallel_shard: -1
      data_parallel_shard_strategy: "optim_grads_params"
      expert_parallel: 1
      tensor_parallel: 1
      pipeline_parallel: 1
      sequence_parallel: true
    train_dataset:
      dataloader:
        type: BlendedMegatronDatasetDataLoader
        datasets_type: GPTDataset
        sizes: [8000, 0, 0]
        config:
          seq_length: 4096
          data_path: ["1", "/path/megatron_dataset/wiki103-megatron_text_document"]
        column_names: ["input_ids", "labels", "loss_mask", "position_ids"]
      num_parallel_workers: 8
    model:
      model_type: deepseek_v3
      architectures: DeepseekV3ForCausalLM
      vocab_size: 129280
      seq_length: 4096
      hidden_size: 1792
      num_hidden_layers: 16
      num_attention_heads: 4
      n_routed_experts: 8
      first_k_dense_replace: 1
""")

# mindformers 2.1's configs/deepseek4/pretrain_deepseek4_flash.yaml: its top-level sections and the model's first keys
DYNAMIC_DEEPSEEK4 = textwrap.dedent("""\
    checkpoint: {enable_save: False, save_path: "./output/checkpoint"}
    training: {steps: 10, local_batch_size: 1, global_batch_size: 8}
    optimizer: {type: AdamW}
    lr_scheduler: {type: ConstantWarmUpLR, learning_rate: 1.e-5}
    parallelism: {data_parallel_shard: -1, tensor_parallel: 1, pipeline_parallel: 1}
    recompute: {}
    train_dataset: {dataloader: {type: BlendedMegatronDatasetDataLoader}}
    model: {model_type: deepseek_v4, architectures: DeepseekV4ForCausalLM, vocab_size: 129280, hidden_size: 4096, num_hidden_layers: 43}
""")

# the head of models/deepseek4/modeling_deepseek_v4.py: 2.0 imports the dynamic-graph model bare, 2.1 inside try:
V4_IMPORT_2_0 = '''"""Deepseek-V4 Model."""
from mindformers.tools.register import MindFormerRegister, MindFormerModuleType

from .configuration_deepseek_v4 import DeepseekV4Config
from .modeling_deepseek_v4_pynative import PyNativeDeepseekV4ForCausalLM
'''
V4_IMPORT_2_1 = '''"""Deepseek-V4 Model."""
from mindformers.tools.logger import logger
from .configuration_deepseek_v4 import DeepseekV4Config

_PYNATIVE_IMPORT_ERROR = None
try:
    from .modeling_deepseek_v4_pynative import PyNativeDeepseekV4ForCausalLM
except ImportError as e:
    PyNativeDeepseekV4ForCausalLM = None
'''

TRAINER_QWEN3 = {
    "run_mode": "train",
    "trainer": {"type": "CausalLanguageModelingTrainer", "model_name": "qwen3"},
    "model": {"model_config": {"model_type": "qwen3", "num_hidden_layers": 64}},
}


def _write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


# ---- recognised by their keys ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "data, trainer, dynamic, training",
    [
        (TRAINER_QWEN3, True, False, True),
        (yaml.safe_load(DYNAMIC_DEEPSEEK3), False, True, True),
        (yaml.safe_load(DYNAMIC_DEEPSEEK4), False, True, True),
        ({"monitor_config": {"summary_dir": "./s", "collect_freq": 5}}, False, False, False),
        ({"monitor_config": {"collect_freq": 5}, "callbacks": [{"type": "SummaryMonitor"}]}, False, False, False),
        ({"monitor_config": {}, "optimizer": {"type": "AdamW"}}, False, False, False),  # one section: a note, not a run
        ({"trainer": {"type": "X"}, "model": {"arch": {"type": "Y"}}}, False, False, True),  # shaped like one, not understood
        ({"training": {"steps": 3}, "model": {"model_type": "qwen3"}}, False, True, True),
        ({"training": 5, "parallelism": {}, "runner_config": {}}, False, False, True),
    ],
)
def test_each_generation_of_training_config_is_recognised_by_its_keys(data, trainer, dynamic, training):
    assert (is_mindformers_run(data), is_dynamic_graph_run(data), looks_like_training_config(data)) == (trainer, dynamic, training)


def test_the_shipped_dynamic_graph_configs_of_the_installed_mindformers_are_recognised():
    """Every config mindformers ships with a top-level training: section is a dynamic-graph run (none in 1.9)."""
    if SHIPPED is None:
        pytest.skip("mindformers is not installed")
    found = 0
    for path in sorted(SHIPPED.rglob("*.yaml")):
        data = yaml.safe_load(path.read_text())
        if isinstance(data, dict) and isinstance(data.get("training"), dict):
            found += 1
            assert is_dynamic_graph_run(data) and not is_mindformers_run(data) and looks_like_training_config(data), path
    if version_tuple(MF)[:2] >= (2, 0):
        assert found >= 1


# ---- refused before anything starts -------------------------------------------------------------------------------


def test_the_dynamic_graph_deepseek3_config_is_not_rehearsed_never_a_builtin_pass(tmp_path, run_msnb):
    path = _write(tmp_path, "pretrain_deepseek3_1b_8p_pynative.yaml", DYNAMIC_DEEPSEEK3)
    proc = run_msnb("smoke", path, "--no-live", cwd=tmp_path, check=3, timeout=120)
    assert "PASSED" not in proc.stdout and proc.stdout.strip() == ""
    (line,) = proc.stderr.strip().splitlines()
    assert "pretrain_deepseek3_1b_8p_pynative.yaml is a config of mindformers' dynamic-graph trainer (training:, parallelism:, lr_scheduler:)" in line
    assert "cannot rehearse it here" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pretrain_deepseek3_1b_8p_pynative.yaml"]  # nothing started, nothing written
    as_json = run_msnb("smoke", path, "--json", cwd=tmp_path, check=3, timeout=120)
    answer = json.loads(as_json.stdout)
    assert answer["outcome"] == "not_rehearsed" and answer["passed"] is False and answer["reason"] in line


@needs_mindformers_2_0
def test_mindformers_2_0s_own_dynamic_graph_deepseek3_config_is_not_rehearsed(tmp_path):
    shipped = SHIPPED / "deepseek3" / "pretrain_deepseek3_1b_8p_pynative.yaml"
    with pytest.raises(NotRehearsed, match=r"dynamic-graph trainer .*mindformers 2\.0\.0's dynamic-graph trainer imports hyper_parallel"):
        run_smoke(shipped, live=False)


def test_a_yaml_shaped_like_a_training_config_msnb_does_not_understand_is_refused_not_replaced(tmp_path):
    path = _write(tmp_path, "future.yaml", "trainer: {type: SomeNewTrainer}\nmodel: {arch: {type: NewModel}}\nmonitor_config: {collect_freq: 1}\n")
    with pytest.raises(NotRehearsed, match=r"future\.yaml looks like a mindformers training config \(trainer, model\) that msnb does not understand"):
        run_smoke(path, live=False)
    # with the user's own model, the same YAML is only where the monitoring settings come from: screened, not refused
    screen_config(load_config(path), builtin=False)


def test_mindformers_2_1s_dynamic_graph_deepseek4_config_is_not_rehearsed(tmp_path):
    path = _write(tmp_path, "pretrain_deepseek4_flash.yaml", DYNAMIC_DEEPSEEK4)
    with pytest.raises(NotRehearsed, match=r"pretrain_deepseek4_flash\.yaml is a config of mindformers' dynamic-graph trainer"):
        run_smoke(path, live=False)


def test_the_guard_recognises_2_0s_bare_import_and_leaves_2_1s_guarded_one():
    assert imports_v4_unguarded(V4_IMPORT_2_0) and not imports_v4_unguarded(V4_IMPORT_2_1)


def test_a_deepseek_v4_trainer_config_is_not_rehearsed(tmp_path):
    data = {**TRAINER_QWEN3, "model": {"model_config": {"model_type": "deepseek_v4", "architectures": ["DeepseekV4ForCausalLM"]}}}
    path = _write(tmp_path, "v4.yaml", yaml.safe_dump(data))
    with pytest.raises(NotRehearsed, match=r"v4\.yaml trains DeepSeek-V4"):
        screen_config(load_config(path), builtin=True)


# ---- the tested set ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "mf, ms, rehearsed",
    [("1.9.0", "2.9.0", True), ("2.0.0", "2.10.0", True), ("2.0.1", "2.10.2", True), ("2.1.0", "2.11.0", False), ("2.0.0", "2.9.0", False),
     ("1.9.0", "2.10.0", False), ("1.8.0", "2.8.0", False), ("3.0.0rc1", "3.0.0", False)],
)  # fmt: skip
def test_only_the_tested_pairs_are_rehearsed_on_cpu(mf, ms, rehearsed):
    if rehearsed:
        check_tested_stack("CPU", mf, ms)
    else:
        with pytest.raises(NotRehearsed, match=rf"mindformers {mf} with MindSpore {ms} is outside the releases .* tested with"):
            check_tested_stack("CPU", mf, ms)
    check_tested_stack("Ascend", mf, ms)  # no rehearsal there: mindformers' own kernels run


def test_the_installed_pair_is_in_the_tested_set():
    """Each environment CI builds holds one tested pair (this test fails in an environment msnb does not test)."""
    if MF is None or _version("mindspore") is None:
        pytest.skip("mindformers or MindSpore is not installed")
    assert (version_tuple(MF)[:2], version_tuple(_version("mindspore"))[:2]) in TESTED
    check_tested_stack("CPU")


def test_another_release_is_not_rehearsed_in_one_line_exit_3(tmp_path, run_msnb):
    """A mindformers run YAML with a release outside the set: one line, exit 3, nothing started."""
    if MF is None:
        pytest.skip("mindformers is not installed")
    site = tmp_path / "site"
    info = site / "mindformers-2.1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: mindformers\nVersion: 2.1.0\n")
    path = _write(tmp_path, "qwen3.yaml", f"base_config: {SHIPPED / 'qwen3' / 'pretrain_qwen3_32b_4k.yaml'}\n")
    env = {"PYTHONPATH": str(site) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = run_msnb("smoke", path, "--no-live", "--device", "CPU", env=env, cwd=tmp_path, check=3, timeout=120)
    (line,) = proc.stderr.strip().splitlines()
    assert "mindformers 2.1.0 with MindSpore" in line and "outside the releases msnb's CPU rehearsal is tested with" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["qwen3.yaml", "site"]


# ---- the child's import guard -------------------------------------------------------------------------------------


def _hyper_parallel():
    return importlib.util.find_spec("hyper_parallel") is not None


@pytest.mark.skipif(MF_SPEC is None, reason="mindformers is not installed")
def test_the_import_guard_does_only_what_the_installed_mindformers_needs(tmp_path):
    """With mindformers 2.0 and no hyper_parallel, `import mindformers` fails without the guard and works with it;
    elsewhere (1.9 has no DeepSeek-V4, 2.1 guards it) the guard does nothing."""
    code = textwrap.dedent("""\
        import json, sys
        from msnb.fullsize.import_guards import guard_deepseek_v4_import
        line = guard_deepseek_v4_import() if sys.argv[1] == "guard" else None
        try:
            import mindformers
            ok = True
        except ImportError as exc:
            ok = repr(exc)
        print(json.dumps({"line": line, "ok": ok}))
    """)
    script = _write(tmp_path, "probe.py", code)

    def probe(mode):
        proc = subprocess.run([sys.executable, str(script), mode], cwd=tmp_path, capture_output=True, text=True, timeout=300)
        return json.loads(proc.stdout.strip().splitlines()[-1])

    guarded, bare = probe("guard"), probe("bare")
    assert guarded["ok"] is True, guarded
    if bare["ok"] is True:
        assert guarded["line"] is None  # nothing to make harmless
    else:
        assert "hyper_parallel" in bare["ok"] and not _hyper_parallel()
        assert guarded["line"].startswith("DeepSeek-V4's dynamic-graph module -> a stand-in")


@needs_mindformers_2_0
def test_mindformers_2_0_without_hyper_parallel_needs_the_guard():
    if _hyper_parallel():
        pytest.skip("hyper_parallel is installed here: mindformers imports without the guard")
    source = (Path(MF_SPEC.origin).parent / "models" / "deepseek4" / "modeling_deepseek_v4.py").read_text()
    assert "\nfrom .modeling_deepseek_v4_pynative import PyNativeDeepseekV4ForCausalLM" in source
