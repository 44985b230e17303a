"""``msnb doctor --kernel``: real kernels started from kernelspecs in temporary Jupyter folders.

Every kernel here is installed into the test's own JUPYTER_DATA_DIR or a
temporary prefix on JUPYTER_PATH (see conftest's ``jupyter_dirs``) and started
by the doctor through jupyter_client, in a fresh minimal environment.  HOME
points at a temporary folder, so the login shell the doctor compares with reads
a profile the test wrote, never the developer's.
"""

import importlib.metadata as md
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from msnb import kernel

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def home(tmp_path):
    """An empty HOME: no shell profile, no ~/.ipython of the developer's."""
    path = tmp_path / "home"
    path.mkdir()
    return path


@pytest.fixture
def doctor_kernel(run_msnb, home):
    """Run ``msnb doctor --kernel NAME --json``; returns (exit code, report, stderr)."""

    def run(name, *, check):
        proc = run_msnb("doctor", "--kernel", name, "--json", env={"HOME": str(home)}, check=check, timeout=400)
        return json.loads(proc.stdout) if proc.stdout.strip() else None

    return run


def rules(report, severity=None):
    return {f["rule"] for f in report["findings"] if severity is None or f["severity"] == severity}


def finding(report, rule):
    return next(f for f in report["findings"] if f["rule"] == rule)


def install(name, prefix=None, *, env=None, **kwargs):
    """Install msnb's kernelspec; the kernel imports msnb from this checkout (as an editable install would)."""
    where = {"prefix": prefix} if prefix is not None else {"user": True}
    return kernel.install(name, env={"PYTHONPATH": str(REPO), **(env or {})}, **where, **kwargs)


def write_spec(prefix, name, argv, **extra):
    """A kernelspec written by hand, as other tools (or a broken install) leave them."""
    target = Path(prefix) / "share" / "jupyter" / "kernels" / name
    target.mkdir(parents=True)
    (target / "kernel.json").write_text(json.dumps({"argv": argv, "display_name": name, "language": "python", **extra}))
    return target


def fake_cann(tmp_path):
    """A CANN-like install: ascend-toolkit/latest/{lib64,bin} and ascend-toolkit/set_env.sh that exports what CANN's does."""
    toolkit = tmp_path / "Ascend" / "ascend-toolkit"
    latest = toolkit / "latest"
    (latest / "lib64").mkdir(parents=True)
    (latest / "bin").mkdir()
    script = toolkit / "set_env.sh"
    script.write_text(
        textwrap.dedent(
            f"""\
            export ASCEND_TOOLKIT_HOME={latest}
            export ASCEND_HOME_PATH=${{ASCEND_TOOLKIT_HOME}}
            export LD_LIBRARY_PATH=${{ASCEND_TOOLKIT_HOME}}/lib64:${{LD_LIBRARY_PATH}}
            export PATH=${{ASCEND_TOOLKIT_HOME}}/bin:$PATH
            """
        )
    )
    return script, latest


def test_healthy_kernel_starts_with_magics_and_mindspore(jupyter_dirs, doctor_kernel):
    spec_dir = install("msnb-ok")
    assert spec_dir.parent == jupyter_dirs["data"] / "kernels"
    report = doctor_kernel("msnb-ok", check=0)
    k = report["kernel"]
    assert k["name"] == "msnb-ok" and Path(k["path"]) == spec_dir and k["python"] == sys.executable
    assert k["starts"] is True and k["start_s"] > 0
    inside = k["inside"]
    assert inside["magics_loaded"] is True and "mfmon_smoke" in inside["magics"]
    assert inside["msnb_path"] == str(REPO / "msnb")
    assert inside["mindspore"] == md.version("mindspore")
    assert inside["device"] in ("Ascend", "GPU", "CPU") and inside["devices_available"]["CPU"] is True
    assert rules(report, "error") == set()
    assert "kernel-location" not in rules(report)  # a --user kernel is listed whatever interpreter is selected
    for f in report["findings"]:
        assert set(f) == {"rule", "severity", "message", "fix"}


def test_kernel_only_under_a_prefix_gets_kernel_location(jupyter_dirs, doctor_kernel):
    install("msnb-prefixed", jupyter_dirs["prefix"])
    report = doctor_kernel("msnb-prefixed", check=0)
    f = finding(report, "kernel-location")
    assert f["severity"] == "warning" and str(jupyter_dirs["prefix"]) in f["message"]
    assert "--user" in f["fix"] and "msnb-prefixed" in f["fix"]
    assert report["kernel"]["starts"] is True


def test_interpreter_that_is_gone(jupyter_dirs, doctor_kernel):
    kernel.install("msnb-gone", prefix=jupyter_dirs["prefix"], python="/nonexistent/env/bin/python")
    report = doctor_kernel("msnb-gone", check=1)
    f = finding(report, "kernel-python-missing")
    assert f["severity"] == "error" and "/nonexistent/env/bin/python" in f["message"]
    assert "msnb install-kernel --name msnb-gone --force" in f["fix"]
    assert report["kernel"]["starts"] is False and report["kernel"]["inside"] == {} and report["kernel"]["start_s"] == 0.0


def test_env_references_are_flagged_with_what_the_kernel_got(jupyter_dirs, doctor_kernel, home):
    refs = {"LD_LIBRARY_PATH": "${LD_LIBRARY_PATH}:/opt/more/lib", "MSNB_TEST_DATA": "${HOME}/data", "MSNB_TEST_MIX": "$HOME/a:$MSNB_NOT_SET/b"}
    install("msnb-refs", jupyter_dirs["prefix"], env=refs)
    report = doctor_kernel("msnb-refs", check=1)
    seen = report["kernel"]["inside"]["env_of_spec"]
    # jupyter_client substitutes from the front end's environment: HOME is there, the others are not
    assert seen["LD_LIBRARY_PATH"] == "${LD_LIBRARY_PATH}:/opt/more/lib"
    assert seen["MSNB_TEST_DATA"] == f"{home}/data"
    assert seen["MSNB_TEST_MIX"] == f"{home}/a:$MSNB_NOT_SET/b"
    by_key = {f["message"].split("=", 1)[0].rsplit(" ", 1)[-1]: f for f in report["findings"] if f["rule"] == "kernel-env-unexpanded"}
    assert set(by_key) == set(refs)
    assert by_key["LD_LIBRARY_PATH"]["severity"] == "error" and "${LD_LIBRARY_PATH} stayed literal" in by_key["LD_LIBRARY_PATH"]["message"]
    assert by_key["MSNB_TEST_MIX"]["severity"] == "error" and "$MSNB_NOT_SET stayed literal" in by_key["MSNB_TEST_MIX"]["message"]
    assert by_key["MSNB_TEST_DATA"]["severity"] == "warning" and f"{home}/data" in by_key["MSNB_TEST_DATA"]["message"]
    assert all("--ascend-env" in f["fix"] for f in by_key.values())


def test_kernel_installed_with_ascend_env_has_it_inside(tmp_path, jupyter_dirs, run_msnb, doctor_kernel, home):
    script, latest = fake_cann(tmp_path)
    (home / ".bash_profile").write_text(f". {script}\n")  # the terminal user's login shell sources CANN
    run_msnb(
        "install-kernel", "--name", "msnb-npu", "--prefix", jupyter_dirs["prefix"], "--ascend-env", script, "--env", f"PYTHONPATH={REPO}", "--no-check", check=0
    )

    report = doctor_kernel("msnb-npu", check=0)
    inside = report["kernel"]["inside"]
    assert inside["ascend_env"]["ASCEND_HOME_PATH"] == str(latest)
    assert inside["ascend_env"]["ASCEND_TOOLKIT_HOME"] == str(latest)
    assert inside["ascend_env"]["LD_LIBRARY_PATH"][0] == f"{latest}/lib64"
    assert inside["env_of_spec"]["LD_LIBRARY_PATH"].split(":")[0] == f"{latest}/lib64"
    assert not {"kernel-ascend-env-missing", "kernel-ascend-env-stale", "kernel-env-unexpanded"} & rules(report)


def test_kernel_without_the_ascend_env_the_login_shell_has(tmp_path, jupyter_dirs, doctor_kernel, home):
    script, latest = fake_cann(tmp_path)
    (home / ".bash_profile").write_text(f". {script}\n")
    install("msnb-no-npu-env", jupyter_dirs["prefix"])
    report = doctor_kernel("msnb-no-npu-env", check=1)
    f = finding(report, "kernel-ascend-env-missing")
    assert f["severity"] == "error" and "ASCEND_HOME_PATH" in f["message"] and "login shell" in f["message"]
    assert f["fix"] == f"msnb install-kernel --name msnb-no-npu-env --ascend-env {script}"
    assert report["kernel"]["inside"]["ascend_env"] == {}


def test_ascend_home_that_no_longer_exists(tmp_path, jupyter_dirs, doctor_kernel):
    install("msnb-stale", jupyter_dirs["prefix"], env={"ASCEND_HOME_PATH": str(tmp_path / "Ascend" / "removed")})
    report = doctor_kernel("msnb-stale", check=1)
    assert str(tmp_path / "Ascend" / "removed") in finding(report, "kernel-ascend-env-stale")["message"]


def test_start_command_that_fails(jupyter_dirs, doctor_kernel):
    write_spec(jupyter_dirs["prefix"], "msnb-broken", [sys.executable, "-m", "msnb_no_such_launcher", "-f", "{connection_file}"])
    report = doctor_kernel("msnb-broken", check=1)
    f = finding(report, "kernel-start-failed")
    assert f["severity"] == "error" and "No module named msnb_no_such_launcher" in f["message"]
    assert "msnb_no_such_launcher" in f["fix"] and "argv" in f["fix"]
    assert report["kernel"]["starts"] is False and report["kernel"]["start_s"] > 0


def test_kernel_without_the_extension(jupyter_dirs, doctor_kernel):
    spec = kernel.build_spec(python=sys.executable, env={"PYTHONPATH": str(REPO)})
    spec["argv"] = [a for a in spec["argv"] if "extensions" not in a]
    write_spec(jupyter_dirs["prefix"], "msnb-noext", spec["argv"], env=spec["env"], metadata=spec["metadata"])
    report = doctor_kernel("msnb-noext", check=1)
    f = finding(report, "kernel-extension-missing")
    assert f["severity"] == "error" and "%load_ext msnb" in f["fix"]
    assert report["kernel"]["inside"]["magics_loaded"] is False and report["kernel"]["inside"]["msnb"]


def test_no_such_kernel_exits_2(run_msnb):
    proc = run_msnb("doctor", "--kernel", "msnb-never-installed", check=2)
    assert "msnb-never-installed" in proc.stderr and proc.stderr.count("\n") == 1


def test_text_report_names_rules_and_fixes(jupyter_dirs, run_msnb, home):
    kernel.install("msnb-gone-text", prefix=jupyter_dirs["prefix"], python="/nonexistent/bin/python3")
    out = run_msnb("doctor", "--kernel", "msnb-gone-text", env={"HOME": str(home)}, check=1).stdout
    assert "[kernel-python-missing]" in out and "fix: msnb install-kernel --name msnb-gone-text --force" in out
    assert "Starts      no (not attempted)" in out


def test_install_kernel_ends_with_the_readiness_check(jupyter_dirs, run_msnb, home):
    proc = run_msnb("install-kernel", "--name", "msnb-checked", "--env", f"PYTHONPATH={REPO}", env={"HOME": str(home)}, check=0)
    assert "Checking it the way an editor will start it" in proc.stdout
    assert "Starts      yes" in proc.stdout and "magics loaded" in proc.stdout
    quiet = run_msnb("install-kernel", "--name", "msnb-unchecked", "--no-check", env={"HOME": str(home)}, check=0)
    assert "Checking" not in quiet.stdout


def test_doctor_magic_checks_a_kernel(jupyter_dirs, home):
    kernel.install("msnb-gone-magic", prefix=jupyter_dirs["prefix"], python="/nonexistent/bin/python3")
    code = (
        "import json\n"
        "from IPython.core.interactiveshell import InteractiveShell\n"
        "ip = InteractiveShell.instance()\n"
        "ip.run_line_magic('load_ext', 'msnb')\n"
        "r = ip.run_line_magic('mfmon_doctor', '--kernel msnb-gone-magic --json')\n"
        "print(json.dumps(r))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert "kernel-python-missing" in rules(report) and report["kernel"]["name"] == "msnb-gone-magic"


def test_env_value_that_is_not_text(jupyter_dirs, doctor_kernel):
    write_spec(jupyter_dirs["prefix"], "msnb-numeric-env", [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"], env={"OMP_NUM_THREADS": 4})
    report = doctor_kernel("msnb-numeric-env", check=1)
    assert "OMP_NUM_THREADS" in finding(report, "kernel-env-invalid")["message"]


def test_login_shell_env_ignores_what_the_profile_prints(home):
    from msnb.environment import login_shell_env

    (home / ".bash_profile").write_text("echo 'Welcome to the cluster'\nprintf 'A=1\\0B=2\\0'\nexport MSNB_FROM_PROFILE='two\nlines'\n")
    env = login_shell_env(env={"HOME": str(home), "PATH": "/usr/bin:/bin"})
    assert env["MSNB_FROM_PROFILE"] == "two\nlines" and env["HOME"] == str(home)
    assert not any("Welcome" in key for key in env) and "A" not in env


def test_ascend_variables_keep_ascend_entries_only():
    from msnb.environment import ascend_variables

    env = {
        "ASCEND_HOME_PATH": "/usr/local/Ascend/ascend-toolkit/latest",
        "LD_LIBRARY_PATH": "/usr/lib:/usr/local/Ascend/driver/lib64::/opt/cann/lib",
        "PATH": "/usr/bin",
        "HOME": "/root",
    }
    assert ascend_variables(env) == {
        "ASCEND_HOME_PATH": "/usr/local/Ascend/ascend-toolkit/latest",
        "LD_LIBRARY_PATH": ["/usr/local/Ascend/driver/lib64", "/opt/cann/lib"],
    }


def test_npus_that_mindspore_in_the_kernel_cannot_use(tmp_path, jupyter_dirs, home):
    """A /dev with NPU nodes on this CPU machine: the kernel's real MindSpore says which CANN library it misses."""
    from msnb.kernel_check import check_kernel, front_end_env

    dev = tmp_path / "dev"
    dev.mkdir()
    for node in ("davinci0", "davinci1", "davinci_manager"):
        (dev / node).touch()
    install("msnb-npus", jupyter_dirs["prefix"])
    report = check_kernel("msnb-npus", env=front_end_env({"HOME": str(home)}), shell_env={}, dev_dir=str(dev))
    assert report.starts and report.inside["mindspore"] == md.version("mindspore")
    f = next(f for f in report.findings if f.rule == "kernel-ascend-unavailable")
    assert f.severity == "error" and "2 NPUs" in f.message and report.blocking
    if report.inside.get("ascend_load_errors"):  # the Ascend plugin is in the wheel but CANN is not on the library path
        assert report.inside["ascend_load_errors"][0] in f.message and "--ascend-env" in f.fix
    # the same kernel with the real /dev of this machine: no NPUs, no such finding
    if not any(Path("/dev").glob("davinci[0-9]*")):
        assert "kernel-ascend-unavailable" not in {x.rule for x in check_kernel("msnb-npus", env=front_end_env({"HOME": str(home)}), shell_env={}).findings}


def test_report_modules_point_down():
    """environment sits on the bottom layer (errors, status words, counted nouns); doctor and kernel_check use no smoke/config/plot."""
    import ast

    def imported(module):
        tree = ast.parse((REPO / "msnb" / f"{module}.py").read_text())
        found = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level:
                found.add((node.module or "").split(".")[0])
            elif isinstance(node, ast.Import):
                found.update(a.name for a in node.names if a.name.startswith("msnb"))
        return found

    assert imported("environment") <= {"errors", "status", "words"}  # the bottom layer only (import-linter checks the rest)
    for module in ("doctor", "kernel_check"):
        assert not imported(module) & {"smoke", "config", "plot", "monitor", "analysis", "cli", "magics"}, module


def test_kernel_that_crashes_importing_mindspore(tmp_path, jupyter_dirs, doctor_kernel):
    """A MindSpore whose import kills the process (as a mismatched CANN can): reported at once, not after the timeout."""
    fake = tmp_path / "crashing" / "mindspore"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("import os, sys\nsys.stderr.write('msnb-test: native library crashed\\n')\nsys.stderr.flush()\nos._exit(7)\n")
    kernel.install("msnb-crash", prefix=jupyter_dirs["prefix"], env={"PYTHONPATH": f"{fake.parent}:{REPO}"})
    report = doctor_kernel("msnb-crash", check=1)
    f = finding(report, "kernel-mindspore-import-failed")
    # its last words travel over iopub and may be lost with the process, so only the death itself is certain
    assert "died (exit status 7) while importing MindSpore" in f["message"]
    inside = report["kernel"]["inside"]
    assert report["kernel"]["starts"] is True and inside["magics_loaded"] is True and "mindspore" not in inside


def test_bare_python_in_argv_runs_the_front_ends_python(jupyter_dirs, doctor_kernel):
    write_spec(jupyter_dirs["prefix"], "msnb-bare", ["python", "-m", "ipykernel_launcher", "-f", "{connection_file}"], env={"PYTHONPATH": str(REPO)})
    report = doctor_kernel("msnb-bare", check=0)  # another tool's kernel without msnb's magics: a warning, not a block
    assert finding(report, "kernel-python-relative")["severity"] == "info"
    ext = finding(report, "kernel-extension-missing")
    assert ext["severity"] == "warning" and "--force" not in ext["fix"] and "%load_ext msnb" in ext["fix"]
    assert report["kernel"]["starts"] is True
    assert os.path.realpath(report["kernel"]["inside"]["executable"]) == os.path.realpath(sys.executable)


def test_install_kernel_exits_1_when_the_new_kernel_is_not_ready(jupyter_dirs, run_msnb, home):
    proc = run_msnb(
        "install-kernel",
        "--name",
        "msnb-not-ready",
        "--env",
        "LD_LIBRARY_PATH=${LD_LIBRARY_PATH}:/opt/x",
        "--env",
        f"PYTHONPATH={REPO}",
        env={"HOME": str(home)},
        check=1,
    )
    assert "[kernel-env-unexpanded]" in proc.stdout and "is installed, but the kernel is not ready" in proc.stdout
    assert (jupyter_dirs["data"] / "kernels" / "msnb-not-ready" / "kernel.json").is_file()


def test_kernel_python_without_mindspore_is_a_warning(tmp_path, jupyter_dirs, doctor_kernel):
    """A Python where MindSpore cannot be found (a shadow package on PYTHONPATH says so): the notebook can still read and plot."""
    shadow = tmp_path / "shadow" / "mindspore"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text('raise ModuleNotFoundError("No module named \'mindspore\'", name="mindspore")\n')
    install("msnb-no-ms", jupyter_dirs["prefix"], env={"PYTHONPATH": f"{shadow.parent}:{REPO}"})
    report = doctor_kernel("msnb-no-ms", check=0)
    f = finding(report, "kernel-mindspore-missing")
    assert f["severity"] == "warning" and "pip install mindspore" in f["fix"]
    assert report["kernel"]["inside"]["magics_loaded"] is True and report["kernel"]["inside"]["mindspore"] is None


def test_install_where_jupyter_does_not_look(tmp_path, run_msnb, home):
    hidden = tmp_path / "not-on-any-path"
    proc = run_msnb("install-kernel", "--name", "msnb-hidden", "--prefix", hidden, "--env", f"PYTHONPATH={REPO}", env={"HOME": str(home)}, check=0)
    assert "[kernel-location]" in proc.stdout and "not on Jupyter's search path" in proc.stdout
    assert "Starts      yes" in proc.stdout  # the check still starts it from where it was written


def test_a_prefix_the_user_asked_for_is_said_not_warned(jupyter_dirs, run_msnb, home):
    """``install-kernel --sys-prefix`` (the README's test command) or ``--prefix``: living only there is what was asked."""
    from msnb.kernel_check import spec_location_finding

    proc = run_msnb(
        "install-kernel",
        "--name",
        "msnb-asked",
        "--prefix",
        jupyter_dirs["prefix"],
        "--env",
        f"PYTHONPATH={REPO}",
        "--no-check",
        env={"HOME": str(home)},
        check=0,
    )
    assert "WARNING" not in proc.stdout and "as asked" in proc.stdout, proc.stdout
    spec_dir = str(jupyter_dirs["prefix"] / "share" / "jupyter" / "kernels" / "msnb-asked")
    asked, found_later = spec_location_finding("msnb-asked", spec_dir, prefix_chosen=True), spec_location_finding("msnb-asked", spec_dir)
    assert (asked.rule, asked.severity, found_later.rule, found_later.severity) == ("kernel-location", "info", "kernel-location", "warning")
    assert "--user" in asked.fix and "--user" in found_later.fix  # the doctor, later, still warns: there the finding helps
