"""register_model and `doctor --model-types` under bad input: renames are stable across re-runs,
wrong arguments are RegistrationErrors that say what is expected, a missing path is exit 2, and a
file the scan cannot read (deep, huge, an alias bomb, a FIFO) is reported, never raised."""

import json
import os
import textwrap

import pytest

from msnb import registry as R
from msnb.errors import RegistrationError, UsageError

SHIPPED_CELL = textwrap.dedent("""\
    from transformers import PretrainedConfig
    import msnb

    class LlamaLikeConfig(PretrainedConfig):
        model_type = "llama"
        hidden = {hidden}

    name = msnb.register_model(LlamaLikeConfig, on_conflict="rename")
""")


def run_cell(source: str) -> dict:
    """A notebook cell: a fresh class object each run, module __main__."""
    ns = {"__name__": "__main__"}
    exec(compile(source, "<cell>", "exec"), ns)
    return ns


@pytest.fixture
def prefix(monkeypatch, request):
    """A team prefix of this test's own, so names never meet another test's registrations."""
    value = "robust" + str(abs(hash(request.node.name)) % 10**8)
    monkeypatch.setenv("MSNB_MODEL_PREFIX", value)
    return value


def test_rename_run_again_gives_the_same_name(prefix):
    assert "llama" in R.shipped_model_types()
    names = [run_cell(SHIPPED_CELL.format(hidden=1))["name"] for _ in range(4)]
    assert names == [f"{prefix}_llama"] * 4  # not _v2, _v3, ...
    reg = R.registered()[f"{prefix}_llama"]
    assert reg.renamed_from == "llama" and reg.replaced


def test_rename_of_a_different_definition_takes_the_next_name_and_keeps_it(prefix):
    first = run_cell(SHIPPED_CELL.format(hidden=1))["name"]
    other = textwrap.dedent("""\
        from transformers import PretrainedConfig
        import msnb

        class OtherLlamaConfig(PretrainedConfig):
            model_type = "llama"

        name = msnb.register_model(OtherLlamaConfig, on_conflict="rename")
    """)
    second = [run_cell(other)["name"] for _ in range(3)]
    assert first == f"{prefix}_llama" and second == [f"{prefix}_llama_v2"] * 3
    assert run_cell(SHIPPED_CELL.format(hidden=1))["name"] == first  # the first cell, re-run after: still its own name


def test_rename_of_a_custom_name_taken_by_another_definition_is_stable(prefix):
    cell = textwrap.dedent("""\
        from transformers import PretrainedConfig
        import msnb

        class {cls}(PretrainedConfig):
            model_type = "{prefix}_tiny"

        name = msnb.register_model({cls}, on_conflict="rename")
    """)
    assert run_cell(cell.format(cls="TinyA", prefix=prefix))["name"] == f"{prefix}_tiny"
    renamed = [run_cell(cell.format(cls="TinyB", prefix=prefix))["name"] for _ in range(3)]
    assert len(set(renamed)) == 1 and renamed[0] != f"{prefix}_tiny"


@pytest.mark.parametrize(
    "args, kwargs, expected",
    [
        ((5,), {}, "expects a config class"),
        (("llama",), {}, "model_type='llama'"),
        ((object(),), {}, "expects a config class"),
        ((dict, 5), {}, "expects a model class"),
        ((), {"model_type": 5}, "model_type must be a non-empty string"),
        ((), {"model_type": ""}, "model_type must be a non-empty string"),
        ((dict,), {"on_conflict": "overwrite"}, "on_conflict must be"),
    ],
)
def test_wrong_arguments_say_what_is_expected(args, kwargs, expected):
    with pytest.raises(RegistrationError, match=expected.replace("(", r"\(")):
        R.register_model(*args, **kwargs)


def test_the_decorator_on_a_function_says_what_is_expected():
    with pytest.raises(RegistrationError, match="expects a config class"):

        @R.register_model(model_type="robust_fn")
        def not_a_class():
            pass


def test_a_non_string_model_type_attribute_is_refused():
    from transformers import PretrainedConfig

    class NumberConfig(PretrainedConfig):
        model_type = 42

    with pytest.raises(RegistrationError, match="must be a string"):
        R.register(NumberConfig)


# ------------------------------------------------------------------ doctor --model-types


def test_model_types_on_a_missing_path_is_exit_2(tmp_path, run_msnb):
    missing = tmp_path / "nonexistent"
    proc = run_msnb("doctor", "--model-types", missing, check=2)
    assert proc.stdout == "" and proc.stderr.count("\n") == 1 and str(missing) in proc.stderr and "does not exist" in proc.stderr
    with pytest.raises(UsageError):
        R.scan_model_types(missing)


def project(tmp_path):
    root = tmp_path / "project"
    (root / "models").mkdir(parents=True)
    (root / "models" / "good.py").write_text("from transformers import PretrainedConfig\nclass GoodConfig(PretrainedConfig):\n    model_type = 'robust_good'\n")
    return root


def scan_json(run_msnb, root, check=0):
    return json.loads(run_msnb("doctor", "--model-types", root, "--json", check=check, timeout=120).stdout)


def problems_by_file(found) -> dict:
    return {os.path.basename(p["file"]): p["problem"] for p in found["problems"]}


def test_a_3000_deep_yaml_is_reported_not_raised(tmp_path, run_msnb):
    root = project(tmp_path)
    (root / "deep.yaml").write_text("model_type: robust_deep\nx: " + "[" * 3000 + "]" * 3000 + "\n")
    found = scan_json(run_msnb, root)
    assert "levels deep" in problems_by_file(found)["deep.yaml"]
    assert [u["name"] for u in found["definitions"]] == ["robust_good"]  # the other files are still scanned
    assert "SKIPPED" in run_msnb("doctor", "--model-types", root, check=0).stdout


def test_an_alias_bomb_yaml_is_reported(tmp_path, run_msnb):
    root = project(tmp_path)
    lines = ["a0: &a0 [" + ", ".join(["x"] * 9) + "]"] + [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 10)]
    (root / "bomb.yaml").write_text("\n".join(lines) + "\n")
    assert "alias bomb" in problems_by_file(scan_json(run_msnb, root))["bomb.yaml"]


def test_a_huge_python_file_is_reported_without_being_read(tmp_path):
    root = project(tmp_path)
    with open(root / "generated.py", "w") as f:
        f.write("class HugeConfig:\n    model_type = 'robust_huge'\n")
        f.write("# padding\n" * (R.MAX_SCAN_BYTES // 10 + 1))
    found = R.scan_model_types(root)
    assert "MiB" in problems_by_file(found)["generated.py"]
    assert [u.name for u in found["definitions"]] == ["robust_good"]


@pytest.mark.parametrize("source", ["x = " + "+".join(["a"] * 200_000) + "\n", "x = " + "-" * 100_000 + "1\n"], ids=["long-chain", "deep-unary"])
def test_python_that_exhausts_the_parser_is_reported(tmp_path, source):
    root = project(tmp_path)
    (root / "nasty.py").write_text(source)
    found = R.scan_model_types(root)
    assert "nested too deeply" in problems_by_file(found)["nasty.py"]
    assert [u.name for u in found["definitions"]] == ["robust_good"]


def test_a_fifo_in_the_project_does_not_hang_the_scan(tmp_path, run_msnb):
    root = project(tmp_path)
    os.mkfifo(root / "pipe.yaml")
    found = scan_json(run_msnb, root)
    assert "FIFO" in problems_by_file(found)["pipe.yaml"]


def test_a_symlink_loop_does_not_multiply_files(tmp_path):
    root = project(tmp_path)
    (root / "models" / "again").symlink_to(root)
    found = R.scan_model_types(root)
    assert found["files"] == 1 and len(found["definitions"]) == 1 and not found["duplicates"]


def test_an_unlistable_folder_is_reported(tmp_path):
    if os.geteuid() == 0:
        pytest.skip("root lists every folder")
    root = project(tmp_path)
    locked = root / "locked"
    locked.mkdir()
    locked.chmod(0)
    try:
        found = R.scan_model_types(root)
    finally:
        locked.chmod(0o700)
    assert "cannot list" in problems_by_file(found)["locked"]
