"""The kernel installer under bad input: every refusal is a KernelSpecError (one line, exit 2) and
nothing outside the kernelspec msnb made is ever removed: no `kernels/..`, no symlink target, no
package's own files (ipykernel ships a python3 kernel inside its package, which jupyter_client's
lookup falls back to).  Installs go to temporary prefixes only (see conftest's jupyter_dirs)."""

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap
import time
from pathlib import Path

import pytest

from msnb import kernel
from msnb.kernel import KernelSpecError
from tests.conftest import REPO


def spec_dir(prefix: Path, name: str = "mindspore") -> Path:
    return prefix / "share" / "jupyter" / "kernels" / name


def one_line_error(proc, *fragments):
    assert proc.stdout == "", proc.stdout
    assert proc.stderr.count("\n") == 1 and "error: " in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    for fragment in fragments:
        assert fragment in proc.stderr, proc.stderr


def snapshot(root: Path) -> dict:
    return {str(p.relative_to(root)): p.read_bytes() if p.is_file() and not p.is_symlink() else None for p in sorted(root.rglob("*"))}


# ------------------------------------------------------------------ names


@pytest.mark.parametrize("bad", [".", ".."])
def test_dot_names_fail_validation_for_install_and_uninstall(bad, jupyter_dirs, run_msnb, tmp_path):
    prefix = jupyter_dirs["prefix"]
    kernel.install("keep-me", prefix=prefix)  # a kernels folder with something in it: `kernels/..` must survive
    before = snapshot(tmp_path)
    with pytest.raises(KernelSpecError, match="names a folder's own entry"):
        kernel.validate_name(bad)
    one_line_error(run_msnb("install-kernel", "--name", bad, "--prefix", prefix, check=2), "invalid kernel name")
    one_line_error(run_msnb("uninstall-kernel", "--name", bad, "--prefix", prefix, "--force", check=2), "invalid kernel name")
    assert snapshot(tmp_path) == before


def test_a_300_character_name_is_one_line(jupyter_dirs, run_msnb):
    proc = run_msnb("install-kernel", "--name", "a" * 300, "--prefix", jupyter_dirs["prefix"], check=2)
    one_line_error(proc, "300 characters", f"at most {kernel.MAX_NAME_LENGTH}")
    assert not (jupyter_dirs["prefix"] / "share").exists()
    one_line_error(run_msnb("uninstall-kernel", "--name", "a" * 300, check=2), "300 characters")


def test_the_longest_allowed_name_installs_and_uninstalls(jupyter_dirs):
    name = "m" * kernel.MAX_NAME_LENGTH
    path = kernel.install(name, prefix=jupyter_dirs["prefix"])
    assert kernel.uninstall(name, prefix=jupyter_dirs["prefix"]) == path and not path.exists()


@pytest.mark.parametrize("bad", [None, 5, "Mindspore", "a/b", ""])
def test_non_names_are_refused(bad):
    with pytest.raises(KernelSpecError, match="invalid kernel name"):
        kernel.validate_name(bad)


# ------------------------------------------------------------------ where it goes


def test_prefix_under_a_file_is_one_line(tmp_path, run_msnb):
    blocker = tmp_path / "a-file"
    blocker.write_text("keep")
    proc = run_msnb("install-kernel", "--prefix", blocker / "env", check=2)
    one_line_error(proc, "cannot install the kernelspec", "Not a directory")
    assert blocker.read_text() == "keep"


@pytest.mark.parametrize("prefix", ["/proc", "/proc/self/msnb-test"])
def test_prefix_in_proc_is_one_line(prefix, run_msnb):
    one_line_error(run_msnb("install-kernel", "--prefix", prefix, check=2), "cannot install the kernelspec")


def test_a_symlinked_kernelspec_folder_is_never_written_through(jupyter_dirs, tmp_path):
    target = tmp_path / "elsewhere"
    target.mkdir()
    (target / "kernel.json").write_text(json.dumps({"argv": ["x"], "display_name": "Other", "language": "python"}))
    link = spec_dir(jupyter_dirs["prefix"])
    link.parent.mkdir(parents=True)
    link.symlink_to(target)
    with pytest.raises(KernelSpecError, match="symbolic link"):
        kernel.install(prefix=jupyter_dirs["prefix"], force=True)
    assert json.loads((target / "kernel.json").read_text())["display_name"] == "Other"


# ------------------------------------------------------------------ uninstall


def test_uninstall_with_prefix_removes_what_install_with_prefix_made(jupyter_dirs, run_msnb, tmp_path):
    other = tmp_path / "other-env"  # not on JUPYTER_PATH: only --prefix finds it
    run_msnb("install-kernel", "--prefix", other, "--no-check", check=0)  # the readiness check: test_doctor_kernel.py
    one_line_error(run_msnb("uninstall-kernel", "--user", check=2), "no kernelspec named 'mindspore'")
    assert spec_dir(other).exists()
    proc = run_msnb("uninstall-kernel", "--prefix", other, check=0)
    assert str(spec_dir(other)) in proc.stdout and not spec_dir(other).exists()


def test_uninstall_user_removes_only_the_user_one(jupyter_dirs, run_msnb):
    kernel.install(prefix=jupyter_dirs["prefix"])
    user_dir = kernel.install()  # the --user default: JUPYTER_DATA_DIR
    run_msnb("uninstall-kernel", "--user", check=0)
    assert not user_dir.exists() and spec_dir(jupyter_dirs["prefix"]).exists()


def test_sys_prefix_and_choices(jupyter_dirs):
    assert kernel.search_dirs(sys_prefix=True) == [Path(sys.prefix) / "share" / "jupyter" / "kernels"]
    with pytest.raises(KernelSpecError, match="choose one"):
        kernel.search_dirs(user=True, prefix="/tmp/x")


@pytest.mark.parametrize(
    "content",
    [b"{not json", b"[1, 2, 3]", b"\xff\xfe\x00garbage", b"", b'{"metadata": ["msnb"]}'],
    ids=["syntax", "a-list", "binary", "empty", "metadata-a-list"],
)
def test_an_invalid_kernel_json_on_uninstall_is_one_line_and_kept(content, jupyter_dirs, run_msnb):
    folder = spec_dir(jupyter_dirs["prefix"], "broken")
    folder.mkdir(parents=True)
    (folder / "kernel.json").write_bytes(content)
    proc = run_msnb("uninstall-kernel", "--name", "broken", "--prefix", jupyter_dirs["prefix"], check=2)
    one_line_error(proc, str(folder))
    assert (folder / "kernel.json").read_bytes() == content
    run_msnb("uninstall-kernel", "--name", "broken", "--prefix", jupyter_dirs["prefix"], "--force", check=0)
    assert not folder.exists()


def test_a_fifo_kernel_json_does_not_hang(jupyter_dirs, run_msnb):
    folder = spec_dir(jupyter_dirs["prefix"], "fifo")
    folder.mkdir(parents=True)
    os.mkfifo(folder / "kernel.json")
    one_line_error(run_msnb("uninstall-kernel", "--name", "fifo", "--prefix", jupyter_dirs["prefix"], check=2, timeout=60), "not a regular file")
    one_line_error(run_msnb("install-kernel", "--name", "fifo", "--prefix", jupyter_dirs["prefix"], check=2, timeout=60), "not a regular file")


def test_a_folder_without_kernel_json_is_not_removed_even_with_force(jupyter_dirs, run_msnb):
    folder = spec_dir(jupyter_dirs["prefix"], "notaspec")
    folder.mkdir(parents=True)
    (folder / "data.txt").write_text("keep")
    one_line_error(run_msnb("uninstall-kernel", "--name", "notaspec", "--prefix", jupyter_dirs["prefix"], "--force", check=2), "no kernel.json")
    assert (folder / "data.txt").read_text() == "keep"


def test_a_symlinked_kernelspec_is_never_followed(jupyter_dirs, run_msnb, tmp_path):
    target = tmp_path / "precious"
    kernel.install("real", prefix=target)  # a kernelspec msnb made, elsewhere
    real = spec_dir(target, "real")
    link = spec_dir(jupyter_dirs["prefix"], "linked")
    link.parent.mkdir(parents=True)
    link.symlink_to(real)
    before = snapshot(target)
    one_line_error(run_msnb("uninstall-kernel", "--name", "linked", "--force", check=2), "symbolic link")
    assert link.is_symlink() and snapshot(target) == before


def test_links_inside_a_kernelspec_are_removed_as_links(jupyter_dirs, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious.txt").write_text("keep")
    path = kernel.install(prefix=jupyter_dirs["prefix"])
    (path / "resources").symlink_to(outside)
    kernel.uninstall(prefix=jupyter_dirs["prefix"])
    assert not path.exists() and (outside / "precious.txt").read_text() == "keep"


def test_a_kernelspec_inside_a_package_is_never_removed(tmp_path, monkeypatch):
    package = tmp_path / "site" / "somepkg"
    folder = package / "share" / "jupyter" / "kernels" / "python3"
    folder.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (folder / "kernel.json").write_text(json.dumps({"argv": ["python"], "display_name": "Python 3", "language": "python"}))
    monkeypatch.setenv("JUPYTER_PATH", str(package / "share" / "jupyter"))
    with pytest.raises(KernelSpecError, match="inside the Python package"):
        kernel.uninstall("python3", force=True, prefix=package)
    assert (folder / "kernel.json").exists()


# ------------------------------------------------------------------ python3 --force: never ipykernel's package folder


@pytest.fixture
def throwaway_env(tmp_path):
    """A venv of its own (so sys.prefix holds no kernelspecs) that sees the shared packages through a .pth
    file, with a *copy* of ipykernel first on its path: jupyter_client's python3 fall-through points at the copy."""
    for system in ("/usr/local/share/jupyter/kernels/python3", "/usr/share/jupyter/kernels/python3"):
        if os.path.lexists(system):
            pytest.skip(f"{system} exists: a --force test could reach it")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    site = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], capture_output=True, text=True, check=True
        ).stdout.strip()
    )
    (site / "shared.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    import ipykernel

    copy = site / "ipykernel"
    shutil.copytree(Path(ipykernel.__file__).parent, copy, ignore=shutil.ignore_patterns("__pycache__"))
    env = dict(os.environ, PYTHONPATH=str(REPO), IPYTHONDIR=str(tmp_path / "ipython"), PYTHONDONTWRITEBYTECODE="1")
    return {"python": python, "venv": venv, "ipykernel": copy, "env": env}


def run_in(env: dict, *args, check=None):
    proc = subprocess.run([str(env["python"]), *args], capture_output=True, text=True, env=env["env"], timeout=300)
    if check is not None:
        assert proc.returncode == check, proc.stderr
    return proc


def test_python3_force_never_falls_through_to_ipykernels_package(throwaway_env):
    resources = throwaway_env["ipykernel"] / "resources"
    before = snapshot(throwaway_env["ipykernel"])
    # the hazard is real in this layout: jupyter_client resolves python3 to the package folder
    lookup = "from jupyter_client.kernelspec import KernelSpecManager as K; print(K().get_kernel_spec('python3').resource_dir)"
    assert run_in(throwaway_env, "-c", lookup, check=0).stdout.strip() == str(resources)

    proc = run_in(throwaway_env, "-m", "msnb.cli", "uninstall-kernel", "--name", "python3", "--force", check=2)
    one_line_error(proc, "no kernelspec named 'python3'")
    assert snapshot(throwaway_env["ipykernel"]) == before and any(resources.iterdir())


def test_python3_force_removes_an_installed_python3_kernelspec_only(throwaway_env):
    installed = throwaway_env["venv"] / "share" / "jupyter" / "kernels" / "python3"
    shutil.copytree(throwaway_env["ipykernel"] / "resources", installed)  # what `pip install ipykernel` puts in a prefix:
    spec = {"argv": ["python", "-m", "ipykernel_launcher", "-f", "{connection_file}"], "display_name": "Python 3 (ipykernel)", "language": "python"}
    (installed / "kernel.json").write_text(json.dumps(spec))  # its logos and a kernel.json
    before = snapshot(throwaway_env["ipykernel"])
    proc = run_in(throwaway_env, "-m", "msnb.cli", "uninstall-kernel", "--name", "python3", check=2)
    one_line_error(proc, "not made by msnb")
    assert installed.exists()
    run_in(throwaway_env, "-m", "msnb.cli", "uninstall-kernel", "--name", "python3", "--force", check=0)
    assert not installed.exists()
    assert snapshot(throwaway_env["ipykernel"]) == before
    one_line_error(run_in(throwaway_env, "-m", "msnb.cli", "uninstall-kernel", "--name", "python3", "--force", check=2), "no kernelspec")
    assert snapshot(throwaway_env["ipykernel"]) == before


# ------------------------------------------------------------------ --ascend-env


def script(tmp_path: Path, text: str, name: str = "set_env.sh") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def processes_with(marker: str, settle: float = 10.0) -> list[int]:
    """Live processes whose command line holds *marker*, after giving a killed one up to *settle* s to go."""
    deadline = time.monotonic() + settle
    while True:
        found = _processes_with(marker)
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.1)


def _processes_with(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                pass
    return found


def test_a_script_ending_in_exit_0_is_recorded(tmp_path, jupyter_dirs, run_msnb):
    path = script(tmp_path, "export ASCEND_HOME_PATH=/opt/ascend\nexport LD_LIBRARY_PATH=/opt/ascend/lib64:$LD_LIBRARY_PATH\nexit 0\nexport NEVER=1\n")
    recorded = kernel.read_env_script(path)
    assert recorded["ASCEND_HOME_PATH"] == "/opt/ascend" and recorded["LD_LIBRARY_PATH"].startswith("/opt/ascend/lib64:")
    assert "NEVER" not in recorded
    proc = run_msnb("install-kernel", "--prefix", jupyter_dirs["prefix"], "--ascend-env", path, "--no-check", check=0)
    assert "ASCEND_HOME_PATH" in proc.stdout
    assert json.loads((spec_dir(jupyter_dirs["prefix"]) / "kernel.json").read_text())["env"]["ASCEND_HOME_PATH"] == "/opt/ascend"


def test_a_script_exiting_nonzero_fails_clearly(tmp_path):
    with pytest.raises(KernelSpecError, match="exit code 4"):
        kernel.read_env_script(script(tmp_path, "export ASCEND_HOME_PATH=/opt/ascend\necho 'driver missing' >&2\nexit 4\n"))


def test_a_background_process_does_not_make_it_wait(tmp_path):
    marker = f"msnb-bg-{os.getpid()}-{tmp_path.name}"
    path = script(tmp_path, f"export ASCEND_HOME_PATH=/opt/ascend\nbash -c 'sleep 300; : {marker}' &\necho started\n")
    # it used to wait for every holder of stdout to close: here that would be the timeout
    recorded = kernel.read_env_script(path, timeout=30)
    assert recorded["ASCEND_HOME_PATH"] == "/opt/ascend"
    assert processes_with(marker) == []  # the leftover ended with the shell


def test_a_hanging_script_times_out_and_leaves_nothing(tmp_path):
    marker = f"msnb-hang-{os.getpid()}-{tmp_path.name}"
    path = script(tmp_path, f"export ASCEND_HOME_PATH=/opt/ascend\nbash -c 'sleep 300; : {marker}'\n")
    with pytest.raises(KernelSpecError, match="did not finish within 2 s"):
        kernel.read_env_script(path, timeout=2)
    assert processes_with(marker) == []


def test_a_script_setting_nothing_is_not_installed(tmp_path, jupyter_dirs, run_msnb):
    path = script(tmp_path, "echo 'nothing to see'\nLOCAL_ONLY=1\n")
    proc = run_msnb("install-kernel", "--prefix", jupyter_dirs["prefix"], "--ascend-env", path, check=2)
    one_line_error(proc, "set no environment variable")
    assert not spec_dir(jupyter_dirs["prefix"]).exists()


def test_a_script_this_shell_already_sourced_is_still_recorded(tmp_path, monkeypatch):
    path = script(tmp_path, 'export ASCEND_HOME_PATH=/opt/ascend\nexport LD_LIBRARY_PATH="/opt/ascend/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"\n')
    monkeypatch.setenv("ASCEND_HOME_PATH", "/opt/ascend")  # as after `source set_env.sh` in ~/.bashrc
    monkeypatch.setenv("LD_LIBRARY_PATH", "/opt/ascend/lib64")
    recorded = kernel.read_env_script(path)
    assert recorded["ASCEND_HOME_PATH"] == "/opt/ascend"
    assert recorded["LD_LIBRARY_PATH"].split(":")[0] == "/opt/ascend/lib64"


def test_a_script_that_execs_away_fails_clearly(tmp_path):
    with pytest.raises(KernelSpecError, match="never returned to the shell"):
        kernel.read_env_script(script(tmp_path, "export ASCEND_HOME_PATH=/opt/ascend\nexec true\n"))


def test_a_script_reading_stdin_does_not_hang(tmp_path):
    recorded = kernel.read_env_script(script(tmp_path, "read answer\nexport ASCEND_HOME_PATH=/opt/ascend\n"), timeout=30)
    assert recorded == {"ASCEND_HOME_PATH": "/opt/ascend"}


def test_a_prefix_with_a_nul_byte_is_a_kernelspec_error():
    with pytest.raises(KernelSpecError, match="not a usable folder"):
        kernel.install(prefix="/tmp/a\0b")
    with pytest.raises(KernelSpecError, match="not a usable folder"):
        kernel.uninstall(prefix="/tmp/a\0b")


def test_a_script_with_its_own_exit_trap_is_recorded(tmp_path):
    recorded = kernel.read_env_script(script(tmp_path, "trap 'echo bye' EXIT\nexport ASCEND_HOME_PATH=/opt/ascend\n"))
    assert recorded == {"ASCEND_HOME_PATH": "/opt/ascend"}


def test_a_chatty_script_keeps_only_its_tail(tmp_path):
    path = script(tmp_path, "head -c 50000000 /dev/zero | tr '\\\\0' x\necho\necho 'the last words' >&2\nexit 7\n")
    with pytest.raises(KernelSpecError) as err:
        kernel.read_env_script(path, timeout=60)
    assert "exit code 7" in str(err.value) and "the last words" in str(err.value) and len(str(err.value)) < 10_000
