"""The model cards of the wizard's "Choose a model" page and the Models page's Download section: a model whose
download the drive cannot hold says so on its card, with the sizes, before the download starts and fails."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("PySide6")

from app.models.wizard.pair_list import DISK_MARK, PairList  # noqa: E402
from core.hardware.description import HardwareDescription  # noqa: E402
from core.models.catalog import load_catalog  # noqa: E402
from core.models.fit import recommend  # noqa: E402

pytestmark = pytest.mark.qt
FIXTURE = Path(__file__).parent / "fixtures" / "hw" / "gpu24-ram64-pcie4.json"


def cards_for(free_bytes: int | None, installed: set[str] = frozenset()) -> dict[str, str]:
    """Each pair's card as the text of its labels, on a 24 GB card with `free_bytes` free on the models' drive."""
    data = json.loads(FIXTURE.read_text())
    data["disk"]["free_bytes"] = free_bytes
    recommendation = recommend(load_catalog(), HardwareDescription.from_dict(data, source="fixture"))
    cards = PairList()
    cards.show_recommendation(recommendation, set(installed))
    texts = {}
    for row, fit in enumerate(cards.fits):
        card = cards.itemWidget(cards.item(row))
        texts[fit.pair.id] = "\n".join(child.text() for child in card.findChildren(type(card.title)))
    cards.deleteLater()
    return texts


def test_a_drive_too_full_for_a_download_is_said_on_the_card(qtbot):
    full = cards_for(
        30 * 2**30
    )  # 30 GB free (GB as Windows counts them): the 32B pair's 20 GB fits, the 70B pairs' 42 GB do not
    llama = full["llama3.3-70b-instruct-awq"]
    assert f"● {DISK_MARK}" in llama
    assert "Its download needs 42.4 GB on the drive that keeps the models, and 30.0 GB is free there" in llama
    assert DISK_MARK not in full["qwen3-32b-awq"] and DISK_MARK not in full["builtin"]
    roomy = cards_for(500 * 2**30)
    assert not any(DISK_MARK in text for text in roomy.values())
    assert not any(DISK_MARK in text for text in cards_for(None).values())  # free space unknown: nothing claimed
    downloaded = cards_for(30 * 2**30, installed={"llama3.3-70b-instruct-awq"})
    assert DISK_MARK not in downloaded["llama3.3-70b-instruct-awq"]  # already on this computer: nothing to fetch
    # the downloader leaves 512 MB free on the drive, and refuses a download that would not: so does the card
    llama_bytes = load_catalog().pair("llama3.3-70b-instruct-awq").download_bytes
    assert DISK_MARK in cards_for(llama_bytes + (100 << 20))["llama3.3-70b-instruct-awq"]
    assert DISK_MARK not in cards_for(llama_bytes + (600 << 20))["llama3.3-70b-instruct-awq"]
