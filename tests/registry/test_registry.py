"""Guarded registration against the real transformers and mindformers installed by the extras."""

import json
import os
import textwrap

import pytest

from msnb import kernel
from msnb import registry as R
from tests.conftest import kernel_from_spec, stream_text

TF_CELL = textwrap.dedent("""\
    from transformers import PretrainedConfig
    import msnb

    class TinyConfig(PretrainedConfig):
        model_type = "msnb_test_tiny"

    name = msnb.register_model(TinyConfig)
""")

MF_CELL = textwrap.dedent("""\
    from mindformers.models.configuration_utils import PretrainedConfig
    from mindformers.models.modeling_utils import PreTrainedModel
    import msnb

    class TinyMFConfig(PretrainedConfig):
        model_type = "msnb_test_tiny_mf"

    @msnb.register_model()
    class TinyMFModel(PreTrainedModel):
        config_class = TinyMFConfig

        def __init__(self, config):
            super().__init__(config)
""")


def run_cell(source: str, filename: str = "<cell>") -> dict:
    """Execute *source* as a notebook cell does: a fresh class object each time, module __main__."""
    ns = {"__name__": "__main__"}
    exec(compile(source, filename, "exec"), ns)
    return ns


@pytest.fixture(scope="module")
def mindformers_imported(tmp_path_factory):
    """Import mindformers from a scratch directory: importing it writes ./output/log."""
    here = os.getcwd()
    os.chdir(tmp_path_factory.mktemp("mf-import"))
    try:
        import mindformers.models.auto  # noqa: F401
        from mindformers.tools.register import MindFormerRegister  # noqa: F401
    finally:
        os.chdir(here)


def test_rerunning_a_transformers_cell_replaces_quietly():
    from transformers import AutoConfig

    first = run_cell(TF_CELL)
    second = run_cell(TF_CELL)
    assert first["name"] == second["name"] == "msnb_test_tiny"
    assert first["TinyConfig"] is not second["TinyConfig"]
    assert type(AutoConfig.for_model("msnb_test_tiny")) is second["TinyConfig"]  # the newest definition wins
    reg = R.registered()["msnb_test_tiny"]
    assert reg.replaced and reg.registries == ["transformers AutoConfig"]


def test_rerunning_a_mindformers_cell_replaces_in_every_registry(mindformers_imported):
    from mindformers.models.auto import AutoConfig
    from mindformers.models.auto.modeling_auto import MODEL_MAPPING
    from mindformers.tools.register import MindFormerModuleType, MindFormerRegister

    run_cell(MF_CELL)
    second = run_cell(MF_CELL)
    reg = R.registered()["msnb_test_tiny_mf"]
    assert reg.replaced
    assert reg.registries == ["mindformers AutoConfig", "MindFormerRegister config", "mindformers AutoModel", "MindFormerRegister models"]
    assert type(AutoConfig.for_model("msnb_test_tiny_mf")) is second["TinyMFConfig"]
    keys = [k for k in MODEL_MAPPING._extra_content if k.__qualname__ == "TinyMFConfig"]
    assert keys == [second["TinyMFConfig"]]  # the first run's entry is gone, not left beside the new one
    assert MODEL_MAPPING._extra_content[keys[0]] is second["TinyMFModel"]
    assert MindFormerRegister.get_cls(MindFormerModuleType.MODELS, "TinyMFModel") is second["TinyMFModel"]


def test_a_name_transformers_ships(monkeypatch):
    from transformers import PretrainedConfig

    class Aimv2Like(PretrainedConfig):
        model_type = "aimv2"

    with pytest.raises(R.RegistrationError) as err:
        R.register_model(Aimv2Like)
    msg = str(err.value)
    assert "'aimv2' is already used by transformers 4.57.1" in msg and "'custom_aimv2'" in msg and "on_conflict='rename'" in msg

    monkeypatch.setenv("MSNB_MODEL_PREFIX", "teamx")
    assert R.register_model(Aimv2Like, on_conflict="rename") == "teamx_aimv2"
    assert Aimv2Like.model_type == "teamx_aimv2"
    from transformers import AutoConfig

    assert type(AutoConfig.for_model("teamx_aimv2")) is Aimv2Like
    assert type(AutoConfig.for_model("aimv2")).__module__.startswith("transformers.")  # the library's own is untouched


def test_a_name_mindformers_ships(mindformers_imported):
    from mindformers.models.configuration_utils import PretrainedConfig

    class MyLlama(PretrainedConfig):
        model_type = "llama"

    with pytest.raises(R.RegistrationError, match=r"'llama' is already used by mindformers 1\.9\.0"):
        R.register_model(MyLlama)


def test_two_definitions_under_one_name_name_both(tmp_path):
    first = tmp_path / "team_a.py"
    second = tmp_path / "team_b.py"
    first.write_text("from transformers import PretrainedConfig\nclass SharedConfig(PretrainedConfig):\n    model_type = 'msnb_test_shared'\n    hidden = 1\n")
    second.write_text(
        "from transformers import PretrainedConfig\n\n\nclass OtherConfig(PretrainedConfig):\n    model_type = 'msnb_test_shared'\n    hidden = 2\n"
    )
    import importlib.util

    def load(path):  # as `import team_a` would
        import sys

        spec = importlib.util.spec_from_file_location(path.stem, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[path.stem] = module
        spec.loader.exec_module(module)
        return module

    a, b = load(first), load(second)
    R.register_model(a.SharedConfig)
    with pytest.raises(R.RegistrationError) as err:
        R.register_model(b.OtherConfig)
    msg = str(err.value)
    assert f"{first}:2" in msg and f"{second}:4" in msg and "different definition" in msg
    assert R.register_model(b.OtherConfig, on_conflict="replace") == "msnb_test_shared"
    assert R.registered()["msnb_test_shared"].config_cls is b.OtherConfig


def test_model_type_must_match_the_name():
    from transformers import PretrainedConfig

    class Declared(PretrainedConfig):
        model_type = "msnb_test_declared"

    with pytest.raises(R.RegistrationError, match="declares model_type = 'msnb_test_declared' but is being registered as 'msnb_test_other'"):
        R.register_model(Declared, model_type="msnb_test_other")


def test_mindformers_classes_are_never_replaced_by_name(mindformers_imported):
    from mindformers.models.configuration_utils import PretrainedConfig
    from mindformers.tools.register import MindFormerModuleType, MindFormerRegister

    shipped = MindFormerRegister.get_cls(MindFormerModuleType.CONFIG, "LlamaConfig")

    class LlamaConfig(PretrainedConfig):  # same class name as mindformers' own
        model_type = "msnb_test_llama_variant"

    reg = R.register(LlamaConfig)
    assert MindFormerRegister.get_cls(MindFormerModuleType.CONFIG, "LlamaConfig") is shipped
    assert any("mindformers ships a class named LlamaConfig" in why for _, why in reg.skipped)


def test_doctor_scans_a_project(tmp_path, run_msnb):
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "a.py").write_text(
        textwrap.dedent("""\
        from transformers import PretrainedConfig, AutoConfig
        class AConfig(PretrainedConfig):
            model_type = "team_llm"
        class Vision(PretrainedConfig):
            model_type = "aimv2"
        AutoConfig.register("team_llm", AConfig)
    """)
    )
    (tmp_path / "models" / "b.py").write_text("from transformers import PretrainedConfig\nclass BConfig(PretrainedConfig):\n    model_type = 'team_llm'\n")
    (tmp_path / "run.yaml").write_text("model:\n  model_config:\n    model_type: team_llm\n  extra:\n    model_type: nowhere_defined\n")
    proc = run_msnb("doctor", "--model-types", tmp_path, "--json", check=1)
    found = json.loads(proc.stdout)
    assert found["files"] == 3
    assert found["collisions"]["aimv2"]["library"] == "transformers 4.57.1"
    assert [(u["owner"], u["line"]) for u in found["collisions"]["aimv2"]["uses"]] == [("Vision", 5)]
    assert sorted(u["owner"] for u in found["duplicates"]["team_llm"]) == ["AConfig", "BConfig"]
    assert [u["name"] for u in found["unknown"]] == ["nowhere_defined"]
    text = run_msnb("doctor", "--model-types", tmp_path, check=1).stdout
    assert "COLLISION 'aimv2'" in text and "DUPLICATE 'team_llm'" in text
    (tmp_path / "models" / "b.py").unlink()
    (tmp_path / "models" / "a.py").write_text("from transformers import PretrainedConfig\nclass AConfig(PretrainedConfig):\n    model_type = 'team_llm'\n")
    assert "no duplicates or collisions" in run_msnb("doctor", "--model-types", tmp_path, check=0).stdout


def test_the_notebook_scenario_twice_in_a_real_kernel(jupyter_dirs, tmp_path):
    """The registration cell run twice in a kernel started from the installed kernelspec, then a shipped name."""
    kernel.install("msnb-test-registry", prefix=jupyter_dirs["prefix"])
    with kernel_from_spec("msnb-test-registry", cwd=str(tmp_path)) as kc:
        for _attempt in range(2):
            reply = kc.execute_interactive(MF_CELL, timeout=300)
            assert reply["content"]["status"] == "ok", reply["content"]
        out = []
        code = (
            "from mindformers.models.auto.modeling_auto import MODEL_MAPPING\n"
            "print(sum(k.__qualname__ == 'TinyMFConfig' for k in MODEL_MAPPING._extra_content), msnb.registry.registered()['msnb_test_tiny_mf'].replaced)\n"
            "class Aim(PretrainedConfig):\n    model_type = 'aimv2'\n"
            "try:\n    msnb.register_model(Aim)\nexcept msnb.registry.RegistrationError as e:\n    print('refused:', str(e)[:60])\n"
        )
        reply = kc.execute_interactive(code, timeout=60, output_hook=out.append)
        assert reply["content"]["status"] == "ok"
        text = stream_text(out)
        assert "1 True" in text
        assert "refused: model_type 'aimv2' is already used by transformers" in text
