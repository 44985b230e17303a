"""Where a smoke's config is found (mindformers' shipped configs/) and where its files are kept (--keep DIR), before any training."""

import importlib.util
import io
from pathlib import Path

import pytest

from msnb.cli import build_parser
from msnb.config.shipped import resolve_shipped, shipped_configs_dir, with_shipped_config
from msnb.errors import SmokeError
from msnb.smoke.run.kept import check_keep, kept_outputs, scratch_directory
from msnb.smoke.run.options import SmokeOptions

NAME = "configs/qwen3/pretrain_qwen3_32b_4k.yaml"  # as the README and mindformers' docs name it
needs_mindformers = pytest.mark.skipif(importlib.util.find_spec("mindformers") is None, reason="mindformers is not installed")


@needs_mindformers
def test_a_configs_name_not_here_is_the_installed_mindformers_copy_and_said(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    root = shipped_configs_dir()
    # an independent oracle: the wheel puts configs/ beside the package in site-packages
    assert root == Path(importlib.util.find_spec("mindformers").origin).parent.parent / "configs"
    stream = io.StringIO()
    options = with_shipped_config(SmokeOptions(config=NAME, steps=3), stream=stream)
    assert options.config == str(root / "qwen3" / "pretrain_qwen3_32b_4k.yaml") and options.steps == 3
    assert stream.getvalue().startswith(f"msnb smoke: {NAME} is not in {tmp_path}: using the one mindformers ") and options.config in stream.getvalue()


@needs_mindformers
def test_a_file_here_wins_and_other_paths_are_left_alone(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "configs" / "qwen3").mkdir(parents=True)
    (tmp_path / NAME).write_text("seed: 0\n")
    assert resolve_shipped(NAME) == (NAME, None)  # the user's own copy
    for given in (None, "my_run.yaml", "/abs/configs/x.yaml", "configs"):
        assert resolve_shipped(given) == (given, None)  # the loader says what is wrong with them


@needs_mindformers
def test_a_configs_name_found_nowhere_names_both_places_and_never_leaves_the_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    root = shipped_configs_dir()
    with pytest.raises(SmokeError, match=f"no such file here \\({tmp_path}/configs/qwen3/nope.yaml\\) nor among the configs mindformers .* ships \\({root}\\)"):
        resolve_shipped("configs/qwen3/nope.yaml")
    outside = root.parent / "mindformers" / "__init__.py"  # a real file, reached by climbing out of configs/
    assert outside.is_file()
    with pytest.raises(SmokeError, match="no such file here"):
        resolve_shipped("configs/../mindformers/__init__.py")


def test_keep_takes_an_optional_folder_on_the_command_line_and_in_the_magic():
    from msnb.magics import MsnbMagics

    parse = build_parser().parse_args
    assert parse(["smoke"]).keep is False and parse(["smoke", "--keep"]).keep is True
    assert parse(["smoke", "cfg.yaml", "--keep", "run1"]).keep == "run1" and parse(["smoke", "--keep", "--steps", "3"]).keep is True
    magic = MsnbMagics.mfmon_smoke.parser.parse_argstring
    assert magic("--keep run1").keep == "run1" and magic("--keep").keep is True and magic("").keep is False


def test_keep_dir_is_refused_before_anything_starts_when_it_holds_files(tmp_path):
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "old.log").write_text("loss: 1\n")
    (tmp_path / "a_file").write_text("")
    with pytest.raises(SmokeError, match="already holds old.log"):
        SmokeOptions(keep=str(tmp_path / "full")).validate()
    with pytest.raises(SmokeError, match="is a file"):
        check_keep(tmp_path / "a_file")
    check_keep(True), check_keep(False), check_keep(tmp_path / "new")  # nothing to refuse
    made = scratch_directory(tmp_path / "new" / "run")
    assert made == tmp_path / "new" / "run" and made.is_dir() and (made.stat().st_mode & 0o777) == 0o700
    assert scratch_directory(made) == made  # an empty folder is fine
    temporary = scratch_directory(True)
    assert temporary.name.startswith("msnb-smoke-") and temporary != made
    temporary.rmdir()


def test_kept_outputs_name_each_writers_folder_that_holds_files(tmp_path):
    run = tmp_path / "run"
    for relative in ("output/log/rank_0/info.log", "output/tensorboard/rank_0/events.out.tfevents.1", "summary/x.summary.1", "train.log", "run.yaml"):
        (run / relative).parent.mkdir(parents=True, exist_ok=True)
        (run / relative).write_text("x")
    (run / "output" / "checkpoint").mkdir()  # empty: not listed
    listed = kept_outputs(run, run / "summary")
    assert [path for path, _ in listed] == ["summary", "output/log/rank_0/info.log", "output/tensorboard", "train.log"]
    assert listed[0][1] == "SummaryMonitor's summaries" and "MFLossMonitor" in listed[1][1]
    assert kept_outputs(run, tmp_path / "elsewhere")[0][0] != str(tmp_path / "elsewhere")  # an empty --summary-dir is not listed
    assert kept_outputs(tmp_path / "gone", None) == []
