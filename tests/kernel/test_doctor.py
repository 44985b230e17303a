"""``msnb doctor``: versions, known-bad combinations, devices, kernels, exit codes."""

import importlib.metadata as md
import json
import os
from pathlib import Path

import pytest

from msnb import doctor, kernel
from msnb.requirements import StackFacts, installed_stack_facts

HEALTHY = {
    "msnb": "0.1.0",
    "mindspore": "2.9.0",
    "mindformers": "1.9.0",
    "protobuf": "3.20.3",
    "numpy": "1.26.4",
    "ipykernel": "7.4.0",
    "mindinsight": None,
}


# what MindSpore 2.9 declares (Requires-Dist) and ships (protobuf 3's generated modules): HEALTHY's facts, whichever
# MindSpore this environment holds (tests/test_requirements.py checks the rules for 2.10)
FACTS_2_9 = StackFacts({"mindspore": {"protobuf": ">=3.13.0", "numpy": "<2.0.0,>=1.20.0"}}, summary_pre4=True)


def codes(findings, severity=None):
    return {f.rule for f in findings if severity is None or f.severity == severity}


@pytest.fixture(scope="module")
def mf_map():
    """mindformers' own VERSION_MAP.json, from the installed mindformers."""
    found = doctor.mindformers_version_map()
    assert found is not None, "mindformers (installed by the [all] extra) ships VERSION_MAP.json"
    return found


def test_healthy_versions_have_no_errors(mf_map):
    assert codes(doctor.check_versions(HEALTHY, mf_map, facts=FACTS_2_9), doctor.ERROR) == set()


def test_protobuf_4_with_mindspore_is_blocking_with_fix(mf_map):
    found = doctor.check_versions({**HEALTHY, "protobuf": "4.25.9"}, mf_map, facts=FACTS_2_9)
    f = next(f for f in found if f.rule == "protobuf-summary-collector")
    assert f.severity == doctor.ERROR
    assert "4.25.9" in f.message and "SummaryCollector" in f.message
    assert f.fix == "pip install protobuf==3.20.3"
    # without MindSpore the protobuf version does not matter to msnb
    assert "protobuf-summary-collector" not in codes(
        doctor.check_versions({**HEALTHY, "protobuf": "5.29.0", "mindspore": None, "mindformers": None}, facts=FACTS_2_9)
    )


def test_numpy_2_with_mindspore_is_blocking(mf_map):
    found = doctor.check_versions({**HEALTHY, "numpy": "2.1.3"}, mf_map, facts=FACTS_2_9)
    f = next(f for f in found if f.rule == "numpy-mindspore-requirement")
    assert f.severity == doctor.ERROR and "numpy<2" in f.fix


def test_mindinsight_that_does_not_match_mindspore_is_flagged(mf_map):
    found = doctor.check_versions({**HEALTHY, "mindinsight": "2.3.1"}, mf_map, facts=FACTS_2_9)
    f = next(f for f in found if f.rule == "mindinsight-mismatch")
    assert f.severity == doctor.WARNING and "2.3.1" in f.message and "2.9.0" in f.message
    assert "mindinsight-mismatch" not in codes(
        doctor.check_versions({**HEALTHY, "mindspore": "2.3.1", "mindformers": None, "mindinsight": "2.3.1"}, facts=FACTS_2_9)
    )


def test_mindformers_pair_outside_its_version_map(mf_map):
    supported = mf_map["mf"]["1.9.0"]["support"]
    found = doctor.check_versions({**HEALTHY, "mindspore": "2.10.0"}, mf_map, facts=FACTS_2_9)
    f = next(f for f in found if f.rule == "mindformers-mindspore-pair")
    assert f.severity == doctor.ERROR
    assert "2.10.0" in f.message and all(v in f.message for v in supported)
    assert f.fix == f"pip install mindspore=={mf_map['mf']['1.9.0']['prefer']}"
    unknown = doctor.check_versions({**HEALTHY, "mindformers": "0.0.1"}, mf_map, facts=FACTS_2_9)
    assert "mindformers-unknown-version" in codes(unknown, doctor.WARNING)


def test_mindformers_without_mindspore():
    found = doctor.check_versions({**HEALTHY, "mindspore": None}, facts=FACTS_2_9)
    assert "mindformers-without-mindspore" in codes(found, doctor.ERROR)
    assert "mindspore-missing" in codes(found, doctor.WARNING)


def test_versions_come_from_installed_metadata():
    versions = doctor.installed_versions()
    for name in ("msnb", "mindspore", "protobuf", "numpy", "ipykernel"):
        assert versions[name] == md.version(name)
    assert versions["mindinsight"] is None or versions["mindinsight"] == md.version("mindinsight")


def test_devices_on_this_cpu_machine():
    devices = {d.device: d for d in doctor.detect_devices(doctor.installed_versions())}
    assert list(devices) == ["Ascend", "GPU", "CPU"]
    assert devices["CPU"].usable
    if not any(Path("/dev").glob("davinci[0-9]*")):
        assert not devices["Ascend"].usable and "davinci" in devices["Ascend"].reason


def test_ascend_is_chosen_when_npus_and_toolkit_are_present(tmp_path, monkeypatch):
    """A /dev with NPU nodes and a CANN home: the installed wheel's Ascend plugin makes it usable."""
    dev = tmp_path / "dev"
    dev.mkdir()
    for node in ("davinci0", "davinci1", "davinci_manager"):
        (dev / node).touch()
    home = tmp_path / "ascend-toolkit" / "latest"
    home.mkdir(parents=True)
    monkeypatch.setenv("ASCEND_HOME_PATH", str(home))
    devices = doctor.detect_devices(doctor.installed_versions(), dev_dir=str(dev))
    assert devices[0].device == "Ascend" and devices[0].usable, devices[0].reason
    assert "2 NPUs" in devices[0].reason and str(home) in devices[0].reason


def test_no_mindspore_means_no_device():
    devices = doctor.detect_devices({"mindspore": None})
    assert not any(d.usable for d in devices)
    assert all("not installed" in d.reason for d in devices)


def test_doctor_cli_json_on_this_environment(jupyter_dirs, run_msnb):
    kernel.install("msnb-test-gone", prefix=jupyter_dirs["prefix"], python="/nonexistent/bin/python")
    proc = run_msnb("doctor", "--json", check=0)
    report = json.loads(proc.stdout)
    assert report["packages"]["mindspore"] == md.version("mindspore")
    assert report["blocking"] is False
    assert report["best_device"] in ("Ascend", "GPU", "CPU")
    assert any(d["device"] == "CPU" and d["usable"] for d in report["devices"])
    gone = next(k for k in report["kernels"] if k["name"] == "msnb-test-gone")
    assert gone["made_by_msnb"] and not gone["interpreter_exists"]
    assert any(f["rule"] == "kernel-interpreter-missing" and "msnb-test-gone" in f["message"] for f in report["findings"])


def test_doctor_text_report(run_msnb):
    out = run_msnb("doctor", check=0).stdout
    for heading in ("Packages", "Devices", "Kernels"):
        assert heading in out
    assert f"mindspore       {md.version('mindspore')}" in out


def _fake_distribution(site: Path, name: str, version: str) -> None:
    info = site / f"{name}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")


def test_doctor_exits_1_on_a_blocking_problem(tmp_path, run_msnb):
    """An environment whose metadata says protobuf 5 (found first on sys.path) is refused, with the fix its MindSpore accepts."""
    site = tmp_path / "site"
    _fake_distribution(site, "protobuf", "5.29.0")
    env = {"PYTHONPATH": str(site) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = run_msnb("doctor", "--json", env=env, check=1)
    report = json.loads(proc.stdout)
    assert report["packages"]["protobuf"] == "5.29.0"
    assert report["blocking"] is True
    text = run_msnb("doctor", env=env, check=1).stdout
    if installed_stack_facts().summary_pre4:  # MindSpore 2.9: its SummaryCollector needs protobuf 3
        assert any(f["rule"] == "protobuf-summary-collector" for f in report["findings"])
        assert "fix: pip install protobuf==3.20.3" in text
    else:  # MindSpore 2.10 requires protobuf >= 7.34.1: 5 breaks its import, and 3.20.3 is never the advice
        assert any(f["rule"] == "protobuf-mindspore-requirement" for f in report["findings"])
        assert 'fix: pip install "protobuf>=7.34.1"' in text and "3.20.3" not in text


def test_probe_runs_mindspore_on_cpu(run_msnb):
    report = json.loads(run_msnb("doctor", "--json", "--probe", check=0).stdout)
    cpu = next(d for d in report["devices"] if d["device"] == "CPU")
    assert cpu["usable"] and "confirmed by running MindSpore" in cpu["reason"]


def test_mindformers_is_not_imported_by_doctor(tmp_path):
    """Importing mindformers writes ./output/log: the doctor must not do it."""
    import subprocess
    import sys

    code = "import sys, msnb.doctor as d; d.run(); print(sorted(m for m in ('mindspore','mindformers') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
    assert not (tmp_path / "output").exists()


def test_doctor_checks_each_kernels_own_interpreter_against_this_environment(jupyter_dirs, tmp_path):
    """A MindSpore Kernel whose interpreter is another environment's (a fresh virtual environment here; the mindformers
    1.9 one seen from the 2.0 one) is warned about, naming both sides' MindSpore; one of this environment is not."""
    import subprocess
    import sys

    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "other")], check=True, timeout=120)
    other_python = tmp_path / "other" / "bin" / "python"
    kernel.install("msnb-test-here", prefix=jupyter_dirs["prefix"])
    there = kernel.install("msnb-test-there", prefix=jupyter_dirs["prefix"])
    spec = json.loads((Path(there) / "kernel.json").read_text())
    (Path(there) / "kernel.json").write_text(json.dumps({**spec, "argv": [str(other_python), *spec["argv"][1:]]}))
    report = doctor.run()
    found = {f.key: f for f in report.findings if f.rule == "kernel-other-environment"}
    assert "msnb-test-here" not in found and "msnb-test-there" in found, report.format_text()
    ours = md.version("mindspore")
    assert f"mindspore none there, {ours} here" in found["msnb-test-there"].message and str(tmp_path / "other") not in found["msnb-test-there"].fix
    assert found["msnb-test-there"].severity == doctor.WARNING and "fit for monitored" not in report.format_text()
