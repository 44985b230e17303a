"""A mindformers config named as mindformers' docs name it (``configs/qwen3/...``), found in the installed mindformers.

mindformers' wheel installs its ``configs/`` folder beside the package, in
site-packages, where a newcomer would never look; its docs (and msnb's README)
name the configs by that relative path.  When no such file exists where the
user is, :func:`with_shipped_config` takes the installed mindformers' own copy
and says so, and when neither exists the one error line names both places.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from importlib import metadata
from pathlib import Path

from ..errors import SmokeError

SHIPPED_FOLDER = "configs"


def shipped_configs_dir() -> Path | None:
    """The installed mindformers' ``configs/`` folder, from its installed files (mindformers is not imported: it writes ``./output``).

    Returns:
        The folder, or None when mindformers is not installed or ships no configs.
    """
    try:
        dist = metadata.distribution("mindformers")
    except metadata.PackageNotFoundError:
        return None
    if not any(f.parts[:1] == (SHIPPED_FOLDER,) for f in dist.files or ()):
        return None
    folder = Path(dist.locate_file(SHIPPED_FOLDER))
    return folder if folder.is_dir() else None


def resolve_shipped(config) -> tuple[object, str | None]:
    """*config* as given when it exists here (or is absolute, or names no ``configs/`` file); else the installed mindformers' copy.

    Args:
        config: the smoke's config argument (a path, or None).

    Returns:
        (the config to load, a note saying where it was found, or None when nothing was resolved).

    Raises:
        SmokeError: a ``configs/...`` path that is neither here nor among the shipped configs (naming both places).
    """
    if config is None:
        return config, None
    given = Path(config).expanduser()
    if given.is_absolute() or given.exists() or given.parts[:1] != (SHIPPED_FOLDER,) or len(given.parts) < 2:
        return config, None
    root = shipped_configs_dir()
    if root is None:
        return config, None  # the loader's own "file not found" names the path looked at
    version = metadata.version("mindformers")
    candidate = root.joinpath(*given.parts[1:]).resolve()
    if not candidate.is_relative_to(root.resolve()) or not candidate.is_file():
        raise SmokeError(f"{config}: no such file here ({Path.cwd() / given}) nor among the configs mindformers {version} ships ({root}); ls {root} shows them")
    return str(candidate), f"{config} is not in {Path.cwd()}: using the one mindformers {version} ships, {candidate}"


def with_shipped_config(options, stream=None):
    """The smoke's options with a ``configs/...`` name resolved by :func:`resolve_shipped`; the note goes to *stream* (stderr).

    Args:
        options: a :class:`~msnb.smoke.run.options.SmokeOptions`.
        stream: where the note is written (default: ``sys.stderr``, beside the live view and apart from ``--json``).

    Returns:
        The same options, or a copy whose ``config`` is the shipped file.
    """
    config, note = resolve_shipped(options.config)
    if note is None:
        return options
    print(f"msnb smoke: {note}", file=stream or sys.stderr, flush=True)
    return replace(options, config=config)


__all__ = ["shipped_configs_dir", "resolve_shipped", "with_shipped_config"]
