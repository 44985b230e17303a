"""The full-size pre-flight: each finding built from a shipped config with one key changed, proved by mindformers' own code.

Every pre-flight here runs mindformers' real checks in one child process (``run_preflights``); the proof calls
mindformers' functions directly (``check_rules`` as ``base_trainer`` calls it, ``TransformerConfig``) on
the same modified files in a second child, and the finding's text must be the error mindformers raised.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from msnb.config import check_config
from msnb.config.shipped import shipped_configs_dir
from msnb.errors import SmokeError
from msnb.fullsize.build import NETWORK
from msnb.fullsize.preflight import FAILED, NOT_CHECKED, PASSED, launch_devices, mindformers_reads_name, run_preflight, run_preflights
from tests.smoke.cluster_oracle import CLUSTER_CONTEXT, CLUSTER_STANDIN

SHIPPED = shipped_configs_dir()
MOE = SHIPPED / "qwen3_moe" / "pretrain_qwen3_30b_a3b_4k.yaml" if SHIPPED else None
needs_mindformers = pytest.mark.skipif(MOE is None or not MOE.is_file(), reason="mindformers with its shipped configs is not installed")


def test_device_count_from_launch_lines():
    assert launch_devices("msrun --worker_num=16 --local_worker_num=8 --master_port=8118 run_mindformer.py --config x.yaml")[:2] == (16, 8)
    assert launch_devices("torchrun --nnodes 2 --nproc_per_node 8 train.py")[:2] == (16, 8)
    # msrun_launcher.sh's four forms: 1 argument (8 on one node), 2 and 6 (WORKER_NUM on one node), 9 (LOCAL_WORKER a node)
    launcher = 'bash scripts/msrun_launcher.sh "run_mindformer.py --config c.yaml"'
    assert launch_devices(launcher)[:2] == (8, 8)
    assert launch_devices(f"{launcher} 4")[:2] == (4, 4)
    assert launch_devices(f"{launcher} 16 8118 output/msrun_log False 300")[:2] == (16, 16)  # 8118 is the port, not a node's count
    assert launch_devices(f"{launcher} 32 8 127.0.0.1 8118 0 output/msrun_log False 300")[:2] == (32, 8)
    for bad in ("python train.py", "msrun --worker_num=many x.py", "msrun --worker_num=0 x.py", f"{launcher} 32 8 8118 0 output/msrun_log False 300"):
        with pytest.raises(SmokeError):
            launch_devices(bad)


# each launch line's count, or the one line it is refused with (before anything starts)
LAUNCH_LINES = [
    (
        "torchrun --nnodes -2 --nproc_per_node -8 train.py",
        "--launch: --nproc_per_node '-8' is not a device count (a whole number of 1 or more, written in the digits 0-9)",
    ),
    ("torchrun --nnodes 0 --nproc_per_node 8 train.py", "--launch: --nnodes 0 is not a device count: a launch starts at least 1 device"),
    (
        "torchrun --nnodes 2 --nproc_per_node -8 train.py",
        "--launch: --nproc_per_node '-8' is not a device count (a whole number of 1 or more, written in the digits 0-9)",
    ),
    (
        "torchrun --nnodes=-2 --nproc_per_node=8 train.py",
        "--launch: --nnodes '-2' is not a device count (a whole number of 1 or more, written in the digits 0-9)",
    ),
    ("msrun --worker_num=-16 run.py", "--launch: --worker_num '-16' is not a device count (a whole number of 1 or more, written in the digits 0-9)"),
    ("msrun --worker_num 0 run.py", "--launch: --worker_num 0 is not a device count: a launch starts at least 1 device"),
    ("msrun --worker_num=\uff18 run.py", "--launch: --worker_num '\uff18' is not a device count (a whole number of 1 or more, written in the digits 0-9)"),
    ("msrun --worker_num=\u0663 run.py", "--launch: --worker_num '\u0663' is not a device count (a whole number of 1 or more, written in the digits 0-9)"),
    (
        "msrun --worker_num=16 --local_worker_num=\u00b2 run.py",
        "--launch: --local_worker_num '\u00b2' is not a device count (a whole number of 1 or more, written in the digits 0-9)",
    ),
    (
        'msrun_launcher.sh "run.py" \uff18',
        "--launch: msrun_launcher.sh's WORKER_NUM '\uff18' is not a device count (a whole number of 1 or more, written in the digits 0-9)",
    ),
    (
        "torchrun --nnodes 1:4 --nproc_per_node 8 train.py",
        "--launch: --nnodes 1:4: an elastic range starts a count not known before the launch; give --devices N",
    ),
    (
        "torchrun --nnodes 2 --nproc_per_node auto train.py",
        "--launch: --nproc_per_node auto: the count comes from the machine the launch runs on; give --devices N",
    ),
]


@pytest.mark.parametrize(("line", "said"), LAUNCH_LINES)
def test_a_launch_count_that_is_no_positive_whole_number_is_one_usage_line(line, said):
    with pytest.raises(SmokeError) as caught:
        launch_devices(line)
    assert str(caught.value) == said and caught.value.exit_code == 2


def test_a_repeated_launcher_option_means_its_last_value_and_the_scripts_own_options_are_not_the_launchers():
    """msrun and torchrun parse with argparse: the last value wins; what follows the script is the script's."""
    assert launch_devices("msrun --worker_num=8 --worker_num=16 --local_worker_num=8 run.py")[:2] == (16, 8)
    assert launch_devices("msrun --worker_num 16 --local_worker_num 4 --local_worker_num 8 run.py")[:2] == (16, 8)
    assert launch_devices("msrun --worker_num=16 run_mindformer.py --worker_num 4 --config x.yaml")[:2] == (16, 8)  # msrun's default 8 a node
    assert launch_devices("torchrun --nproc-per-node 4 --nproc_per_node 8 --nnodes 1 --nnodes 2 train.py --nnodes 9")[:2] == (16, 8)
    assert launch_devices("python -m torch.distributed.run --standalone --nproc_per_node 8 train.py")[:2] == (8, 8)
    assert launch_devices("torchrun --nnodes 2:2 --nproc_per_node 8 train.py")[:2] == (16, 8)


def test_a_bad_launch_count_is_refused_by_the_command_before_anything_starts(tmp_path, capsys):
    """msnb preflight, memory's and the smoke's front end: one line on stderr, exit 2, no traceback, no child."""
    from msnb.cli import main

    config = tmp_path / "run.yaml"
    config.write_text("run_mode: train\nmodel:\n  model_config:\n    num_layers: 2\n")
    for command in ("preflight", "smoke"):
        code = main([command, str(config), "--launch", "torchrun --nnodes -2 --nproc_per_node -8 train.py"])
        err = capsys.readouterr().err
        assert (
            code == 2
            and err
            == f"msnb {command}: error: --launch: --nproc_per_node '-8' is not a device count (a whole number of 1 or more, written in the digits 0-9)\n"
        )


@needs_mindformers
def test_file_name_rule_is_mindformers_own(tmp_path):
    """mindformers reads a path when it ends in 'yaml' or 'yml', case-sensitive, no dot needed: msnb models exactly that."""
    source = Path(importlib.util.find_spec("mindformers").submodule_search_locations[0]) / "tools" / "register" / "config.py"
    assert "if arg.endswith('yaml') or arg.endswith('yml'):" in source.read_text()
    assert [mindformers_reads_name(n) for n in ("a.yaml", "a.yml", "qyaml", "q.YAML", "a.Yml", "a.json")] == [True, True, True, False, False, False]
    text = MOE.read_text()
    (tmp_path / "q.YAML").write_text(text)
    (tmp_path / "qyaml").write_text(text)
    refused = run_preflight(tmp_path / "q.YAML", devices=16, memory=False)  # refused before any child starts
    assert refused.outcome == FAILED and "ends in 'yaml' or 'yml'" in refused.headline()
    assert not [f for f in check_config(str(tmp_path / "qyaml")).findings if f.rule == "mindformers-file-name"]
    assert [f for f in check_config(str(tmp_path / "q.YAML")).findings if f.rule == "mindformers-file-name"]


def test_not_a_run_config_is_refused(tmp_path):
    path = tmp_path / "only.yaml"
    path.write_text("model:\n  model_config:\n    num_layers: 2\nmonitor_config:\n  summary_dir: ./s\n")
    with pytest.raises(SmokeError, match="not a mindformers run config"):
        run_preflight(path, devices=8)
    from msnb.smoke import run_smoke

    with pytest.raises(SmokeError, match="neither a mindformers run config .* nor msnb's smoke config"):  # never the built-in model in its place
        run_smoke(str(path), live=False, steps=3)
    with pytest.raises(SmokeError, match="no device count found"):
        run_smoke(str(path), live=False, steps=3, launch="python train.py")


def _changed(tmp_path, name: str, change, source: Path | None = None) -> Path:
    data = yaml.safe_load((source or MOE).read_text())
    change(data)
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


PROOF = r"""
import copy, json, os, sys
import mindspore as ms
from msnb.fullsize.import_guards import guard_deepseek_v4_import
guard_deepseek_v4_import()  # mindformers 2.0 imports DeepSeek-V4, which needs hyper_parallel (absent): the smoke's own guard
from mindformers import MindFormerConfig
from mindformers.core.parallel_config import build_parallel_config
from mindformers.parallel_core.transformer_config import TransformerConfig
from mindformers.tools.check_rules import check_rules
said = {}
ms.set_auto_parallel_context(parallel_mode="semi_auto_parallel")
for name, path, devices, what in json.loads(sys.argv[1]):
    config = MindFormerConfig(path)
    try:
        if what == "layers":  # mindformers' layer split, built from the file's own values as TransformerBlock builds it
            from mindformers.core.context.build_context import build_mf_context
            from mindformers.parallel_core.training_graph.transformer.utils import LayerSetting
            build_mf_context(config)
            mc = config.model.model_config
            tc = TransformerConfig(
                num_layers=mc.num_hidden_layers, hidden_size=mc.hidden_size, num_attention_heads=mc.num_attention_heads,
                pipeline_model_parallel_size=config.parallel_config.pipeline_stage,
            )
            LayerSetting(mc.num_hidden_layers, mc.offset, tc, 1)
        elif what == "check_rules":
            build_parallel_config(config)
            os.environ["RANK_SIZE"] = str(devices)
            check_rules(config, mode="train", network=object(), dataset=object())  # base_trainer passes the built ones
        else:
            mc = config.model.model_config  # TransformerConfig.__post_init__ on the modified file's own values
            TransformerConfig(
                num_layers=mc.num_hidden_layers, hidden_size=mc.hidden_size, num_attention_heads=mc.num_attention_heads,
                tensor_model_parallel_size=config.parallel_config.model_parallel,
            )
        said[name] = None
    except Exception as exc:
        said[name] = str(exc)
print("PROOF" + json.dumps(said))
"""


@needs_mindformers
def test_each_finding_is_mindformers_own_error(tmp_path):
    def recompute(d):
        d["recompute_config"]["recompute"] = [1, 1, 1, 1, 1]  # five stages' worth on pipeline_stage 4

    def cp_without_fa(d):
        d["parallel_config"]["context_parallel"] = 2
        d["model"]["model_config"]["use_flash_attention"] = False

    def heads(d):
        d["parallel_config"]["model_parallel"] = 3  # 32 attention heads

    def offset(d):
        d["model"]["model_config"]["offset"] = [1, 0, 0, 0]  # 48 layers over 4 stages split evenly: the offsets must add up to 0

    cases = {  # name: (file, devices, the mindformers function that proves it, the key the finding names)
        "devices": (MOE, 8, "check_rules", "parallel_config.data_parallel"),
        "recompute": (_changed(tmp_path, "recompute", recompute), 16, "check_rules", "recompute_config.recompute"),
        "cp_without_fa": (_changed(tmp_path, "cp", cp_without_fa), 32, "check_rules", "parallel_config.context_parallel"),
        "heads": (_changed(tmp_path, "heads", heads), 12, "transformer", "model.model_config.num_attention_heads"),
        "offset": (_changed(tmp_path, "offset", offset), 16, "layers", "model.model_config.offset"),
    }
    # what to change is tested below; here each finding itself (no proofs: each would build the network again)
    results = run_preflights([(path, devices, None) for path, devices, _, _ in cases.values()] + [(MOE, None, None)], suggest=False)
    proof = subprocess.run(
        [sys.executable, "-c", PROOF, json.dumps([[n, str(p), d, w] for n, (p, d, w, _) in cases.items()])],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    raised = json.loads(proof.stdout.split("PROOF", 1)[1])
    for (name, (path, _, _, key)), result in zip(cases.items(), results):
        assert result.outcome == FAILED and result.exit_code == 1, (name, result.format_text())
        finding = result.findings[0]
        assert raised[name] and finding.message == " ".join(raised[name].split()), (name, finding.message, raised[name])
        assert finding.key == key and finding.where.startswith(str(path) + ":"), (name, finding)
        assert finding.source.startswith("mindformers/") and ".py:" in finding.source
    # the shipped config, its device count not given: what ran passed, the device-count rule reads "not checked", never passed
    unknown = results[-1]
    assert unknown.outcome == NOT_CHECKED and unknown.exit_code == 3 and unknown.passed is None
    by_name = {c.check: c.outcome for c in unknown.checks}
    assert by_name["check_rules._check_recompute"] == "passed"
    assert by_name["TransformerConfig (convert_to_transformer_config, __post_init__)"] == "passed"
    assert by_name["LayerSetting (layers per pipeline stage, offset, recompute lists)"] == "passed"
    assert any(n.startswith("device count =") and o == NOT_CHECKED for n, o in by_name.items())
    assert by_name[NETWORK] == "passed"  # the MoE layer's constructor (num_moe_experts against expert_parallel) ran at full size
    assert "the device count is unknown" in unknown.headline()


@needs_mindformers
def test_a_smoke_whose_full_size_config_fails_the_pre_flight_fails_before_training(tmp_path):
    """The pre-flight is the smoke's first step: the unshrunk file's recompute list is longer than pipeline_stage."""
    from msnb.smoke import run_smoke

    path = _changed(tmp_path, "recompute", lambda d: d["recompute_config"].__setitem__("recompute", [1, 1, 1, 1, 1]))
    result = run_smoke(str(path), live=False, steps=4, launch="msrun --worker_num=16 --local_worker_num=8 run_mindformer.py")
    assert result.passed is False and result.steps_trained == 0, result.format_text()
    preflight = result.check("preflight")
    assert preflight.status == "fail" and "length of recompute" in preflight.detail and f"recompute_config.recompute at {path}:" in preflight.detail
    assert "mindformers/tools/check_rules.py:" in preflight.detail and "check_rules._check_parallel (16 devices)" in preflight.detail
    unchecked = result.check("preflight_not_checked")
    assert unchecked.status == "skip" and "device count" not in unchecked.detail and "dataset" in unchecked.detail  # the launch gave the count


@needs_mindformers
@pytest.mark.parametrize(
    "sig, devices, wanted",
    [("SIGTERM", 16, 1), ("SIGHUP", 16, 1), ("SIGTERM", 32, 2)],
    ids=["SIGTERM", "SIGHUP", "SIGTERM-two-proofs-side-by-side"],
)
def test_a_stop_signal_during_the_pre_flight_leaves_no_child_and_no_scratch_folder(tmp_path, sig, devices, wanted):
    """The signal's default action would end msnb at once; every child is stopped and the scratch folder removed first:
    during the pre-flight's own child, and while two children prove suggestions side by side (32 devices: a finding)."""
    import os
    import signal
    import time

    import psutil

    from tests.conftest import msnb_command

    proc = subprocess.Popen(msnb_command() + ["preflight", str(MOE), "--devices", str(devices)], env=dict(os.environ, TMPDIR=str(tmp_path)),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip

    def children():  # the log is opened before the child is forked, and a forked child shows msnb's command line until it execs
        try:
            return [p for p in psutil.Process(proc.pid).children(recursive=True) if "msnb.fullsize.child" in " ".join(p.cmdline())]
        except psutil.Error:  # one that ended or changed while listed: looked at again
            return []

    workers, deadline = [], time.monotonic() + 300  # mindformers' import and the network's build, on a machine shared with other trainings
    while not (list(tmp_path.glob("msnb-preflight-*/preflight.log")) and len(workers := children()) >= wanted) and time.monotonic() < deadline:
        assert proc.poll() is None, f"the pre-flight ended (exit {proc.returncode}) before its {wanted} children were seen"
        time.sleep(0.05)
    (log,) = tmp_path.glob("msnb-preflight-*/preflight.log")  # the child is started
    assert len(workers) >= wanted, f"the pre-flight's {wanted} children were not found: {workers}"
    proc.send_signal(getattr(signal, sig))
    assert proc.wait(30) == -getattr(signal, sig)  # it ends as the signal's default action ends it
    assert not log.parent.exists()
    gone, alive = psutil.wait_procs(workers, timeout=10)
    assert not alive


@needs_mindformers
def test_pipeline_config_not_a_mapping_is_mindspores_own_refusal(tmp_path):
    """A ``parallel.pipeline_config`` that is no mapping: the finding is MindSpore's own type error, not msnb's conversion."""

    def as_text(d):
        d.setdefault("parallel", {})["pipeline_config"] = "yes"

    (result,) = run_preflights([(_changed(tmp_path, "pipeline_text", as_text), 16, None)], suggest=False)
    assert result.outcome == FAILED
    (check,) = result.findings  # where the real run meets it: build_context puts parallel.pipeline_config into MindSpore's context
    assert check.check.startswith("context (build_context") and "must be <class 'dict'>" in check.message and check.source.startswith("mindformers/")


# The full-size network built with mindformers' own code, apart from msnb: its own stand-in for the communication
# (written here, not msnb's), the run's parallel context set by hand, parameters without data.
BUILD_PROOF = r"""
import json, os, sys
import mindspore as ms
from msnb.fullsize.import_guards import guard_deepseek_v4_import
guard_deepseek_v4_import()  # mindformers 2.0 imports DeepSeek-V4, which needs hyper_parallel (absent): the smoke's own guard
from mindspore.nn.utils import no_init_parameters
from mindformers import MindFormerConfig
from mindformers.core.parallel_config import build_parallel_config
from mindformers.models.build_model import build_network

said = {}
for name, path, devices in json.loads(sys.argv[1]):
    os.environ["RANK_SIZE"] = str(devices)
    config = MindFormerConfig(path)
    cluster_context(config, devices)  # every config here is use_legacy False, graph mode
    try:
        build_parallel_config(config)
        with no_init_parameters():
            build_network(config.model, default_args={"parallel_config": config.parallel_config, "moe_config": config.moe_config})
        said[name] = None
    except Exception as exc:
        said[name] = str(exc)
print("PROOF" + json.dumps(said))
"""
BUILD_PROOF = BUILD_PROOF.replace(
    "\nfrom mindformers import MindFormerConfig\n", CLUSTER_STANDIN + CLUSTER_CONTEXT + "from mindformers import MindFormerConfig\n", 1
)


def _frontend_library_text() -> bytes:
    spec = importlib.util.find_spec("mindspore")
    return (Path(spec.submodule_search_locations[0]) / "lib" / "libmindspore_frontend.so").read_bytes()


@needs_mindformers
def test_the_full_size_build_finds_what_the_cluster_refuses(tmp_path):
    """Each class of issue 48, built from a shipped config with one key changed: a finding whose text is the error
    mindformers raises when it builds the full-size network apart from msnb; the shipped configs are the controls."""
    dense = SHIPPED / "qwen3" / "pretrain_qwen3_32b_4k.yaml"

    def kv_heads(d):  # 8 kv heads at tensor parallel 16 (64 devices with pp 4)
        d["parallel_config"]["model_parallel"] = 16

    def experts(d):  # 128 experts over 3
        d["parallel_config"]["expert_parallel"] = 3
        d["parallel_config"]["data_parallel"] = 3

    def ep_over_dp_mp(d):  # 8 does not divide dp 1 * mp 4
        d["parallel_config"]["expert_parallel"] = 8

    def no_seq_parallel(d):
        d["parallel_config"]["use_seq_parallel"] = False

    network_cases = {  # name: (file, devices, the key the finding names)
        "kv_heads": (_changed(tmp_path, "kv", kv_heads, dense), 64, "parallel_config.model_parallel"),
        "experts": (_changed(tmp_path, "experts", experts), 48, "parallel_config.expert_parallel"),
        "ep_over_dp_mp": (_changed(tmp_path, "ep", ep_over_dp_mp), 16, "parallel_config.expert_parallel"),
        "no_seq_parallel": (_changed(tmp_path, "nosp", no_seq_parallel), 16, "parallel_config.use_seq_parallel"),
    }
    controls = [(dense, 16, None), (MOE, 16, None)]
    # the kv-heads case proves its suggestions (asserted below); the others' findings are asked for alone
    results = run_preflights([(p, d, None) for p, d, _ in list(network_cases.values())[:1]])
    results += run_preflights([(p, d, None) for p, d, _ in list(network_cases.values())[1:]] + controls, suggest=False)
    proof = subprocess.run(
        [sys.executable, "-c", BUILD_PROOF, json.dumps([[n, str(p), d] for n, (p, d, _) in network_cases.items()] + [["control", str(dense), 16]])],
        cwd=tmp_path, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert "PROOF" in proof.stdout, proof.stderr[-3000:]
    raised = json.loads(proof.stdout.split("PROOF", 1)[1])
    assert raised["control"] is None  # the proof builds the shipped config: its refusals are the rules', not its own
    for (name, (path, _, key)), result in zip(network_cases.items(), results):
        assert result.outcome == FAILED and result.exit_code == 1, (name, result.format_text())
        finding = result.findings[0]
        assert finding.check == NETWORK, (name, finding)
        assert raised[name] and " ".join(raised[name].split()) in finding.message, (name, finding.message, raised[name])
        assert finding.key == key and finding.where.startswith(str(path) + ":"), (name, finding)
        assert finding.source.startswith("mindformers/parallel_core/") and ".py:" in finding.source, (name, finding.source)
        assert any("communication" in s for s in result.stood_in), result.stood_in
    for control in results[len(network_cases) :]:
        assert control.outcome == PASSED and control.exit_code == 0, control.format_text()
        assert {c.check: c.outcome for c in control.checks}[NETWORK] == PASSED
    # what to change, proved: the nearest tensor-parallel degrees that divide 64 heads and 8 kv heads, at 64 devices
    assert results[0].findings[0].suggestions == [
        "parallel_config.model_parallel 8, parallel_config.data_parallel 2",
        "parallel_config.model_parallel 4, parallel_config.data_parallel 4",
    ]


@needs_mindformers
def test_a_suggestion_is_shown_only_when_the_pre_flight_passes_with_it():
    """The shipped Qwen3 32B (dp1 mp4 pp4, offset [-1,-1,1,1]) moved to 32 devices: three edits keep the count, and
    pipeline_stage 8 is refused by the four-stage offset list when proved, so only the other two are shown."""
    from msnb.fullsize.suggest import candidates

    dense = SHIPPED / "qwen3" / "pretrain_qwen3_32b_4k.yaml"
    (result,) = run_preflights([(dense, 32, None)])
    first = result.findings[0]
    assert first.key == "parallel_config.data_parallel" and "device_num(32)" in first.message
    proposed = [e.words() for e in candidates(first.key, first.message, result.layout, result.dims, 32)]
    assert proposed == ["parallel_config.data_parallel 2", "parallel_config.pipeline_stage 8", "parallel_config.model_parallel 8"]
    assert first.suggestions == ["parallel_config.data_parallel 2", "parallel_config.model_parallel 8"]
    assert "change to (proved: the pre-flight passes with it)" in first.line()


@needs_mindformers
def test_rules_of_the_pipeline_scheduler_and_the_callbacks(tmp_path):
    """zero_bubble_v's micro-batch rule (the scheduler in MindSpore's context before the TransformerConfig is built),
    MindSpore's 1F1B rule (its text read out of MindSpore's own library) and TrainingStateMonitor's aggregation rule."""

    def zero_bubble(d):
        d.setdefault("parallel", {})["pipeline_config"] = {"pipeline_interleave": True, "pipeline_scheduler": "zero_bubble_v"}
        d["model"]["model_config"]["pp_interleave_num"] = 2
        d["parallel_config"]["micro_batch_num"] = 4  # below 2 * 4 stages

    def one_f_one_b(d):
        d["parallel_config"]["micro_batch_num"] = 2  # below 4 stages

    def aggregation(d):
        d["monitor_config"] = {"monitor_on": True, "stable_rank_config": {"format": ["log"], "do_aggregation": True}}

    zbv, mb, agg = _changed(tmp_path, "zbv", zero_bubble), _changed(tmp_path, "mb", one_f_one_b), _changed(tmp_path, "agg", aggregation)
    results = run_preflights([(zbv, 16, None), (mb, 16, None), (agg, 16, None)], suggest=False)
    z, m, a = (r.findings[0] if r.findings else r for r in results)
    assert "When zero_bubble_v is enabled, micro_batch_num(4) >= 2 * stage_num(4) must be met" in z.message, z
    assert z.key == "parallel_config.micro_batch_num" and z.source.startswith("mindformers/parallel_core/transformer_config.py:")
    assert m.message == "For 1F1B Scheduler, MicroBatch num must be larger or equal than StageNum, but got MicroBatch: 2 StageNum: 4", m
    assert m.key == "parallel_config.micro_batch_num" and "libmindspore_frontend.so" in m.source
    assert m.message.split(" 2 StageNum")[0].encode() in _frontend_library_text()  # MindSpore's own words
    assert "When pipeline_stages > 1, weight aggregation is not supported" in a.message and a.check.startswith("callback TrainingStateMonitor")
    assert a.key == "monitor_config.stable_rank_config.do_aggregation" and a.source.startswith("mindformers/core/callback/callback.py:")
    for r in results:
        assert r.exit_code == 1


@needs_mindformers
def test_msnbs_own_raise_is_never_a_finding(tmp_path, monkeypatch):
    """A step that raises in msnb's own code: "not checked" (exit 3) naming msnb's error, with its traceback; never failed."""
    from msnb.fullsize import build as preflight_build

    src = Path(preflight_build.__file__)
    assert "def _built_network(trainer, default_args: dict):\n" in src.read_text()
    # the child imports msnb from the path given: a copy of msnb whose parameter count raises, as a bug of msnb's would
    import shutil

    pkg = tmp_path / "pkg"
    shutil.copytree(src.parents[1], pkg / "msnb", ignore=shutil.ignore_patterns("__pycache__"))
    build = pkg / "msnb" / "fullsize" / "build.py"
    build.write_text(
        build.read_text().replace(
            "def _built_network(trainer, default_args: dict):\n", "def _built_network(trainer, default_args: dict):\n    raise KeyError('msnb bug')\n"
        )
    )
    monkeypatch.setenv("PYTHONPATH", str(pkg))
    (result,) = run_preflights([(MOE, 16, None)], suggest=False)
    assert not result.findings and result.outcome == NOT_CHECKED and result.exit_code == 3, result.format_text()
    (ours,) = result.msnb_errors
    assert ours.check == NETWORK and "KeyError" in ours.message and "msnb bug" in result.traceback
    assert "not the config's fault" in result.headline()
    assert {c.check: c.outcome for c in result.checks}["check_rules._check_recompute"] == PASSED  # what ran before is kept


def test_suggestion_arithmetic():
    """The pure part: edits that keep the device count, divisors that meet mindformers' rules, an even offset."""
    from msnb.fullsize.suggest import candidates

    def words(key, message, layout, dims, devices=None, scheduler="1f1b"):
        return [e.words() for e in candidates(key, message, layout, dims, devices, scheduler)]

    layout = {"data_parallel": 4, "model_parallel": 8, "context_parallel": 1, "pipeline_stage": 8, "expert_parallel": 48}
    moe = {"heads": 128, "kv_heads": 128, "layers": 61, "experts": 256}
    assert words("parallel_config.expert_parallel", "", layout, moe)[:2] == ["parallel_config.expert_parallel 32", "parallel_config.expert_parallel 16"]
    assert words("parallel_config.micro_batch_num", "", layout, moe, scheduler="zero_bubble_v") == ["parallel_config.micro_batch_num 16"]
    assert words("parallel_config.micro_batch_num", "", layout, moe) == ["parallel_config.micro_batch_num 8"]
    assert words("model.model_config.offset", "", layout, moe) == ["model.model_config.offset [0, 0, 0, 1, 1, 1, 1, 1]"]
    assert words("parallel_config.data_parallel", "device_num(200)", layout, moe, 200) == []  # no single degree makes 200
    assert words("parallel_config.model_parallel", "", {"data_parallel": 1, "model_parallel": 3}, {"heads": 32, "kv_heads": 4}) == [
        "parallel_config.model_parallel 1, parallel_config.data_parallel 3"
    ]
    assert words("parallel_config.use_seq_parallel", "", layout, moe) == ["parallel_config.use_seq_parallel True"]
    assert words("recompute_config.recompute", "", layout, moe) == [] and words("parallel_config.model_parallel", "", {}, moe) == []


@needs_mindformers
def test_the_rules_that_need_the_dataset_run_when_it_is_here(tmp_path):
    """The shipped Qwen3 32B reading a MindRecord that is here: the Trainer's dataset is built (workers capped at this
    machine's cores, said) and check_runner_config runs on it (a sink_size of 0 is its finding); absent, they are apart."""
    import numpy as np
    from mindspore.mindrecord import FileWriter

    from msnb.fullsize.build import DATASET, RUNNER_RULES

    columns = ["input_ids", "labels", "loss_mask", "position_ids"]
    writer = FileWriter(str(tmp_path / "d.mindrecord"), shard_num=1, overwrite=True)
    writer.add_schema({c: {"type": "int32", "shape": [-1]} for c in columns}, "d")
    writer.write_raw_data([{c: np.arange(4096, dtype=np.int32) for c in columns} for _ in range(16)])
    writer.commit()

    def own_data(d, **runner):
        d["train_dataset"]["data_loader"] = {"type": "MindDataset", "dataset_dir": str(tmp_path / "d.mindrecord"), "shuffle": False}
        d["train_dataset_task"]["dataset_config"] = d["train_dataset"]
        d["runner_config"].update(runner)

    dense = SHIPPED / "qwen3" / "pretrain_qwen3_32b_4k.yaml"
    good = _changed(tmp_path, "data", own_data, dense)
    bad = _changed(tmp_path, "sink", lambda d: own_data(d, sink_mode=True, sink_size=0), dense)
    ok, refused, absent = run_preflights([(good, 16, None), (bad, 16, None), (dense, 16, None)], suggest=False)
    by_name = {c.check: c for c in ok.checks}
    assert ok.outcome == PASSED and by_name[DATASET].outcome == by_name[RUNNER_RULES].outcome == PASSED, ok.format_text()
    assert any("num_parallel_workers" in s for s in ok.stood_in) and not any("dataset's size" in s for s in ok.stood_in)
    (finding,) = refused.findings
    assert finding.check == RUNNER_RULES and finding.message == "per epoch size must be more than 0 or equal to -1, but get 0"
    assert finding.key == "runner_config.sink_size" and finding.source.startswith("mindformers/trainer/utils.py:")
    (apart,) = [c for c in absent.data_rules if c.check == RUNNER_RULES]  # the shipped file's dataset is the cluster's
    assert "is not on this machine" in apart.message and absent.outcome == PASSED
