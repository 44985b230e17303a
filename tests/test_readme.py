"""The README's instructions are the ones CI runs, and every command it shows exists."""

import argparse
import re
import shlex

import pytest

from msnb.cli import build_parser
from msnb.magics import magic_names
from tests.conftest import REPO

README = (REPO / "README.md").read_text()


def setup_block(kind: str) -> str:
    match = re.search(rf"<!-- setup: {kind} -->\s*```bash\n(.*?)```", README, re.S)
    assert match, f"README lacks the '{kind}' set-up block"
    lines = [line for line in match.group(1).splitlines() if line.strip()]
    assert len(lines) == 1, f"the '{kind}' set-up step must be one command"
    return lines[0].strip()


def test_ci_runs_exactly_the_readme_install_and_test_commands():
    ci_lines = [line.strip() for line in (REPO / ".ci" / "run").read_text().splitlines()]
    assert setup_block("install") in ci_lines
    assert setup_block("test") in ci_lines
    assert ci_lines.index(setup_block("install")) < ci_lines.index(setup_block("test"))


def test_main_job_runs_and_passes(run_msnb, tmp_path):
    args = shlex.split(setup_block("main"))
    assert args[0] == "msnb"
    proc = run_msnb(*args[1:], check=0, cwd=tmp_path)
    assert "PASSED" in proc.stdout
    assert (tmp_path / "msnb_smoke.png").read_bytes()[:4] == b"\x89PNG"
    # the verdict's text (tests/test_display_texts.py ran a smoke of its own for these): its last line says where the figure went
    out = proc.stdout
    assert out.strip().splitlines()[-1] == f"  figure: wrote {tmp_path / 'msnb_smoke.png'} (in the current directory; --out FILE to write elsewhere)"
    assert "removed" not in out and "(s)" not in out


DOCS = sorted((REPO / "docs").glob("*.md"))


def opening_commands() -> list[str]:
    """The README's first shell block, before "Set up": the commands a newcomer runs first, comments dropped."""
    block = re.search(r"```bash\n(.*?)```", README.split("\n## Set up")[0], re.S)
    assert block, "the README opens without a shell block"
    return [re.split(r"\s+#", line)[0].strip() for line in block.group(1).splitlines() if line.strip()]


def test_the_opening_commands_run_as_printed_in_a_fresh_folder(run_msnb, tmp_path, jupyter_dirs):
    """Each exited 2 for a newcomer: the config ships inside mindformers' install, and the paths read were a real job's."""
    import importlib.util

    if importlib.util.find_spec("mindformers") is None:
        pytest.skip("mindformers is not installed (the README's install brings it)")
    commands = opening_commands()
    assert [shlex.split(c)[:2] for c in commands] == [["msnb", "smoke"], ["msnb", "check"], ["msnb", "plot"], ["msnb", "report"], ["msnb", "install-kernel"]]
    home = tmp_path / "home"
    home.mkdir()
    folder = tmp_path / "fresh"  # nothing in it: no configs/, no output/
    folder.mkdir()
    done = {}
    for command in commands:
        args = shlex.split(command)[1:]
        done[args[0]] = run_msnb(*args, check=0, cwd=folder, env={"HOME": str(home)}, timeout=900)
    kept = folder / shlex.split(commands[0])[shlex.split(commands[0]).index("--keep") + 1]
    smoke = done["smoke"]
    assert "using the one mindformers" in smoke.stderr and "site-packages" in smoke.stderr  # said where the config came from
    assert f"files kept in {kept} (msnb check, plot and report read the folder whole):" in smoke.stdout
    assert "output/log/rank_0/info.log" in smoke.stdout and (kept / "output" / "log" / "rank_0" / "info.log").is_file()
    check = done["check"].stdout  # one job, one run: info.log read, train.log's copy of its lines said once
    assert "run smoke (ranks 0): passed" in check and "PASSED: 1 run" in check, check
    assert "judged from output/log/rank_0/info.log: loss, global_norm" in check and "read once, from output/log/rank_0/info.log" in check, check
    assert (folder / "curves.png").read_bytes()[:4] == b"\x89PNG" and "run smoke: ranks 0" in done["plot"].stdout and "run log" not in done["plot"].stdout
    assert (folder / "report.html").stat().st_size > 10_000 and done["report"].stdout.rstrip().endswith("1 run: smoke; the runs' verdict: PASSED")
    from msnb.dashboard.model import BoardData

    board = BoardData([kept])  # the board shows the one run too
    assert board.poll(final=True) == ["."] and board.runs["."].verdict.judged_from.startswith("output/log/rank_0/info.log")
    # the user's folder (the test's own); after the README's test command a --sys-prefix kernel shadows it, which it says
    assert (jupyter_dirs["data"] / "kernels" / "mindspore" / "kernel.json").is_file()


def test_the_readme_stays_short_and_says_things_once():
    lines = README.splitlines()
    assert len(lines) <= 450, f"README.md has {len(lines)} lines: move reference material to docs/"
    sentences = [s.strip() for s in re.split(r"(?<=[.:;])\s", " ".join(lines)) if len(s.strip()) > 60]
    repeated = {s for s in sentences if sentences.count(s) > 1}
    assert not repeated, repeated


def readme_msnb_commands():
    for block in re.findall(r"```bash\n(.*?)```", README + "".join(d.read_text() for d in DOCS), re.S):
        for line in block.splitlines():
            line = re.split(r"\s+#|\s[>|]\s", line)[0].strip()  # drop comments, redirections, pipes
            if line.startswith("msnb "):
                yield from (part.strip() for part in line.split("&&") if part.strip().startswith("msnb "))


@pytest.mark.parametrize("command", sorted(set(readme_msnb_commands())))
def test_every_msnb_command_in_the_readme_parses(command):
    build_parser().parse_args(shlex.split(command)[1:])


def test_every_magic_in_the_readme_exists_and_every_magic_is_in_the_readme():
    shown = set(re.findall(r"`(%%?mfmon_\w+)", README))
    assert shown == set(magic_names())


def test_readme_python_reading_example_runs(ms_files):
    (block,) = [b for b in re.findall(r"```python\n(.*?)```", README, re.S) if "msnb.read(" in b and "%%" not in b]
    code = block.replace('"output/summary"', repr(str(ms_files / "ranks")))
    namespace: dict = {}
    exec(compile(code, "README.md", "exec"), namespace)
    assert len(namespace["steps"]) == 50 and namespace["result"].problems == []


def test_benchmark_command_runs_at_toy_size(tmp_path):
    """The README's benchmark, tiny and without the tools that need their own environments."""
    import subprocess
    import sys

    proc = subprocess.run(
        [
            sys.executable,
            str(REPO / "benchmarks" / "bench_read.py"),
            "--steps",
            "300",
            "--hist-steps",
            "4",
            "--data",
            str(tmp_path / "data"),
            "--skip",
            "mindinsight",
            "event_accumulator",
            "tbparse",
            "--damaged-gb",  # the memory-under-damage rows at toy size too (by default 1 GB of zeros and a 300 MB log)
            "0.01",
            "--log-mb",
            "1",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = proc.stdout
    assert "MindSpore summary, scalars" in out and "TensorBoard events" in out
    msnb_rows = [line.split() for line in out.splitlines() if re.match(r"^\s+msnb\s+[\d,]+\s", line)]
    assert [row[1] for row in msnb_rows] == ["1,200", "1,200", "36"]  # 300 steps x 4 tags; 4 x (8 histograms + 1 loss)
    assert "msnb time / floor time" in out
    memory = {label: rest.split() for label, rest in re.findall(r"^  (summary \+ 0\.01 GB of zeros|training log, 1 MB)\s+(.*)$", out, re.M)}
    assert memory["summary + 0.01 GB of zeros"][1] == "1,200" and memory["summary + 0.01 GB of zeros"][2] != "0"  # every point kept, the zeros reported
    assert memory["training log, 1 MB"][1:3] == ["30,000", "0"]  # points and problems, after the file size


def test_readme_monitor_config_block_loads_without_findings(tmp_path):
    (block,) = [b for b in re.findall(r"```yaml\n(.*?)```", README, re.S) if "monitor_config:" in b]
    path = tmp_path / "monitor.yaml"
    path.write_text(block)
    from msnb.config import check_config, load_config, monitor_settings

    report = check_config(path)
    assert report.findings == []
    settings = monitor_settings(load_config(path))
    assert settings.per_print_times == settings.collect_freq == 50
    assert settings.early_stop.window == 20
    import re as _re

    assert _re.match(settings.histogram_settings["regular"], "layers.0.attention.weight")


def test_plot_benchmark_runs_at_toy_size(tmp_path):
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "bench_plot.py"), "--points", "20000", "--out-dir", str(tmp_path), "--ranks", "40", "--rank-steps", "300"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = [line.split() for line in proc.stdout.splitlines() if line.strip().startswith(("msnb ", "matplotlib"))]
    assert [r[0] for r in rows[:3]] == ["msnb", "matplotlib", "matplotlib+pandas"]
    assert all(r[-1] == "True" for r in rows[:3])  # spikes kept by every variant
    bands = next(line.split() for line in proc.stdout.splitlines() if line.strip().startswith("msnb-bands"))
    assert bands[-2:] == ["True", "False"]  # the departing rank has a line of its own, the noisy healthy one does not


def github_anchor(heading: str) -> str:
    """The fragment GitHub gives a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def headings(text: str) -> set:
    """The anchors of a Markdown page's headings (lines in code blocks are no headings)."""
    prose = re.sub(r"```.*?```", "", text, flags=re.S)
    return {github_anchor(h) for h in re.findall(r"^#{1,6} (.+)$", prose, re.M)}


@pytest.mark.parametrize("page", [REPO / "README.md", *DOCS], ids=lambda p: p.name)
def test_every_link_reaches_its_heading_or_file(page):
    """The README's links, and the docs pages' (the README's reference material moved there), to headings and files."""
    text = page.read_text()
    for link in re.findall(r"\]\(([^)\s]+)\)", text):
        if link.startswith(("http://", "https://")):
            continue
        target, _, anchor = link.partition("#")
        path = (page.parent / target).resolve() if target else page
        assert path.exists(), f"{page.name}: {link}"
        if anchor and path.suffix == ".md":
            assert anchor in headings(path.read_text()), f"{page.name}: {link}"


def test_every_option_the_docs_use_is_in_its_subcommands_help():
    """Each ``--option`` a README or docs command (a bash block, or inline code such as `msnb runs --tag lm-loss`)
    gives a subcommand is in that subcommand's ``--help``: a reader who checks the help finds what the docs told them."""
    subcommands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)).choices
    text = README + "".join(d.read_text() for d in DOCS)
    commands = list(readme_msnb_commands()) + re.findall(r"`(msnb [^`\n]+)`", text)
    missing = set()
    for command in commands:
        words = command.split()
        if len(words) < 2 or words[1] not in subcommands:
            continue
        helped = subcommands[words[1]].format_help()
        unquoted = re.sub(r"\"[^\"]*\"|'[^']*'", "", command)  # --launch "msrun ... --config x.yaml": another program's options
        missing |= {f"msnb {words[1]} {o}" for o in re.findall(r"(?<!\S)(--[a-z][\w-]*)", unquoted) if o not in helped}
    assert len(commands) > 50 and not missing, sorted(missing)
