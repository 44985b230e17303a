"""A configuration file checked: resolved content plus lint findings (``msnb config``, ``%mfmon_config``)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

import yaml

from ..words import count
from .lint import lint
from .loader import load_config
from .monitor_schema import monitor_settings


@dataclass
class ConfigReport:
    path: str
    config: dict
    files: list
    findings: list = field(default_factory=list)

    def as_dict(self) -> dict:
        return {"config": self.config, "findings": [f.as_dict() for f in self.findings], "files": self.files}

    def to_json(self) -> str:
        return json.dumps(_json_keys(self.as_dict()), indent=2, default=str)

    def format_text(self) -> str:
        lines = [f"# {self.path}"]
        if len(self.files) > 1:
            lines.append("# inherits: " + " <- ".join(self.files[:-1]))
        lines.append(yaml.safe_dump(self.config, sort_keys=False, default_flow_style=False).rstrip())
        lines.append("")
        if self.findings:
            lines.append(f"{count(len(self.findings), 'finding')}:")
            for f in self.findings:
                lines.append(f"  {f}")
                if f.fix:
                    lines.append(f"      fix: {f.fix}")
        else:
            lines.append("No findings.")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"<ConfigReport {os.path.basename(self.path)}: {count(len(self.files), 'file')}, {count(len(self.findings), 'finding')}>"

    def _repr_markdown_(self) -> str:
        rows = "\n".join(f"| {f.severity} | `{f.key}` | {f.message} | {f.fix} | {f.rule} |" for f in self.findings)
        table = f"| severity | key | why | fix | rule |\n|---|---|---|---|---|\n{rows}" if self.findings else "No findings."
        body = yaml.safe_dump(self.config, sort_keys=False).rstrip()
        return f"**{os.path.basename(self.path)}** ({count(len(self.files), 'file')})\n\n```yaml\n{body}\n```\n\n{table}"


def check_config(path: str | os.PathLike, *, steps: int | None = None, distributed: bool | None = None, protobuf_major: int | None = None) -> ConfigReport:
    """Load *path* (inheritance and references applied), validate monitor_config and lint it.

    Args:
        path: a mindformers-style YAML file.
        steps: how many steps the run will take, when known.
        distributed: override what the config says about several devices.
        protobuf_major: the installed protobuf's major version, for the rule that depends on it (None: rule left out).

    Returns:
        A :class:`ConfigReport`.  A file that cannot be loaded, or holds a wrong type, raises :class:`ConfigError`.
    """
    loaded = load_config(path)
    settings = monitor_settings(loaded)
    findings = lint(loaded, settings, steps=steps, distributed=distributed, protobuf_major=protobuf_major)
    return ConfigReport(path=loaded.path, config=loaded.data, files=loaded.files, findings=findings)


def _json_keys(value):
    """*value* with every mapping key JSON can hold: YAML also allows dates and ``!!binary`` as keys (written as text)."""
    if isinstance(value, dict):
        return {k if isinstance(k, (str, int, float, bool)) or k is None else str(k): _json_keys(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_keys(v) for v in value]
    return value
