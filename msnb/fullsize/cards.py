"""The cards msnb knows the memory of, and the card a command was given (``--card NAME`` or ``--card-gb G``).

Kept apart from the memory table so that the option declarations (:mod:`msnb.smoke.run.options`) can name the cards in
every command's help without loading the config reader.
"""

from __future__ import annotations

import math
import re

from ..errors import UsageError

# HBM per card, in GiB, of the Ascend training cards Huawei publishes the memory of (Huawei's Ascend / Atlas product
# pages and datasheets): the Ascend 910 (910A; Atlas 800 training server 9000/9010, Atlas 300T) has 32 GB of HBM2;
# the Ascend 910B has 64 GB (910B1, 910B2, 910B3) or 32 GB (910B4); the Atlas 800T A2 training server carries eight
# 64 GB 910B cards.  The 910C (Atlas A3) is left out: its memory per device as MindSpore sees it is not published
# in a form checked here.  Give --card-gb for any other card.
CARDS = {
    "910A": 32,
    "910": 32,
    "910B1": 64,
    "910B2": 64,
    "910B3": 64,
    "910B4": 32,
    "800T-A2": 64,
}

_NUMBER = re.compile(r"(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_MOST_GIB = 1e6  # no card holds a petabyte: a larger number is a typo, refused


def card_names() -> str:
    """The cards' names as every help lists them."""
    return ", ".join(k for k in CARDS if k != "910")


def _named(card: str) -> tuple[float, str] | None:
    key = card.strip().upper().removeprefix("ASCEND").strip().replace(" ", "-")
    found = next((k for k in CARDS if k.upper() == key), None)
    return (float(CARDS[found]), found) if found is not None else None


def card_size(card_gb=None, card: str | None = None) -> tuple[float | None, str | None]:
    """``(GiB, name)`` of the card: *card_gb* (a number above 0, or a card's name), or *card* looked up in :data:`CARDS`.

    Raises:
        UsageError: both given; an unknown card; a memory that is no finite number above 0 (``nan``, ``inf``, ``-64``, ``0``).
    """
    if card_gb is not None and card is not None:
        raise UsageError("give --card-gb G or --card NAME, not both")
    if card is not None:
        found = _named(str(card))
        if found is None:
            raise UsageError(f"--card {card!r} is not a card msnb knows the memory of ({card_names()}); give --card-gb G")
        return found
    if card_gb is None:
        return None, None
    if isinstance(card_gb, str):
        text = card_gb.strip()
        if not _NUMBER.fullmatch(text):
            found = _named(text)
            if found is None:
                raise UsageError(f"--card-gb {card_gb!r} is not a card's memory in GiB (a number above 0) nor a card msnb knows ({card_names()})")
            return found
        card_gb = float(text)
    if isinstance(card_gb, bool) or not isinstance(card_gb, (int, float)) or not math.isfinite(card_gb) or not 0 < card_gb < _MOST_GIB:
        raise UsageError(f"--card-gb {card_gb!r} is not a card's memory in GiB (a finite number above 0)")
    return float(card_gb), None


__all__ = ["CARDS", "card_names", "card_size"]
