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
from tests.conftest import REPO, kernel_from_spec, stream_text


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
    # --no-check here and below: these tests are about the kernelspec's files; the readiness check that starts the
    # kernel has tests of its own (test_user_install_is_the_default, tests/kernel/test_doctor_kernel.py)
    run_msnb("install-kernel", "--prefix", prefix, "--no-check", check=0)
    first = (spec_dir(prefix) / "kernel.json").read_text()
    run_msnb("install-kernel", "--prefix", prefix, "--no-check", check=0)
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

    run_msnb("install-kernel", "--prefix", prefix, "--force", "--no-check", check=0)
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
        "--no-check",
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

    run_msnb("install-kernel", "--prefix", jupyter_dirs["prefix"], "--no-check", check=0)
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


def _advice(stdout: str) -> list[str]:
    """The fix lines an install printed."""
    return [line.split("fix:", 1)[1].strip() for line in stdout.splitlines() if line.strip().startswith("fix:")]


def test_prefix_then_user_kernel_of_the_same_name_one_story(jupyter_dirs, run_msnb):
    """A kernel installed where Jupyter searches first (here JUPYTER_PATH's prefix; in a virtual environment --sys-prefix),
    then for the user under the same name: the advice never repeats the install just made, list-kernels shows both
    and which one a front end starts, and uninstall says what it removed and what it left."""
    name = "msnb-test-twice"  # never "mindspore": --all would also reach the test venv's own --sys-prefix kernel
    prefix = jupyter_dirs["prefix"]
    first, second = spec_dir(prefix, name), jupyter_dirs["data"] / "kernels" / name

    proc = run_msnb("install-kernel", "--name", name, "--prefix", prefix, "--no-check", check=0)
    advice = _advice(proc.stdout)
    assert len(advice) == 1 and f"--prefix {prefix}" not in advice[0].split("&&")[0], advice  # not the install just run
    # a --user copy alone would be shadowed by this one: the advice moves it (install for the user, remove this one)
    assert f"msnb install-kernel --user --name {name} && msnb uninstall-kernel --name {name} --prefix {prefix}" in advice[0]

    # the same interpreter with the same settings (the README's --sys-prefix for the tests, then its user install):
    # one kernel found twice, said as information with nothing to do, not a warning that asks for a removal
    proc = run_msnb("install-kernel", "--name", name, "--user", "--no-check", check=0)
    assert "INFO" in proc.stdout and "same interpreter with the same settings" in proc.stdout and "WARNING" not in proc.stdout, proc.stdout
    assert not _advice(proc.stdout)
    # a kernel that differs (here its environment variables): the user's copy is never started, warned with the fix
    spec = json.loads((first / "kernel.json").read_text())
    (first / "kernel.json").write_text(json.dumps({**spec, "env": {"MSNB_TEST_DIFFERENT": "1"}}))
    proc = run_msnb("install-kernel", "--name", name, "--user", "--no-check", check=0)
    assert "never started" in proc.stdout and str(first) in proc.stdout
    advice = _advice(proc.stdout)
    assert len(advice) == 1 and "msnb install-kernel" not in advice[0], advice  # not the install just run, nor a repeat of it
    assert f"msnb uninstall-kernel --name {name} --prefix {prefix}" in advice[0]

    listed = [k for k in json.loads(run_msnb("list-kernels", "--json", check=0).stdout) if k["name"] == name]
    assert [k["resource_dir"] for k in listed] == [str(first), str(second)]  # Jupyter's search order, the started one first
    assert listed[0]["shadowed_by"] is None and listed[1]["shadowed_by"] == str(first)
    assert listed[1]["where"] == "for the user" and str(prefix) in listed[0]["where"]
    text = run_msnb("list-kernels", check=0).stdout
    marks = [line for line in text.splitlines() if line.startswith(name)]
    assert "started: first of 2" in marks[0] and "SHADOWED" in marks[1], marks
    assert f"msnb uninstall-kernel --name {name} --user" in text  # how to remove the shadowed one

    report = json.loads(run_msnb("doctor", "--json", check=0).stdout)
    shadowed = [f for f in report["findings"] if f["rule"] == "kernel-shadowed" and str(second) in f["message"]]
    assert len(shadowed) == 1 and f"--name {name} --user" in shadowed[0]["fix"], report["findings"]

    # uninstall removes the one Jupyter starts and says the user's one is what it starts now, with the command for it
    proc = run_msnb("uninstall-kernel", "--name", name, check=0)
    assert not first.exists() and second.exists()
    assert f"Removed kernelspec {name!r} under the prefix {prefix}: {first}" in proc.stdout
    assert f"now start the kernelspec {name!r} for the user: {second}" in proc.stdout
    assert f"msnb uninstall-kernel --name {name} --user" in proc.stdout and "uninstall-kernel --name {name}\n" not in proc.stdout

    # --all removes every one of that name and says nothing is left
    kernel.install(name, prefix=prefix)
    proc = run_msnb("uninstall-kernel", "--name", name, "--all", check=0)
    assert not first.exists() and not second.exists()
    assert proc.stdout.count("Removed kernelspec") == 2 and f"No kernelspec named {name!r} is left" in proc.stdout


def test_uninstall_all_leaves_what_msnb_did_not_make_and_says_why(jupyter_dirs, run_msnb):
    name = "msnb-test-mixed"
    prefix = jupyter_dirs["prefix"]
    kernel.install(name)  # the user's, made by msnb
    foreign = spec_dir(prefix, name)
    foreign.mkdir(parents=True)
    (foreign / "kernel.json").write_text(json.dumps({"argv": [sys.executable], "display_name": "Other", "language": "python"}))

    proc = run_msnb("uninstall-kernel", "--name", name, "--all", check=1)
    assert not (jupyter_dirs["data"] / "kernels" / name).exists() and foreign.exists()
    assert f"Left kernelspec {name!r} under the prefix {prefix}" in proc.stdout and "not made by msnb" in proc.stdout
    assert f"now start the kernelspec {name!r} under the prefix {prefix}" in proc.stdout


def test_a_kernel_off_the_search_path_is_pointed_at_the_one_jupyter_starts(jupyter_dirs, run_msnb, tmp_path):
    name = "msnb-test-offpath"
    other = tmp_path / "other-env"  # not on JUPYTER_PATH
    kernel.install(name, prefix=jupyter_dirs["prefix"])
    proc = run_msnb("install-kernel", "--name", name, "--prefix", other, "--no-check", check=0)
    assert "not on Jupyter's search path" in proc.stdout and str(spec_dir(jupyter_dirs["prefix"], name)) in proc.stdout
    (advice,) = _advice(proc.stdout)
    assert advice.endswith(f"msnb install-kernel --name {name} --prefix {jupyter_dirs['prefix']} --force") and str(other) not in advice
