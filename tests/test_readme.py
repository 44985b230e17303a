"""The README's instructions are the ones CI runs, and every command it shows exists."""

import re
import shlex

import pytest

from msnb.cli import build_parser
from msnb.magics import magic_names

from .conftest import REPO

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


def test_main_job_runs_and_passes(run_msnb):
    args = shlex.split(setup_block("main"))
    assert args[0] == "msnb"
    run_msnb(*args[1:], check=0)


def readme_msnb_commands():
    for block in re.findall(r"```bash\n(.*?)```", README, re.S):
        for line in block.splitlines():
            line = line.split("  #")[0].strip()
            if line.startswith("msnb "):
                yield from (part.strip() for part in line.split("&&") if part.strip().startswith("msnb "))


@pytest.mark.parametrize("command", sorted(set(readme_msnb_commands())))
def test_every_msnb_command_in_the_readme_parses(command):
    build_parser().parse_args(shlex.split(command)[1:])


def test_every_magic_in_the_readme_exists_and_every_magic_is_in_the_readme():
    shown = set(re.findall(r"`(%%?mfmon_\w+)", README))
    assert shown == set(magic_names())
