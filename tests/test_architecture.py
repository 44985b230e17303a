"""docs/ARCHITECTURE.md's layer table says what the import-linter contracts in pyproject.toml check (`lint-imports`)."""

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def contract_layers() -> dict:
    """module -> layer number (1 = lowest), from the layers contract."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    (layers,) = [c for c in config["contracts"] if c["type"] == "layers"]
    out = {}
    for number, layer in enumerate(reversed(layers["layers"]), start=1):
        for name in re.split(r"[|:]", layer):
            out[name.strip()] = number
    return out


def documented_layers() -> dict:
    """module -> layer number, from the table of docs/ARCHITECTURE.md."""
    out = {}
    for line in (ROOT / "docs" / "ARCHITECTURE.md").read_text().splitlines():
        m = re.match(r"\| (\d+) [^|]*\| ([^|]*) \|", line)
        if m:
            for name in re.findall(r"`msnb/(\w+)(?:\.py|/)`", m.group(2)):
                out[name] = int(m.group(1))
    return out


def test_the_documented_layers_are_the_checked_ones():
    documented, checked = documented_layers(), contract_layers()
    assert documented == checked
    package = {
        p.stem if p.is_file() else p.name
        for p in (ROOT / "msnb").iterdir()
        if not p.name.startswith("_") and (p.suffix == ".py" or (p / "__init__.py").exists())
    }
    assert package == set(checked)  # every module of msnb has its layer
