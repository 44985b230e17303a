"""The MindSpore Kernel installer: kernelspec content, refusals, --ascend-env,
and a real kernel started from the installed kernelspec."""

import json
import os
import sys
import textwrap
from pathlib import Path

import pytest

from msnb import kernel
from msnb.kernel import KernelSpecError

from .conftest import REPO, kernel_from_spec, stream_text


def spec_dir(prefix: Path, name: str = "mindspore") -> Path:
    return prefix / "share" / "jupyter" / "kernels" / name


def test_install_writes_kernelspec_for_this_interpreter(jupyter_dirs):
    prefix = jupyter_dirs["prefix"]
    path = kernel.install(prefix=prefix)
    assert path == spec_dir(prefix)
    spec = json.loads((path / "kernel.json").read_text())
    assert spec["display_name"] == "MindSpore Kernel"
    assert spec["language"] == "python"
    assert spec["argv"][0] == sys.executable
    assert spec["argv"][1:5] == ["-m", "ipykernel_launcher", "-f", "{connection_file}"]
    assert "--IPKernelApp.extensions=msnb" in spec["argv"]
    assert "msnb" in spec["metadata"]
    assert "env" not in spec  # nothing asked for, nothing recorded
    for logo in ("logo-32x32.png", "logo-64x64.png"):
        assert (path / logo).read_bytes() == (REPO / "kernel" / logo).read_bytes()


def test_user_install_is_the_default(jupyter_dirs, run_msnb):
    proc = run_msnb("install-kernel", check=0)
    target = jupyter_dirs["data"] / "kernels" / "mindspore" / "kernel.json"
    assert target.exists(), proc.stdout
    assert str(target.parent) in proc.stdout


def test_sys_prefix_install_targets_this_environment():
    user, prefix = kernel.install_location(sys_prefix=True)
    assert (user, prefix) == (False, sys.prefix)
    with pytest.raises(KernelSpecError, match="choose one"):
        kernel.install_location(sys_prefix=True, prefix="/tmp/x")


def test_installing_twice_is_harmless(jupyter_dirs, run_msnb):
    prefix = jupyter_dirs["prefix"]
    run_msnb("install-kernel", "--prefix", prefix, check=0)
    first = (spec_dir(prefix) / "kernel.json").read_text()
    run_msnb("install-kernel", "--prefix", prefix, check=0)
    assert (spec_dir(prefix) / "kernel.json").read_text() == first


def test_foreign_kernelspec_is_not_overwritten_without_force(jupyter_dirs, run_msnb):
    prefix = jupyter_dirs["prefix"]
    target = spec_dir(prefix)
    target.mkdir(parents=True)
    foreign = {"argv": ["/opt/other/python", "-m", "ipykernel_launcher", "-f", "{connection_file}"], "display_name": "Theirs", "language": "python"}
    (target / "kernel.json").write_text(json.dumps(foreign))

    proc = run_msnb("install-kernel", "--prefix", prefix, check=2)
    assert "msnb did not make" in proc.stderr and "--force" in proc.stderr
    assert json.loads((target / "kernel.json").read_text()) == foreign

    run_msnb("install-kernel", "--prefix", prefix, "--force", check=0)
    assert json.loads((target / "kernel.json").read_text())["display_name"] == "MindSpore Kernel"


def test_msnb_kernel_of_another_interpreter_is_not_overwritten(jupyter_dirs):
    prefix = jupyter_dirs["prefix"]
    kernel.install(prefix=prefix, python="/opt/other-env/bin/python")
    with pytest.raises(KernelSpecError, match="another interpreter"):
        kernel.install(prefix=prefix)
    kernel.install(prefix=prefix, force=True)
    assert json.loads((spec_dir(prefix) / "kernel.json").read_text())["argv"][0] == sys.executable


def test_reinstall_for_same_interpreter_updates_options(jupyter_dirs):
    prefix = jupyter_dirs["prefix"]
    kernel.install(prefix=prefix)
    kernel.install(prefix=prefix, display_name="MindSpore (team)", env={"A": "1"})
    spec = json.loads((spec_dir(prefix) / "kernel.json").read_text())
    assert spec["display_name"] == "MindSpore (team)" and spec["env"] == {"A": "1"}


@pytest.mark.parametrize("bad", ["MindSpore", "my kernel", "", "a/b", "ms!"])
def test_invalid_kernel_names_are_refused(bad, jupyter_dirs, run_msnb):
    with pytest.raises(KernelSpecError, match=r"\^\[a-z0-9\._-\]\+\$"):
        kernel.install(bad, prefix=jupyter_dirs["prefix"])
    proc = run_msnb("install-kernel", "--name", bad, "--prefix", jupyter_dirs["prefix"], check=2)
    assert "invalid kernel name" in proc.stderr
    assert not (jupyter_dirs["prefix"] / "share").exists()


def write_set_env(tmp_path: Path) -> Path:
    """A set_env.sh shaped like the CANN toolkit's: exports, prepends, chatter on stdout."""
    home = tmp_path / "Ascend" / "ascend-toolkit" / "latest"
    (home / "lib64").mkdir(parents=True)
    script = tmp_path / "Ascend" / "ascend-toolkit" / "set_env.sh"
    script.write_text(
        textwrap.dedent(
            f"""\
            # shaped after CANN's set_env.sh
            echo "setting up the Ascend toolkit"
            export ASCEND_TOOLKIT_HOME={home}
            export ASCEND_HOME_PATH=$ASCEND_TOOLKIT_HOME
            export ASCEND_OPP_PATH=$ASCEND_TOOLKIT_HOME/opp
            export LD_LIBRARY_PATH=$ASCEND_TOOLKIT_HOME/lib64:$LD_LIBRARY_PATH
            export PYTHONPATH=$ASCEND_TOOLKIT_HOME/python/site-packages:$PYTHONPATH
            export PATH=$ASCEND_TOOLKIT_HOME/bin:$PATH
            export TOOLCHAIN_HOME="{home}/toolkit with space"
            MULTILINE_NOT_EXPORTED=1
            export ASCEND_NOTE="line one
            line two"
            helper() {{ true; }}
            """
        )
    )
    return script


def test_ascend_env_records_what_the_script_sets(tmp_path, jupyter_dirs, run_msnb, monkeypatch):
    monkeypatch.setenv("LD_LIBRARY_PATH", "/usr/lib/existing")
    script = write_set_env(tmp_path)
    home = str(tmp_path / "Ascend" / "ascend-toolkit" / "latest")

    recorded = kernel.read_env_script(script)
    assert recorded["ASCEND_TOOLKIT_HOME"] == home
    assert recorded["ASCEND_HOME_PATH"] == home
    assert recorded["ASCEND_OPP_PATH"] == home + "/opp"
    assert recorded["LD_LIBRARY_PATH"] == f"{home}/lib64:/usr/lib/existing"
    assert recorded["PATH"] == f"{home}/bin:{os.environ['PATH']}"
    assert recorded["PYTHONPATH"].startswith(f"{home}/python/site-packages:")
    assert recorded["TOOLCHAIN_HOME"] == f"{home}/toolkit with space"
    assert recorded["ASCEND_NOTE"] == "line one\nline two"
    # unchanged variables, shell bookkeeping and unexported ones stay out
    for absent in ("HOME", "SHLVL", "_", "PWD", "MULTILINE_NOT_EXPORTED"):
        assert absent not in recorded

    run_msnb(
        "install-kernel",
        "--prefix",
        jupyter_dirs["prefix"],
        "--ascend-env",
        script,
        "--env",
        "ASCEND_OPP_PATH=/override",
        env={"LD_LIBRARY_PATH": "/usr/lib/existing"},
        check=0,
    )
    spec = json.loads((spec_dir(jupyter_dirs["prefix"]) / "kernel.json").read_text())
    assert spec["env"]["ASCEND_HOME_PATH"] == home
    assert spec["env"]["LD_LIBRARY_PATH"] == f"{home}/lib64:/usr/lib/existing"
    assert spec["env"]["ASCEND_OPP_PATH"] == "/override"  # --env wins over the script


def test_ascend_env_failures_name_the_script(tmp_path, jupyter_dirs, run_msnb):
    missing = tmp_path / "nope" / "set_env.sh"
    proc = run_msnb("install-kernel", "--prefix", jupyter_dirs["prefix"], "--ascend-env", missing, check=2)
    assert str(missing) in proc.stderr

    broken = tmp_path / "set_env.sh"
    broken.write_text("echo 'cannot find /usr/local/Ascend/driver' >&2\nreturn 3\n")
    with pytest.raises(KernelSpecError) as err:
        kernel.read_env_script(broken)
    assert str(broken) in str(err.value) and "exit code 3" in str(err.value)
    assert "cannot find /usr/local/Ascend/driver" in str(err.value)
    assert not spec_dir(jupyter_dirs["prefix"]).exists()


@pytest.mark.parametrize("item", ["NOVALUE", "=x", "1BAD=x", "A B=c"])
def test_bad_env_assignment_is_refused(item, jupyter_dirs, run_msnb):
    proc = run_msnb("install-kernel", "--prefix", jupyter_dirs["prefix"], "--env", item, check=2)
    assert repr(item) in proc.stderr


def test_uninstall_removes_only_msnb_kernels(jupyter_dirs, run_msnb):
    prefix = jupyter_dirs["prefix"]
    kernel.install("msnb-test-own", prefix=prefix)
    foreign = spec_dir(prefix, "msnb-test-foreign")
    foreign.mkdir(parents=True)
    (foreign / "kernel.json").write_text(json.dumps({"argv": ["python"], "display_name": "Other", "language": "python"}))

    proc = run_msnb("uninstall-kernel", "--name", "msnb-test-foreign", check=2)
    assert "not made by msnb" in proc.stderr
    assert foreign.exists()

    run_msnb("uninstall-kernel", "--name", "msnb-test-own", check=0)
    assert not spec_dir(prefix, "msnb-test-own").exists()

    proc = run_msnb("uninstall-kernel", "--name", "msnb-test-own", check=2)
    assert "no kernelspec named 'msnb-test-own'" in proc.stderr


def test_list_kernels_marks_msnb_and_missing_interpreters(jupyter_dirs, run_msnb):
    prefix = jupyter_dirs["prefix"]
    kernel.install("msnb-test-live", prefix=prefix)
    kernel.install("msnb-test-gone", prefix=prefix, python="/nonexistent/env/bin/python")
    foreign = spec_dir(prefix, "msnb-test-foreign")
    foreign.mkdir(parents=True)
    (foreign / "kernel.json").write_text(json.dumps({"argv": [sys.executable], "display_name": "Other", "language": "python"}))

    listed = {k["name"]: k for k in json.loads(run_msnb("list-kernels", "--json", check=0).stdout)}
    assert listed["msnb-test-live"]["made_by_msnb"] and listed["msnb-test-live"]["interpreter_exists"]
    assert listed["msnb-test-gone"]["made_by_msnb"] and not listed["msnb-test-gone"]["interpreter_exists"]
    assert not listed["msnb-test-foreign"]["made_by_msnb"] and listed["msnb-test-foreign"]["interpreter_exists"]

    text = run_msnb("list-kernels", check=0).stdout
    gone_line = next(line for line in text.splitlines() if line.startswith("msnb-test-gone"))
    assert "[msnb, interpreter missing]" in gone_line


def test_jupyter_sees_the_installed_kernel(jupyter_dirs, run_msnb):
    import subprocess

    run_msnb("install-kernel", "--prefix", jupyter_dirs["prefix"], check=0)
    jupyter = Path(sys.executable).parent / "jupyter"
    out = subprocess.run([str(jupyter), "kernelspec", "list", "--json"], capture_output=True, text=True, check=True).stdout
    specs = json.loads(out)["kernelspecs"]
    assert specs["mindspore"]["spec"]["display_name"] == "MindSpore Kernel"
    assert specs["mindspore"]["resource_dir"] == str(spec_dir(jupyter_dirs["prefix"]))


def test_real_kernel_from_the_kernelspec_has_msnb_loaded(tmp_path, jupyter_dirs):
    """Start the kernel the way Jupyter and VS Code do: by name, from the kernelspec."""
    script = write_set_env(tmp_path)
    kernel.install("msnb-test-live", prefix=jupyter_dirs["prefix"], ascend_env=script, env={"MSNB_TEST_MARK": "from-kernelspec"})
    with kernel_from_spec("msnb-test-live") as kc:
        outputs = []
        code = (
            "import json, os, sys\n"
            "ip = get_ipython()\n"
            "print(json.dumps({'loaded': sorted(ip.extension_manager.loaded),"
            " 'magics': sorted(ip.magics_manager.lsmagic()['line']),"
            " 'mark': os.environ.get('MSNB_TEST_MARK'),"
            " 'ascend_home': os.environ.get('ASCEND_HOME_PATH'),"
            " 'executable': sys.executable,"
            " 'heavy': [m for m in ('mindspore', 'mindformers') if m in sys.modules]}))\n"
        )
        reply = kc.execute_interactive(code, timeout=60, output_hook=outputs.append)
        assert reply["content"]["status"] == "ok"
        state = json.loads(stream_text(outputs))
        assert "msnb" in state["loaded"]
        assert "mfmon_doctor" in state["magics"]
        assert state["mark"] == "from-kernelspec"
        assert state["ascend_home"] == str(tmp_path / "Ascend" / "ascend-toolkit" / "latest")
        assert os.path.realpath(state["executable"]) == os.path.realpath(sys.executable)
        assert state["heavy"] == []  # loading msnb must not import MindSpore

        outputs.clear()
        reply = kc.execute_interactive("r = %mfmon_doctor --json\nprint(r['packages']['msnb'])", timeout=60, output_hook=outputs.append)
        assert reply["content"]["status"] == "ok"
        import msnb

        assert msnb.__version__ in stream_text(outputs)
