"""``use_legacy`` read as mindformers reads it: msnb's one reading (:func:`msnb.config.run_config.uses_legacy`) against
mindformers' own answer (``is_legacy_model`` once its context holds the run's config), for the spellings people write.

Every part of msnb that picks legacy or new-architecture sizes, plans or layout rules asks this one function, so a
quoted ``"False"`` (legacy to mindformers: a non-empty string) can no longer be new-architecture to msnb."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import pytest

from msnb.config import load_config
from msnb.config.run_config import uses_legacy

SPELLINGS = {
    "unset": "run_mode: train\n",
    "True": "use_legacy: True\n",
    "False": "use_legacy: False\n",
    "quoted False": 'use_legacy: "False"\n',
    "quoted false": "use_legacy: 'false'\n",
    "yaml no": "use_legacy: no\n",
    "zero": "use_legacy: 0\n",
    "one": "use_legacy: 1\n",
    "null": "use_legacy: null\n",
    "empty string": 'use_legacy: ""\n',
}

MINDFORMERS_ANSWER = r"""
import json, os, sys
from msnb.fullsize.import_guards import guard_deepseek_v4_import
guard_deepseek_v4_import()  # mindformers 2.0 imports DeepSeek-V4, which needs hyper_parallel (absent): the smoke's own guard
from mindformers import MindFormerConfig
from mindformers.core.context.build_context import MFContextOperator, is_legacy_model
said = {}
for name, path in json.loads(sys.argv[1]).items():
    MFContextOperator.reset_instance()
    MFContextOperator(MindFormerConfig(path))  # what build_context does with the run's config
    said[name] = bool(is_legacy_model())  # what build_model asks before it picks the model classes
print(json.dumps(said))
"""


@pytest.mark.skipif(importlib.util.find_spec("mindformers") is None, reason="mindformers is not installed")
def test_msnb_reads_use_legacy_as_mindformers_does(tmp_path):
    paths = {}
    for i, (name, text) in enumerate(SPELLINGS.items()):
        paths[name] = tmp_path / f"run{i}.yaml"
        paths[name].write_text(text)
    proc = subprocess.run(
        [sys.executable, "-c", MINDFORMERS_ANSWER, json.dumps({k: str(v) for k, v in paths.items()})], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    theirs = json.loads(proc.stdout.strip().splitlines()[-1])
    ours = {name: uses_legacy(load_config(path).data) for name, path in paths.items()}
    assert ours == theirs
    assert theirs["quoted False"] is True and theirs["False"] is False  # the spelling that misled msnb before
