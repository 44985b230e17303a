"""Where a run's training dataset lives: the paths its ``train_dataset.data_loader`` names, and whether they are here.

The smoke trains on the config's own dataset when its files are here, and the pre-flight builds the dataset (and runs
the rules that need it) only then; both read the config's paths the same way, from this module.
"""

from __future__ import annotations

import os
from pathlib import Path

_DATA_PATH_KEYS = ("data_path", "dataset_dir", "path", "data_dir")


def is_mindrecord(train: dict, path: str) -> bool:
    """Whether *path* is read as MindRecord (``MindDataset``, or a ``.mindrecord`` file)."""
    loader = train.get("data_loader") if isinstance(train.get("data_loader"), dict) else {}
    return loader.get("type") == "MindDataset" or path.endswith(".mindrecord")


def dataset_paths(train: dict) -> list:
    """``[(key, path), ...]``: every file path the loader (or its ``config``) names, under the keys loaders use."""
    loader = train.get("data_loader") if isinstance(train.get("data_loader"), dict) else {}
    found = []
    for node in (loader, loader.get("config") if isinstance(loader.get("config"), dict) else {}):
        for key in _DATA_PATH_KEYS:
            value = node.get(key)
            items = value if isinstance(value, list) else [value]
            for item in items:
                if isinstance(item, str) and ("/" in item or os.sep in item) and not _is_number(item):
                    found.append((key, item))
    return found


def _is_number(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        return False


def dataset_exists(path: str) -> bool:
    """Whether *path* is here (a Megatron dataset prefix counts when its ``.bin`` or ``.idx`` is)."""
    p = Path(path).expanduser()
    return p.exists() or Path(str(p) + ".bin").exists() or Path(str(p) + ".idx").exists()


__all__ = ["dataset_exists", "dataset_paths", "is_mindrecord"]
