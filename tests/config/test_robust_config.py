"""`msnb config` / load_config / lint under hostile input: every case is a ConfigError naming the file
(and key and line where there is one) -> exit 2 and one line on stderr; nothing hangs, nothing is read
from a device or a FIFO, nothing crashes inside a lint rule."""

import json
import os
import textwrap
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from msnb.cli import main
from msnb.config import ConfigError, Finding, check_config, lint, load_config
from msnb.config.loader import MAX_BYTES, MAX_DEPTH, MAX_VALUES
from msnb.findings import Finding as SharedFinding
from msnb.findings import Severity


def write(root: Path, name: str, text: str | bytes) -> Path:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(textwrap.dedent(text))
    return path


def cli(capsys, *args) -> tuple[int, str, str]:
    code = main(["config", *map(str, args)])
    out = capsys.readouterr()
    return code, out.out, out.err


def assert_one_line_error(capsys, path: Path, *fragments: str) -> str:
    code, out, err = cli(capsys, path)
    assert code == 2, err
    assert out == ""
    assert err.count("\n") == 1 and err.startswith("msnb config: error: "), err
    assert "Traceback" not in err
    for fragment in fragments:
        assert fragment in err, err
    return err


def list_bomb(levels: int = 10, width: int = 9) -> str:
    lines = ["a0: &a0 [" + ", ".join(["lol"] * width) + "]"]
    for i in range(1, levels):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * width) + "]")
    return "\n".join(lines) + "\n"


def map_bomb(levels: int = 30) -> str:
    lines = ["m0: &m0 {x: 1}"]
    for i in range(1, levels):
        lines.append(f"m{i}: &m{i} {{left: *m{i - 1}, right: *m{i - 1}}}")
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------ alias bombs, depth, size


def test_list_alias_bomb_is_refused_with_its_line(tmp_path, capsys):
    path = write(tmp_path, "bomb.yaml", list_bomb())  # 9**10 values once expanded (it used to hang)
    err = assert_one_line_error(capsys, path, str(path), "alias bomb", f"{MAX_VALUES:,}")
    assert f"{path}:" in err  # a line is named


def test_mapping_alias_bomb_is_refused(tmp_path, capsys):
    path = write(tmp_path, "bomb.yaml", map_bomb())  # 2**30 mappings once expanded
    assert_one_line_error(capsys, path, str(path), "alias bomb")


def test_a_bomb_in_a_base_names_the_base(tmp_path):
    base = write(tmp_path, "team/bomb.yaml", list_bomb())
    top = write(tmp_path, "run.yaml", "base_config: team/bomb.yaml\nseed: 1\n")
    with pytest.raises(ConfigError) as err:
        load_config(top)
    assert err.value.file == str(base.resolve()) and err.value.line is not None


def test_aliases_under_the_bound_still_load_shared(tmp_path):
    path = write(tmp_path, "ok.yaml", list_bomb(levels=3, width=9) + "monitor_config: {collect_freq: 20}\n")  # 9**3 values: fine
    loaded = load_config(path)
    assert len(loaded.data["a2"]) == 9 and loaded.data["a2"][0][0] == ["lol"] * 9
    assert check_config(path).config["monitor_config"]["collect_freq"] == 20


def test_recursive_alias_is_refused(tmp_path, capsys):
    path = write(tmp_path, "rec.yaml", "seed: 1\nloop: &a [1, *a]\n")
    assert_one_line_error(capsys, path, f"{path}:2", "recursive")


@pytest.mark.parametrize("form", ["flow", "block"])
def test_nesting_500_deep_is_refused(tmp_path, capsys, form):
    if form == "flow":
        text = "a: " + "[" * 500 + "]" * 500 + "\n"
    else:
        text = "".join("  " * i + f"k{i}:\n" for i in range(500)) + "  " * 500 + "v: 1\n"
    path = write(tmp_path, "deep.yaml", text)
    assert_one_line_error(capsys, path, str(path), f"more than {MAX_DEPTH} levels")


@pytest.mark.parametrize(
    "text",
    ["a: " + "{b: " * 3000 + "1" + "}" * 3000 + "\n", "a: " + "[" * 3000 + "]" * 3000 + "\n", "a: " + "[" * 1500 + "\n"],
    ids=["mappings", "lists-past-libyaml-limit", "unclosed"],
)
def test_nesting_3000_deep_does_not_exhaust_the_stack(tmp_path, text):
    """libyaml refuses 1,000 flow levels while scanning ahead, before the events that show the depth: the
    pure-Python parser must still see it (its composer would recurse until RecursionError)."""
    path = write(tmp_path, "deep.yaml", text)
    with pytest.raises(ConfigError, match="levels deep"):
        load_config(path)


def test_depth_through_aliases_is_counted(tmp_path):
    half = MAX_DEPTH // 2 + 2
    text = "x: &x " + "[" * half + "]" * half + "\ny: " + "[" * half + "*x" + "]" * half + "\n"
    path = write(tmp_path, "alias_deep.yaml", text)
    with pytest.raises(ConfigError, match="alias \\*x nests"):
        load_config(path)


def test_nesting_at_the_bound_loads_resolves_and_prints(tmp_path, capsys):
    """The bound is safe: a config exactly MAX_DEPTH deep goes through every later step (merge, OmegaConf, YAML, JSON)."""
    depth = MAX_DEPTH - 1  # the top-level mapping is one level
    body = "".join("  " * i + f"k{i}:\n" for i in range(depth - 1)) + "  " * (depth - 1) + "v: ${seed}\n"
    path = write(tmp_path, "deep_ok.yaml", "seed: 7\n" + body)
    write(tmp_path, "top.yaml", "base_config: deep_ok.yaml\nseed: 8\n")
    node = load_config(tmp_path / "top.yaml").data
    for i in range(depth - 1):
        node = node[f"k{i}"]
    assert node == {"v": 8}
    code, out, _ = cli(capsys, path, "--json")
    assert code == 0 and json.loads(out)["config"]["seed"] == 7
    code, out, _ = cli(capsys, path)
    assert code == 0 and "v: 7" in out


def test_an_oversized_file_is_refused_without_reading_it_all(tmp_path, capsys):
    path = tmp_path / "huge.yaml"
    with open(path, "wb") as f:
        f.write(b"a: 1\n")
        f.truncate(MAX_BYTES * 64)  # sparse: 256 MiB of zeros
    assert_one_line_error(capsys, path, str(path), "MiB")


# ------------------------------------------------------------------ bytes that are not YAML text


def test_a_non_utf8_byte_names_its_line(tmp_path, capsys):
    path = write(tmp_path, "latin1.yaml", b"seed: 1\nname: caf\xe9\n")
    assert_one_line_error(capsys, path, f"{path}:2", "not UTF-8", "0xe9")


def test_a_control_character_names_its_line(tmp_path, capsys):
    path = write(tmp_path, "nul.yaml", b"seed: 1\nname: a\x00b\n")
    assert_one_line_error(capsys, path, f"{path}:2", "#x0000")


def test_a_multi_line_parser_message_stays_one_line(tmp_path, capsys):
    path = write(tmp_path, "tab.yaml", "a:\n\tb: 1\n")
    assert_one_line_error(capsys, path, str(path), "invalid YAML")


# ------------------------------------------------------------------ files that are not regular files


def test_dev_zero_as_base_is_never_read(tmp_path, capsys):
    path = write(tmp_path, "zero.yaml", "seed: 1\nbase_config: /dev/zero\n")
    assert_one_line_error(capsys, path, f"{path}:2", "key 'base_config'", "character device")


def test_dev_zero_as_the_file(capsys):
    assert_one_line_error(capsys, Path("/dev/zero"), "/dev/zero", "character device")


def test_a_directory_as_the_file(tmp_path, capsys):
    assert_one_line_error(capsys, tmp_path, str(tmp_path), "directory")


def test_a_fifo_as_the_file_does_not_hang(tmp_path, run_msnb):
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)
    proc = run_msnb("config", fifo, check=2, timeout=60)  # nobody ever writes to it: a read would block forever
    assert "FIFO" in proc.stderr and str(fifo) in proc.stderr and proc.stderr.count("\n") == 1


def test_a_fifo_as_base_does_not_hang(tmp_path, run_msnb):
    os.mkfifo(tmp_path / "fifo.yaml")
    path = write(tmp_path, "run.yaml", "base_config: fifo.yaml\n")
    proc = run_msnb("config", path, check=2, timeout=60)
    assert "FIFO" in proc.stderr and "key 'base_config'" in proc.stderr and f"{path}:1" in proc.stderr


def test_a_base_path_with_a_nul_byte(tmp_path, capsys):
    path = write(tmp_path, "run.yaml", 'base_config: "a\\0b.yaml"\n')
    assert_one_line_error(capsys, path, "key 'base_config'")


def test_a_diamond_of_bases_is_read_once_per_file(tmp_path):
    """Each level lists the next twice: 2**30 loads if every reference were followed."""
    write(tmp_path, "l30.yaml", "leaf: 1\n")
    for i in range(30):
        write(tmp_path, f"l{i}.yaml", f"base_config: [l{i + 1}.yaml, l{i + 1}.yaml]\nlevel{i}: {i}\n")
    loaded = load_config(tmp_path / "l0.yaml")
    assert loaded.data["leaf"] == 1 and loaded.data["level29"] == 29
    assert len(loaded.files) == 31


def test_a_long_base_chain_is_refused(tmp_path):
    for i in range(100):
        write(tmp_path, f"c{i}.yaml", f"base_config: c{i + 1}.yaml\n")
    write(tmp_path, "c100.yaml", "leaf: 1\n")
    with pytest.raises(ConfigError, match="chains more than"):
        load_config(tmp_path / "c0.yaml")


# ------------------------------------------------------------------ wrong types reaching the linter


@pytest.mark.parametrize(
    "text, key, line",
    [
        ("seed: 1\nparallel: semi_auto\n", "parallel", 2),
        ("parallel_config: 8\n", "parallel_config", 1),
        ("seed: 1\n\ncallbacks: 5\n", "callbacks", 3),
        ("callbacks: LossMonitor\n", "callbacks", 1),
        ("use_parallel: 'yes please'\n", "use_parallel", 1),
        ("runner_config: 4\n", "runner_config", 1),
        ("runner_config:\n  sink_mode: true\n  sink_size: four\n", "runner_config.sink_size", 3),
        ("runner_config:\n  sink_mode: 1\n", "runner_config.sink_mode", 2),
    ],
)
def test_wrong_types_are_config_errors_naming_file_key_and_line(tmp_path, capsys, text, key, line):
    path = write(tmp_path, "types.yaml", text)
    err = assert_one_line_error(capsys, path, f"{path}:{line}", f"key '{key}'")
    assert "expected" in err


def test_a_wrong_type_set_in_a_base_names_the_base(tmp_path):
    base = write(tmp_path, "base.yaml", "seed: 0\nparallel: semi_auto\n")
    top = write(tmp_path, "run.yaml", "base_config: base.yaml\nseed: 1\n")
    with pytest.raises(ConfigError) as err:
        check_config(top)
    assert (err.value.file, err.value.key, err.value.line) == (str(base.resolve()), "parallel", 2)


def test_an_unhashable_callback_type_is_a_config_error(tmp_path):
    path = write(tmp_path, "cb.yaml", "callbacks:\n  - type: [LossMonitor]\n")
    with pytest.raises(ConfigError, match=r"callbacks\[0\]\.type"):
        check_config(path)


def test_null_means_not_set(tmp_path):
    path = write(tmp_path, "nulls.yaml", "parallel: ~\nparallel_config: ~\ncallbacks: ~\nrunner_config: ~\nmonitor_config: {collect_freq: 20}\n")
    assert check_config(path).findings == []


# ------------------------------------------------------------------ lint: shared findings, inputs only, sink mode


def findings(tmp_path, text, **kw) -> dict:
    path = write(tmp_path, "lint.yaml", text)
    return {f.rule: f for f in lint(load_config(path), **kw)}


def test_lint_uses_the_shared_finding_with_a_fix(tmp_path):
    found = findings(tmp_path, "monitor_config:\n  collect_freq: 1\n")
    f = found["collect-freq-low"]
    assert Finding is SharedFinding and isinstance(f, SharedFinding)
    assert f.severity is Severity.WARNING and f.fix and f.key == "monitor_config.collect_freq"
    assert set(f.as_dict()) == {"rule", "severity", "message", "fix", "key"}


def test_lint_depends_only_on_its_arguments(tmp_path):
    text = "monitor_config:\n  collect_freq: 20\n"
    assert "dataset-graph-protobuf" not in findings(tmp_path, text)  # unknown protobuf: no claim about it
    assert "dataset-graph-protobuf" not in findings(tmp_path, text, protobuf_major=3)
    assert "protobuf 5.x" in findings(tmp_path, text, protobuf_major=5)["dataset-graph-protobuf"].message
    off = "monitor_config:\n  collect_freq: 20\n  collect_specified_data: {collect_dataset_graph: false}\n"
    assert "dataset-graph-protobuf" not in findings(tmp_path, off, protobuf_major=5)


def sink(freq, size, mode="true"):
    return f"runner_config:\n  sink_mode: {mode}\n  sink_size: {size}\nmonitor_config:\n  collect_freq: {freq}\n"


@pytest.mark.parametrize("freq, size", [(10, 4), (3, 4), (1, 16), (30, 20)])
def test_sink_mode_rule_fires_when_collect_freq_does_not_fit_the_sink(tmp_path, freq, size):
    f = findings(tmp_path, sink(freq, size), steps=100)["sink-mode-collect-freq"]
    assert f.severity == "warning" and f.key == "monitor_config.collect_freq"
    assert f"sink_size {size}" in f.message and f"every {size} steps" in f.message and str(size) in f.fix
    if freq < size:
        assert "effective frequency is the sink size" in f.message


@pytest.mark.parametrize("text", [sink(8, 4), sink(4, 4), sink(40, 20), sink(10, 4, mode="false"), sink(10, 1), sink(10, -1)])
def test_sink_mode_rule_is_quiet_when_collect_freq_fits(tmp_path, text):
    assert "sink-mode-collect-freq" not in findings(tmp_path, text, steps=100)


def test_sink_mode_says_what_summarycollector_counts(tmp_path):
    """MindSpore's SummaryCollector collects at epoch_end on cur_epoch_num % collect_freq in sink mode (one epoch per sink)."""
    info = findings(tmp_path, sink(8, 4), steps=100)["sink-mode-summary-unit"]
    assert info.severity == "info" and "8 sinks are 32 steps" in info.message
    assert "sink-mode-summary-unit" not in findings(tmp_path, sink(8, 4, mode="false"), steps=100)
    assert "3 sinks are 12 steps" in findings(tmp_path, sink(3, 4), steps=100)["sink-mode-collect-freq"].message


def test_sink_mode_rule_against_an_independent_count(tmp_path):
    """Oracle: simulate which sink ends hit a multiple of collect_freq; the rule fires exactly when that is not every F steps."""
    for size in (2, 3, 4, 8):
        for freq in range(1, 3 * size + 1):
            ends = range(size, 1000 * size + 1, size)  # steps at which callbacks run
            hits = [s for s in ends if s % freq == 0]
            honoured = hits[:3] == [freq, 2 * freq, 3 * freq]
            fired = "sink-mode-collect-freq" in findings(tmp_path, sink(freq, size), steps=100)
            assert fired == (not honoured), (freq, size)


def test_sink_mode_in_a_base_with_collect_freq_on_top(tmp_path):
    write(tmp_path, "mf.yaml", "runner_config: {sink_mode: true, sink_size: 4, epochs: 1}\n")
    top = write(tmp_path, "run.yaml", "base_config: mf.yaml\nmonitor_config: {collect_freq: 10}\n")
    assert "sink-mode-collect-freq" in {f.rule for f in check_config(top).findings}


# ------------------------------------------------------------------ fuzz: any bytes -> a report or a ConfigError

SEED = b"""\
base_config: base.yaml
seed: &s 0
runner_config: {sink_mode: true, sink_size: 4, epochs: 2}
parallel: {parallel_mode: semi_auto}
parallel_config: {data_parallel: 2, model_parallel: 1}
callbacks:
  - type: LossMonitor
  - {type: EarlyStopping, monitor: eval_loss}
monitor_config:
  summary_dir: ./summary/${seed}
  collect_freq: 10
  early_stop: {window: 5}
  collect_specified_data: {histogram_regular: '.*'}
other: [*s, *s]
"""
PIECES = [b"&a ", b"*a", b"[", b"]", b"{", b"}", b": ", b"\n  ", b"- ", b"\xff", b"\x00", b"${", b"!!binary ", b"<<: ", b"*s", b"~", b"5", b"'"]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(st.lists(st.tuples(st.integers(0, len(SEED)), st.integers(0, 8), st.sampled_from(PIECES)), max_size=6))
def test_fuzz_any_edit_gives_a_report_or_a_config_error(tmp_path, edits):
    data = SEED
    for pos, cut, piece in edits:
        pos = min(pos, len(data))
        data = data[:pos] + piece + data[pos + cut :]
    write(tmp_path, "base.yaml", "seed: 1\nmonitor_config: {per_print_times: 10}\n")
    path = write(tmp_path, "fuzz.yaml", data)
    try:
        report = check_config(path, steps=1000, protobuf_major=4)
    except ConfigError as exc:
        assert str(exc) and "\n" not in str(exc) and exc.file
    else:
        report.format_text()
        report.to_json()


def test_the_bounds_hold_without_libyaml(tmp_path, monkeypatch):
    """The shape check runs on PyYAML's pure-Python parser too (installs without libyaml)."""
    import yaml

    from msnb.config import loader

    monkeypatch.setattr(loader, "_FAST", yaml.SafeLoader)
    for name, text, match in [
        ("bomb.yaml", list_bomb(), "alias bomb"),
        ("deep.yaml", "a: " + "[" * 3000 + "]" * 3000 + "\n", "levels deep"),
        ("rec.yaml", "a: &a {b: *a}\n", "recursive"),
        ("nul.yaml", "a: \x00\n", "#x0000"),
    ]:
        with pytest.raises(ConfigError, match=match):
            load_config(write(tmp_path, name, text))


SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-(10**30), 10**30), st.floats(), st.sampled_from(["", ".*", "rank_0", "${seed}", "${nope}", "semi_auto", "/dev/zero"])
)
KEYS = st.sampled_from(["parallel_mode", "data_parallel", "sink_mode", "sink_size", "type", "monitor", "collect_freq", "summary_dir", "early_stop", "window"])
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(KEYS, inner, max_size=3)), max_leaves=8)
TOP = st.sampled_from(["parallel", "parallel_config", "callbacks", "runner_config", "use_parallel", "monitor_config", "trainer", "seed"])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(st.dictionaries(TOP, VALUES, min_size=1, max_size=4))
def test_fuzz_any_value_under_the_keys_lint_reads(tmp_path, data):
    import yaml

    path = write(tmp_path, "typed.yaml", yaml.safe_dump(data))
    try:
        report = check_config(path, steps=1000, protobuf_major=4)
    except ConfigError as exc:
        assert "\n" not in str(exc) and exc.file == str(path.resolve())
    else:
        assert all(isinstance(f, SharedFinding) for f in report.findings)
        report.to_json()


def test_monitor_config_errors_name_the_line_too(tmp_path, capsys):
    path = write(tmp_path, "mc.yaml", "seed: 1\nmonitor_config:\n  summary_dir: ./s\n  collect_freq: ten\n")
    assert_one_line_error(capsys, path, f"{path}:4", "key 'monitor_config.collect_freq'", "an integer")
    path = write(tmp_path, "es.yaml", "monitor_config:\n  early_stop:\n    window: 5\n    mode: sideways\n")
    assert_one_line_error(capsys, path, f"{path}:4", "monitor_config.early_stop.mode")
    path = write(tmp_path, "fl.yaml", "monitor_config:\n  flush_interval: .nan\n")
    assert_one_line_error(capsys, path, f"{path}:2", "flush_interval")


def test_a_symlink_loop_as_file_or_base(tmp_path, capsys):
    loop = tmp_path / "loop.yaml"
    loop.symlink_to(loop)
    assert_one_line_error(capsys, loop, "loop.yaml", "cannot read")
    path = write(tmp_path, "run.yaml", "base_config: loop.yaml\n")
    assert_one_line_error(capsys, path, f"{path}:1", "key 'base_config'", "cannot be read")


def test_keys_json_cannot_hold_are_written_as_text(tmp_path, capsys):
    """Found by the fuzz test: a !!binary or date key broke --json with a TypeError."""
    path = write(tmp_path, "keys.yaml", "!!binary aGk=: 1\n2024-01-01: day\nplain: {2025-02-02: x}\n")
    code, out, _ = cli(capsys, path, "--json")
    assert code == 0 and json.loads(out)["config"] == {"b'hi'": 1, "2024-01-01": "day", "plain": {"2025-02-02": "x"}}
    assert cli(capsys, path)[0] == 0
