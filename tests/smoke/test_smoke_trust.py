"""A smoke verdict that can be trusted: no silent fixes, three outcomes, mindformers' own reading of the config.

Rule one: a false pass is the worst outcome msnb can have, and msnb's own limits are never the user's failure. So:
every change the smoke makes is one of three kinds (shrink, rehearse, isolate) and listed; a config that would die at
startup on the cluster fails here, naming why (and a test runs the unmodified config through mindformers until that
crash); what msnb cannot rehearse here is ``not_rehearsed`` (exit 3), never a ``failed``.
"""

import importlib.util
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from msnb.config import check_config, load_config
from msnb.config.mindformers_rules import startup_findings
from msnb.events.tables import ScalarTable
from msnb.smoke.mindformers.child import child_config
from msnb.smoke.mindformers.judging import check_loss_components, not_rehearsed_reason
from msnb.smoke.mindformers.plan import DELETE, KINDS, plan_mindformers

MF_SPEC = importlib.util.find_spec("mindformers")  # located, not imported (importing writes ./output)
if MF_SPEC is None:
    pytest.skip("mindformers is not installed (pip install 'msnb[mindformers]')", allow_module_level=True)
SHIPPED = Path(MF_SPEC.origin).parent.parent / "configs"
TRAINING_CONFIGS = sorted(p for p in SHIPPED.glob("*/*.yaml") if p.parent.name not in ("convert_config",) and not p.name.startswith("predict"))

TENSORBOARD = "tensorboard:\n  tensorboard_dir: ./tensorboard\n  tensorboard_queue_size: 10\n"


def _leaves(node, prefix=()):
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _leaves(v, prefix + (k,))
    elif isinstance(node, list) and any(isinstance(v, (dict, list)) for v in node):
        for i, v in enumerate(node):
            yield from _leaves(v, prefix + (i,))
    else:
        yield prefix, node


def _plan_or_none(path):
    try:
        return plan_mindformers(load_config(path), device="CPU", steps=20)
    except Exception as exc:  # a refusal is judged elsewhere; here only what is planned
        if type(exc).__name__ in ("SmokeError", "NotRehearsed"):
            return None
        raise


@pytest.mark.parametrize("path", TRAINING_CONFIGS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_key_the_smoke_changes_is_a_declared_change_of_one_of_three_kinds(path, tmp_path):
    """Differential: the whole config the child would train against the YAML as mindformers reads it; every difference declared."""
    plan = _plan_or_none(path)
    if plan is None:
        pytest.skip(f"{path.name}: refused before anything starts (tested elsewhere)")
    literal = load_config(path).literal
    trained, isolate = child_config(plan, tmp_path / "work", tmp_path / "work" / "summary")
    declared = {c.path: c for c in list(plan.changes) + list(isolate)}
    assert all(c.kind in KINDS for c in declared.values())
    before, after = dict(_leaves(literal)), dict(_leaves(trained))
    changed = {p for p in set(before) | set(after) if before.get(p, "<absent>") != after.get(p, "<absent>")}
    undeclared = [p for p in changed if not any(p[: len(d)] == d for d in declared)]
    assert not undeclared, f"changed without a declared kind: {undeclared}"
    # the fixes that made broken configs pass are gone: nothing added to runner_wrapper but its type, no monitor key dropped
    assert [c.path for c in declared.values() if c.path[:1] == ("runner_wrapper",)] in ([], [("runner_wrapper", "type")])
    assert not [c for c in declared.values() if c.path[:1] == ("monitor_config",) and c.after is DELETE]


def test_literal_references_are_findings_naming_key_file_and_line(tmp_path):
    run = tmp_path / "run.yaml"
    run.write_text(
        f"base_config: {SHIPPED / 'qwen3' / 'pretrain_qwen3_32b_4k.yaml'}\n"
        "output_dir: ./out\n"
        "model:\n  model_config:\n    max_position_embeddings: ${model.model_config.seq_length}\n"
        "tensorboard:\n  tensorboard_dir: ${output_dir}/tensorboard\n"
    )
    report = check_config(run)  # msnb config: msnb's own reading resolves them, and says mindformers will not
    assert report.config["tensorboard"]["tensorboard_dir"] == "./out/tensorboard"
    found = {f.key: f for f in report.findings if f.rule == "mindformers-literal-reference"}
    assert set(found) == {"model.model_config.max_position_embeddings", "tensorboard.tensorboard_dir"}
    assert f"{run}:5" in found["model.model_config.max_position_embeddings"].message
    assert "'${model.model_config.seq_length}'" in found["model.model_config.max_position_embeddings"].message
    assert all(f.severity == "error" for f in found.values())


ORACLE = textwrap.dedent("""\
    import json, os, sys
    os.chdir(sys.argv[1])
    from mindformers import MindFormerConfig
    from mindformers.utils import tensorboard as tb
    out = {}
    cfg = MindFormerConfig(sys.argv[2])
    out["literal"] = [cfg.model.model_config.max_position_embeddings, cfg.tensorboard.tensorboard_dir]
    glm = MindFormerConfig(sys.argv[3])  # unmodified, as the real run loads it
    glm.tensorboard.tensorboard_dir = os.path.join(sys.argv[1], "tb")  # where mindformers' own writer writes here
    tb._set_tensorboard_writer(glm.tensorboard)
    try:
        tb.write_args_to_tensorboard(glm)
        out["crash"] = None
    except KeyError as exc:
        out["crash"] = "KeyError: " + str(exc)
    print("ORACLE" + json.dumps(out))
""")


def test_mindformers_itself_leaves_references_literal_and_dies_without_scale_sense(tmp_path):
    """The two predictions above, proved by mindformers on the unmodified files (a child: importing mindformers writes ./output)."""
    refs = tmp_path / "refs.yaml"
    refs.write_text(
        f"base_config: {SHIPPED / 'qwen3' / 'pretrain_qwen3_32b_4k.yaml'}\noutput_dir: ./out\n"
        "model:\n  model_config:\n    max_position_embeddings: ${model.model_config.seq_length}\ntensorboard:\n  tensorboard_dir: ${output_dir}/tensorboard\n"
    )
    glm = tmp_path / "glm4_watch.yaml"
    glm.write_text(f"base_config: {SHIPPED / 'glm4' / 'finetune_glm4_9b.yaml'}\n{TENSORBOARD}")
    findings = {f.rule: f for f in startup_findings(load_config(glm))}
    assert "mindformers-scale-sense-missing" in findings and "KeyError: 'scale_sense'" in findings["mindformers-scale-sense-missing"].message
    script = tmp_path / "oracle.py"
    script.write_text(ORACLE)
    work = tmp_path / "work"
    work.mkdir()
    proc = subprocess.run([sys.executable, str(script), str(work), str(refs), str(glm)], capture_output=True, text=True, timeout=300)
    line = next((x for x in proc.stdout.splitlines() if x.startswith("ORACLE")), None)
    assert line is not None, proc.stdout[-2000:] + proc.stderr[-3000:]
    got = json.loads(line[len("ORACLE") :])
    assert got["literal"] == ["${model.model_config.seq_length}", "${output_dir}/tensorboard"]
    assert got["crash"] == "KeyError: 'scale_sense'"


def test_a_kernel_msnb_cannot_replace_is_not_rehearsed_with_json_and_exit_3(tmp_path, run_msnb):
    """Packed-document attention (FlashAttentionScore's TND layout) has no CPU replacement: said before anything starts."""
    config = tmp_path / "cfg" / "packed.yaml"
    config.parent.mkdir()
    config.write_text(f"base_config: {SHIPPED / 'qwen3' / 'pretrain_qwen3_32b_4k.yaml'}\nmodel:\n  model_config:\n    use_eod_attn_mask_compression: True\n")
    work = tmp_path / "work"
    work.mkdir()
    proc = run_msnb("smoke", config, "--json", check=3, cwd=work, timeout=120)
    verdict = json.loads(proc.stdout)
    assert verdict["outcome"] == "not_rehearsed" and verdict["exit_code"] == 3 and "use_eod_attn_mask_compression" in verdict["reason"]
    assert "Ascend" in verdict["reason"] and not list(work.iterdir())


def test_a_refusal_prints_its_json_too(tmp_path, run_msnb):
    path = tmp_path / "predict.yaml"
    path.write_text(f"base_config: {SHIPPED / 'qwen3' / 'pretrain_qwen3_32b_4k.yaml'}\nrun_mode: predict\n")
    proc = run_msnb("smoke", path, "--json", check=2, cwd=tmp_path, timeout=120)
    verdict = json.loads(proc.stdout)
    assert verdict["outcome"] == "refused" and verdict["exit_code"] == 2 and "run_mode is 'predict'" in verdict["reason"]


NO_KERNEL = textwrap.dedent("""\
    import json, sys
    import numpy as np
    import mindspore as ms
    from mindspore import ops
    from msnb.smoke.mindformers.worker import classify
    ms.set_device("CPU")
    x = ms.Tensor(np.ones((2, 4), np.float32))
    try:
        ops.swiglu(x).asnumpy()  # PyNative runs lazily: the kernel is selected when the value is needed
        print("CLASSIFY" + json.dumps(None))
    except Exception as exc:
        print("CLASSIFY" + json.dumps(classify(exc)))
""")


def test_a_kernel_the_cpu_lacks_is_classified_not_rehearsed_from_mindsporess_own_error(tmp_path):
    script = tmp_path / "no_kernel.py"
    script.write_text(NO_KERNEL)
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    line = next((x for x in proc.stdout.splitlines() if x.startswith("CLASSIFY")), None)
    assert line is not None, proc.stderr[-3000:]
    cause, kernel = json.loads(line[len("CLASSIFY") :])
    assert (cause, kernel) == ("kernel", "Swiglu")
    reason = not_rehearsed_reason([{"stage": "building the model and training (Trainer.train)", "line": "RuntimeError: ...", "cause": cause, "kernel": kernel}])
    assert "Swiglu has no CPU kernel" in reason and "Ascend" in reason


def test_a_crash_in_msnbs_own_code_is_msnbs_and_a_config_crash_is_the_configs():
    from msnb.smoke.mindformers.worker import apply_overrides, classify

    try:
        apply_overrides({"a": 1}, [{"path": [], "value": 2, "before": None}])  # msnb's own code on a spec it never writes
    except Exception as exc:
        assert classify(exc) == ("msnb", None)
    else:
        raise AssertionError("a bad override should raise inside msnb")
    try:
        json.loads("{")  # raised outside msnb, called from here (a test): as a library crash on the user's input
    except ValueError as exc:
        assert classify(exc)[0] == "config"
    mixed = [{"cause": "msnb", "stage": "s", "line": "x"}, {"cause": "config", "stage": "s", "line": "y"}]
    assert not_rehearsed_reason(mixed) is None  # one rank failed on the config: the run is at fault


def test_overrides_are_applied_on_mindformers_reading_and_differences_said():
    from msnb.smoke.mindformers.worker import apply_overrides

    config = {"runner_config": {"batch_size": 8}, "model": {"model_config": {"seq_length": "${x}"}}}
    said = apply_overrides(
        config,
        [
            {"path": ["runner_config", "batch_size"], "value": 2, "before": 4},  # mindformers read 8 where msnb read 4
            {"path": ["model", "model_config", "seq_length"], "value": 32, "before": "${x}"},
            {"path": ["grouped_lr_schedule", "default", "learning_rate"], "value": 0.005, "before": 0.0002},  # absent in mindformers' reading
            {"path": ["context", "device_target"], "value": "CPU", "before": None},  # a new key: added
        ],
    )
    assert config["runner_config"]["batch_size"] == 2 and config["model"]["model_config"]["seq_length"] == 32 and config["context"]["device_target"] == "CPU"
    assert "grouped_lr_schedule" not in config
    assert any("runner_config.batch_size: mindformers reads 8, msnb read 4" in s for s in said)
    assert any("grouped_lr_schedule.default.learning_rate: not applied" in s for s in said)
    scalar = {"a": 1}
    said = apply_overrides(scalar, [{"path": ["a", "b"], "value": 2, "before": None}])
    assert scalar == {"a": 1} and "not applied" in said[0]  # never silently skipped


def test_a_loss_component_stuck_at_zero_is_a_warning_naming_it():
    n = 20
    steps = np.tile(np.arange(1, n + 1), 3)
    tags = np.repeat(np.array(["loss", "lm_loss", "mtp_loss"], dtype=object), n)
    values = np.concatenate([np.linspace(5, 2, n), np.linspace(5, 2, n), np.zeros(n)])
    table = ScalarTable(
        run=np.full(3 * n, "output/log", dtype=object), rank=np.zeros(3 * n, np.int64), tag=tags, step=steps, wall_time=np.zeros(3 * n), value=values
    )
    checks = check_loss_components(table, trained=n)
    assert len(checks) == 1 and checks[0].status == "warn" and "mtp_loss is exactly 0 on all 20 logged steps" in checks[0].detail
    assert "lm_loss" not in checks[0].detail
    healthy = table.take(table.tag != "mtp_loss")
    assert check_loss_components(healthy, trained=n) == []


def test_a_config_that_dies_at_startup_on_the_cluster_fails_here_naming_why(tmp_path, run_msnb):
    """The shipped GLM4 finetune with a TensorBoard section: no scale_sense in its runner_wrapper. msnb adds nothing, so the
    real Trainer dies as on Ascend (KeyError in mindformers' TensorBoard argument writer) and the lint names the cause."""
    path = tmp_path / "glm4_watch.yaml"
    path.write_text(f"base_config: {SHIPPED / 'glm4' / 'finetune_glm4_9b.yaml'}\n{TENSORBOARD}callbacks:\n  - {{type: MFLossMonitor, per_print_times: 1}}\n")
    proc = run_msnb("smoke", path, "--json", "--steps", "5", cwd=tmp_path, check=1, timeout=600)
    verdict = json.loads(proc.stdout)
    checks = {c["name"]: c for c in verdict["checks"]}
    assert verdict["outcome"] == "failed" and not verdict["passed"]
    assert checks["process"]["status"] == "fail" and "KeyError: 'scale_sense'" in checks["process"]["detail"], checks["process"]
    assert checks["config_lint"]["status"] == "fail" and "runner_wrapper.scale_sense" in checks["config_lint"]["detail"]
    assert "scale_sense" not in checks["config_changes"]["detail"]  # never added by msnb
    work = Path(verdict["workdir"])
    assert "Traceback" in (work / "train.log").read_text()
    import shutil

    shutil.rmtree(work, ignore_errors=True)
